//! Why a probe step could not fill a field. Each `Display` is the `partial_reasons` text the
//! snapshot records (tests and users read it), so the wording is part of the format; the
//! variants keep the path, the tool and the `io::Error` for code that wants more than the text.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A file the probe reads, a tool it runs, or a report it parses went wrong.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("cannot read {}: {}", path.display(), io_reason(source))]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not UTF-8", path.display())]
    NotUtf8 { path: PathBuf },
    #[error("{} is empty", path.display())]
    Empty { path: PathBuf },
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("waiting for {}: {source}", program.display())]
    Wait {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{name} timed out after {}", fmt_duration(*timeout))]
    Timeout { name: String, timeout: Duration },
    #[error("{name} not on PATH")]
    NotOnPath { name: String },
    /// A tool ran and failed; `command` is written as the reason shows it.
    #[error("{command} {exit}")]
    Failed { command: String, exit: Exit },
    #[error("{} printed no probe report ({exit})", interp.display())]
    NoReport { interp: PathBuf, exit: Exit },
    #[error("{} printed an unreadable probe report: {source}", interp.display())]
    BadReport {
        interp: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("amd-smi static --json printed invalid JSON: {0}")]
    AmdJson(#[source] serde_json::Error),
    #[error("{} sets no __version__", path.display())]
    NoTorchVersion { path: PathBuf },
    #[error("not glibc (getconf GNU_LIBC_VERSION and ldd --version gave no glibc version)")]
    NotGlibc,
}

/// How a finished tool failed: its exit code (`None`: a signal) and the last line it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exit {
    pub code: Option<i32>,
    pub tail: Option<String>,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(c) => write!(f, "exited with status {c}")?,
            None => write!(f, "was killed by a signal")?,
        }
        match &self.tail {
            Some(t) => write!(f, ": {t}"),
            None => Ok(()),
        }
    }
}

/// Why a library file has no size and hash. `Clone` (the `io::Error` behind an `Arc`) because
/// one failed piece fails the file's every merge.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HashError {
    #[error("cannot resolve {}: {}", path.display(), io_reason(source))]
    Resolve {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("cannot stat {}: {source}", path.display())]
    Stat {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("cannot read {}: {}", path.display(), io_reason(source))]
    Open {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
    #[error("{} was not hashed", path.display())]
    NotHashed { path: PathBuf },
    /// A piece came back as the wrong kind of hash: a bug, not the file.
    #[error("internal: {0}")]
    Internal(&'static str),
}

/// The short reason for the common I/O errors ("no such file"), else the error's own text.
pub(crate) fn io_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such file".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

fn fmt_duration(d: Duration) -> String {
    if d.as_millis() % 1000 == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Why a text is not an env snapshot ([`crate::Snapshot::from_json`]). `Display` is the
/// message the CLI and engine print after the file's path.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("an env snapshot is a JSON object")]
    NotObject,
    #[error("schema_version '{0}' is neither an aorta env snapshot (aorta.env/N) nor AORTA's env.json (1.N)")]
    OtherSchema(String),
    #[error("no schema_version: not an aorta env snapshot")]
    NoSchema,
    #[error("malformed env snapshot: {0}")]
    Malformed(#[source] serde_json::Error),
    /// AORTA's env.json where only aorta's own snapshot will do (a trial key): it records no
    /// NVIDIA GPU, driver or CUDA library and no library hashes aorta keys, so machines that
    /// differ would share results.
    #[error("this is {from}'s env.json (schema {schema}), which cannot key trials: it lacks what aorta keys (GPU model and driver, CUDA libraries, library and torch wheel hashes)")]
    Aorta { schema: String, from: String },
    #[error("AORTA env.json (schema {schema}): {source}")]
    AortaMalformed {
        schema: String,
        #[source]
        source: crate::import::ImportError,
    },
}
