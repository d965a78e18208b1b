//! Exit codes and the CLI's error type. Every failure carries its category's code (README,
//! "Exit codes"; `aorta --help`):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | the build finished (failing trials are results, as in AORTA) |
//! | 1 | the result is incomplete: no usable baseline, a trial could not run, or under `--strict` a cell errored or ran no trial |
//! | 2 | bad input: a recipe, flag, sidecar registry or label, or an output path that cannot be written (`EngineError::output`) |
//! | 3 | infrastructure: the store, the environment snapshot, a workload that cannot start |
//! | 130 | interrupted (Ctrl-C) |

use aorta_engine::{Category, EngineError};
use aorta_source::{Diag, DiagKind};
use std::process::ExitCode;

pub const INCOMPLETE: u8 = 1;
pub const BAD_INPUT: u8 = 2;
pub const INFRASTRUCTURE: u8 = 3;
pub const INTERRUPTED: u8 = 130;

/// A miette report and the exit code of its category.
pub struct CliError {
    pub report: miette::Report,
    pub code: u8,
}

pub type CliResult = Result<ExitCode, CliError>;

impl From<EngineError> for CliError {
    fn from(e: EngineError) -> Self {
        let code = match e.category() {
            Category::Input => BAD_INPUT,
            Category::Infrastructure => INFRASTRUCTURE,
        };
        let report = match e {
            EngineError::Input(d) => miette::Report::new(*d),
            EngineError::Infrastructure {
                message,
                help: Some(h),
            } => miette::miette!(help = h, "{message}"),
            EngineError::Infrastructure {
                message,
                help: None,
            } => miette::miette!("{message}"),
        };
        CliError { report, code }
    }
}

impl From<Box<Diag>> for CliError {
    fn from(d: Box<Diag>) -> Self {
        CliError {
            report: miette::Report::new(*d),
            code: BAD_INPUT,
        }
    }
}

impl From<aorta_labels::LabelsError> for CliError {
    fn from(e: aorta_labels::LabelsError) -> Self {
        CliError {
            report: miette::Report::new(e),
            code: BAD_INPUT,
        }
    }
}

/// Reports built in the CLI itself are about its input (a flag, a file it was pointed at).
impl From<miette::Report> for CliError {
    fn from(report: miette::Report) -> Self {
        CliError {
            report,
            code: BAD_INPUT,
        }
    }
}

/// A usage error (exit 2) with a hint.
pub fn usage(message: impl Into<String>, help: impl Into<String>) -> CliError {
    CliError {
        report: miette::Report::new(Diag::new(DiagKind::Usage, message).with_help(help)),
        code: BAD_INPUT,
    }
}

/// An infrastructure error (exit 3): the machine, not the input.
pub fn infra(message: impl Into<String>) -> CliError {
    CliError {
        report: miette::miette!("{}", message.into()),
        code: INFRASTRUCTURE,
    }
}
