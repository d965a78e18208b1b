//! `aorta-store`: the local content-addressed store behind aorta's trial cache.
//!
//! Two halves, as in Bazel's remote cache (REAPI) and Buck2:
//!
//! * the **CAS**: immutable blobs (trial outputs: logs, traces) named by the blake3 of their
//!   content, so identical outputs are stored once;
//! * the **action cache (AC)**: trial key → [`Manifest`] (the trial's result summary plus a map
//!   of output paths → blobs). A rerun looks each trial key up and executes only the misses.
//!
//! [`CacheTier`] is what a cache level offers (look up, fetch, put manifests and blobs): the
//! remote tiers (`aorta-remote`: HTTP `/ac/` + `/cas/`, `file://`, S3, GCS) and [`LocalStore`]
//! implement it, and `aorta-remote`'s `Tiered` stacks them local-first. The engine's executors
//! use [`LocalStore`] itself, for what only makes sense locally: per-key [`Claim`]s so
//! concurrent builds never run the same trial twice, [`BuildLock`]s that keep gc out, `stats`,
//! `verify` and `gc`.
//!
//! Integrity rules, relied on throughout: every write is temp-file + fdatasync + rename (one
//! `syncfs` per build makes the directory entries durable),
//! every read is verified (blobs re-hashed, AC entries checksummed and their blobs checked), and
//! a bad AC entry is a [`Lookup::Corrupt`] miss (the trial re-runs) rather than an error. See
//! `docs/store.md` for the on-disk layout and protocols.

mod digest;
mod error;
mod fsio;
mod local;
mod lock;
mod maint;
mod manifest;
mod materialize;

pub use digest::{validate_hex, Digest, HexError, Key};
pub use error::{Result, StoreError};
pub use fsio::sync_filesystem;
pub use local::{default_store_root, LocalStore, Store, STORE_FORMAT_VERSION};
pub use lock::{BuildLock, Claim, DetachedClaim, Waiting};
pub use maint::{GcPolicy, GcReport, Problem, StoreStats, VerifyReport};
pub use manifest::{
    rfc3339_utc, validate_output_path, BlobRef, EntryError, Manifest, ManifestError, AC_FORMAT,
};

/// The checksummed AC envelope bytes for `m`, exactly as the local store writes them (a remote
/// tier stores the same bytes under `ac/`).
pub fn encode_ac_entry(m: &Manifest) -> serde_json::Result<Vec<u8>> {
    manifest::encode_entry(m)
}

/// Parses and verifies AC envelope bytes for `expected` (format, key, checksum, output paths);
/// the `Err` says why, to be shown as [`Lookup::Corrupt`]'s reason.
pub fn decode_ac_entry(bytes: &[u8], expected: &Key) -> std::result::Result<Manifest, EntryError> {
    manifest::decode_entry(bytes, expected)
}

use std::path::Path;

/// Result of an action-cache lookup, the trial record read as `T` (a JSON value by default).
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<T = serde_json::Value> {
    /// A verified entry whose blobs are all present.
    Hit(Manifest<T>),
    Miss,
    /// There was an entry but it can't be trusted (unparseable, checksum mismatch, dangling blob
    /// reference, …). Treat as a miss and re-run; `reason` is worth showing the user.
    Corrupt {
        reason: String,
    },
}

impl<T> Lookup<T> {
    /// The manifest on a hit; `None` for a miss of either kind.
    pub fn hit(self) -> Option<Manifest<T>> {
        match self {
            Lookup::Hit(m) => Some(m),
            _ => None,
        }
    }

    pub fn is_hit(&self) -> bool {
        matches!(self, Lookup::Hit(_))
    }
}

/// One level of cache (local disk now; remote later). The executor only talks to this.
///
/// Contract for implementors (see `docs/store.md`):
/// * `get_manifest` returns `Hit` only for an entry whose checksum verified and whose blobs are
///   all retrievable from *this* tier; anything doubtful is `Corrupt { reason }`, never an error.
/// * `get_blob_to` verifies the content hash before the file appears at `dest` (atomically), and
///   fails with [`StoreError::Corrupt`] otherwise.
/// * `put_manifest` refuses a manifest whose blobs the tier doesn't have: upload blobs first.
/// * Paths are only built from validated [`Key`]/[`Digest`]s; output paths from a manifest are
///   checked with [`validate_output_path`] before anything is written.
pub trait CacheTier: Send + Sync {
    fn get_manifest(&self, key: &Key) -> Result<Lookup>;
    fn put_manifest(&self, key: &Key, m: &Manifest) -> Result<()>;
    fn has_blob(&self, d: &Digest) -> Result<bool>;
    fn get_blob_to(&self, d: &Digest, dest: &Path) -> Result<()>;
    /// Uploads a file; returns its digest and size (what a manifest's `outputs` needs).
    fn put_blob_from(&self, src: &Path) -> Result<BlobRef>;
}
