//! The store's error type. Every variant names the path involved, what went wrong and what the
//! user can do about it, because these surface verbatim in `aorta` output.
//!
//! Note what is *not* an error: a corrupt or dangling action-cache entry is a
//! [`Lookup::Corrupt`](crate::Lookup::Corrupt) (a miss with a reason), because the right reaction
//! is to re-run the trial, not to abort the build.

use crate::digest::{Digest, HexError};
use std::io;
use std::path::PathBuf;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What the store was doing, e.g. "create temp file in".
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "corrupt blob {}: expected blake3 {expected}, content hashes to {actual}; \
         it has been quarantined, re-run the trial to regenerate it \
         (`aorta cache verify --repair` checks the whole store)",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        expected: Digest,
        actual: String,
    },

    #[error("blob {digest} is missing from the store ({}); re-run the trial that produced it", path.display())]
    MissingBlob { digest: Digest, path: PathBuf },

    #[error(
        "store {} has format version {found}, newer than the {supported} this aorta understands; \
         upgrade aorta, or point AORTA_STORE at a different directory",
        root.display()
    )]
    UnsupportedVersion {
        root: PathBuf,
        found: u64,
        supported: u64,
    },

    #[error(
        "store {}: VERSION file is unreadable ({detail}); if this is not an aorta store, \
         point AORTA_STORE elsewhere, otherwise delete the directory to start afresh",
        root.display()
    )]
    BadVersion { root: PathBuf, detail: String },

    #[error("refusing to use {}: {reason}; remove it (the store recreates what it needs)", path.display())]
    UnsafeEntry { path: PathBuf, reason: String },

    /// `key` is empty where the manifest is not known (a blob fetched by digest).
    #[error("invalid manifest for trial {key}: {source}")]
    InvalidManifest {
        key: String,
        #[source]
        source: crate::ManifestError,
    },

    #[error(
        "store {} is busy: {what}; try again when it finishes",
        root.display()
    )]
    Busy { root: PathBuf, what: &'static str },

    #[error("{} changed while it was being stored (hash {first} then {second}); is something still writing it?", path.display())]
    SourceChanged {
        path: PathBuf,
        first: Digest,
        second: Digest,
    },

    /// A remote cache tier could not do what was asked (unreachable, refused, bad answer). The
    /// tiering layer treats this as "no remote" for the operation; it never fails a build.
    #[error("remote cache {url}: {reason}")]
    Remote { url: String, reason: String },

    #[error(transparent)]
    InvalidHex(#[from] HexError),
}

impl StoreError {
    /// Builds a `map_err` closure that tags an I/O error with the operation and path.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::Io { op, path, source }
    }
}
