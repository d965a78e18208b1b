//! The engine's one error type, with the category the CLI maps to an exit code: input errors
//! (a recipe, flag, sidecar or label the user can fix) and infrastructure errors (the store,
//! the environment snapshot, a workload that cannot start: the machine, not the input).

use aorta_source::{Diag, DiagKind};

/// What kind of failure: the CLI's exit code follows from it (README, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Bad input: exit 2.
    Input,
    /// The machine or the store failed: exit 3.
    Infrastructure,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A diagnostic pointing into the input (file, span, field path, hint).
    #[error("{0}")]
    Input(Box<Diag>),
    #[error("{message}")]
    Infrastructure {
        message: String,
        help: Option<String>,
    },
}

impl EngineError {
    /// A usage error with a hint (a flag, a cell name, a missing command).
    pub fn usage(message: impl Into<String>, help: impl Into<String>) -> Self {
        EngineError::Input(Box::new(
            Diag::new(DiagKind::Usage, message).with_help(help),
        ))
    }

    pub fn infra(message: impl Into<String>) -> Self {
        EngineError::Infrastructure {
            message: message.into(),
            help: None,
        }
    }

    pub fn infra_with_help(message: impl Into<String>, help: impl Into<String>) -> Self {
        EngineError::Infrastructure {
            message: message.into(),
            help: Some(help.into()),
        }
    }

    pub fn category(&self) -> Category {
        match self {
            EngineError::Input(_) => Category::Input,
            EngineError::Infrastructure { .. } => Category::Infrastructure,
        }
    }
}

impl From<Box<Diag>> for EngineError {
    fn from(d: Box<Diag>) -> Self {
        EngineError::Input(d)
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
