//! The bundler's errors: the run directory is wrong (input) or the machine failed (I/O).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{} is not a run directory (it has no matrix.json)", .0.display())]
    NotARun(PathBuf),
    #[error("{} is a symlink that leaves the run directory", .0.display())]
    UnsafeSymlink(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The archive's path (the user's `-o`) cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest.json: {0}")]
    Json(#[source] serde_json::Error),
    #[error("manifest.json has schema_version {0:?}; this aorta reads aorta.bundle/1")]
    Schema(String),
    #[error("the archive has no manifest.json")]
    NoManifest,
}

impl BundleError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        BundleError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn output(path: &Path, source: std::io::Error) -> Self {
        BundleError::Output {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The user pointed at the wrong thing (exit 2), rather than the machine failing (exit 3).
    /// An output path that cannot be written is the user's when `aorta_fsutil::user_path_error`
    /// says so (a read-only directory, a FIFO with no reader), the machine's otherwise.
    pub fn is_input(&self) -> bool {
        match self {
            BundleError::Io { .. } => false,
            BundleError::Output { source, .. } => aorta_fsutil::user_path_error(source),
            _ => true,
        }
    }
}
