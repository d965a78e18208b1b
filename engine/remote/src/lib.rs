//! `aorta-remote`: a remote tier for the trial cache, behind the store's [`CacheTier`] trait.
//!
//! Layout on every back-end, below `<url>/<namespace>/`:
//!
//! ```text
//! ac/12/1234…      the action-cache envelope for trial key 1234… (same bytes as the local store's)
//! cas/ab/abcd…     blob abcd… (a trial output), named by its blake3
//! ```
//!
//! Rules, as `docs/store.md` asks of any tier:
//! * every download is verified before use: AC envelopes by checksum, key and output paths
//!   (and, with a signing key configured, by their signature: `sign.rs`); blobs by re-hashing
//!   while they stream into a temp file, renamed only on a match;
//! * `Hit` only when every blob the entry names is present remotely;
//! * uploads only of entries the local store has just verified, blobs first, manifest last;
//! * never a build failure: the [`Tiered`] layer turns every remote problem into "no remote
//!   for this trial", and the first sign that the cache is unreachable switches it off for the
//!   rest of the process (one timeout, not one per trial).

mod backend;
#[cfg(feature = "cloud")]
mod cloud;
mod config;
mod error;
mod sign;
mod tier;

pub use backend::{Backend, Failure, FileBackend, HttpBackend, TMP_MAX_AGE};
pub use config::{
    parse_location, parse_seconds, validate_namespace, Location, Mode, RemoteConfig, Settings,
    DEFAULT_NAMESPACE, DEFAULT_RETRIES, DEFAULT_TIMEOUT,
};
pub use error::ConfigError;
pub use sign::{SignatureError, SigningKey, MIN_SECRET_BYTES};
pub use tier::{Pulled, RemoteCache, RemoteStats, Tiered};

/// Whether this build of aorta can talk to `s3://` / `gs://` caches.
pub const CLOUD_SUPPORT: bool = cfg!(feature = "cloud");

/// Opens the back-end `cfg` names. Fails only for a configuration aorta cannot use (an
/// `s3://` URL without the `cloud` feature); reachability is found out on first use.
pub fn open(cfg: &RemoteConfig) -> Result<RemoteCache, ConfigError> {
    let backend: Box<dyn Backend> = match &cfg.location {
        Location::File(dir) => Box::new(FileBackend::new(dir.clone())),
        Location::Http(base) => Box::new(HttpBackend::new(base.clone(), cfg.timeout, cfg.bearer_token.clone())),
        #[cfg(feature = "cloud")]
        Location::Cloud(url) => Box::new(cloud::CloudBackend::new(url, cfg.timeout).map_err(|e| ConfigError::new(format!("remote cache: {e}"), "check the bucket URL and the AWS_* / GOOGLE_* credentials"))?),
        #[cfg(not(feature = "cloud"))]
        Location::Cloud(url) => {
            return Err(ConfigError::new(
                format!("remote cache {url}: this aorta was built without s3:// and gs:// support"),
                "rebuild aorta with the `cloud` feature (`cargo build --release -p aorta-cli --features cloud`), or use an http(s):// or file:// cache",
            ))
        }
    };
    Ok(RemoteCache::new(cfg.clone(), backend))
}
