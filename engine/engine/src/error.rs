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

/// The hint of an output path that is the user's to fix.
pub const OUTPUT_HELP: &str = "name a path you can write: a new or regular file (or an empty \
     directory where a directory goes) in a writable directory, a device, or a FIFO with a \
     reader (docs/store.md, \"User-named outputs\")";

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

    /// A path the user named (or a file aorta writes in a directory the user named) that
    /// cannot be written: bad input (exit 2) when it is the path's fault, whatever the writer
    /// (read-only directory, permission, a directory or a FIFO with no reader where a file
    /// goes: `aorta_fsutil::user_path_error`), infrastructure (exit 3) when it is the
    /// machine's (a full disk, an I/O error). `message` says what could not be written.
    pub fn output(message: impl Into<String>, e: &std::io::Error) -> Self {
        let message = format!("{}: {e}", message.into());
        if aorta_fsutil::user_path_error(e) {
            EngineError::usage(message, OUTPUT_HELP)
        } else {
            EngineError::infra(message)
        }
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
