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

    /// The user pointed at the wrong thing (exit 2), rather than the machine failing (exit 3).
    pub fn is_input(&self) -> bool {
        !matches!(self, BundleError::Io { .. })
    }
}
