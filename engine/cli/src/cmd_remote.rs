//! `--remote-cache URL` and friends: which remote tier a build reads (and writes), from the
//! flags, `$AORTA_REMOTE_CACHE*`, or the `[aorta]` section of the workspace's `.buckconfig`.

use aorta_remote::{RemoteCache, RemoteStats, Settings};
use clap::Args;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Args, Clone, Default)]
pub struct RemoteArgs {
    /// Remote cache: file:///dir, http(s)://host/prefix (GET/PUT/HEAD), s3://bucket/prefix,
    /// gs://bucket/prefix; `off` disables one set in the environment or project config
    /// [env: AORTA_REMOTE_CACHE].
    #[arg(long, value_name = "URL")]
    pub remote_cache: Option<String>,
    /// `read` (default): use remote hits only; `readwrite`: also upload what this build executed
    /// [env: AORTA_REMOTE_CACHE_MODE].
    #[arg(long, value_name = "MODE", value_parser = ["read", "readwrite"])]
    pub remote_cache_mode: Option<String>,
    /// Namespace (salt) under the URL; change it to disown a poisoned set (default `default`)
    /// [env: AORTA_REMOTE_CACHE_NAMESPACE].
    #[arg(long, value_name = "NAME")]
    pub remote_cache_namespace: Option<String>,
    /// Per-request timeout (seconds, or e.g. 500ms; default 10); an unreachable cache is
    /// switched off after one [env: AORTA_REMOTE_CACHE_TIMEOUT].
    #[arg(long, value_name = "SECONDS")]
    pub remote_cache_timeout: Option<String>,
}

/// One remote tier per process: `aorta build //recipes/...` builds several recipes, and an
/// unreachable cache must cost one timeout in all, not one per recipe. Every caller in one
/// invocation passes the same flags.
static OPENED: OnceLock<Option<Arc<RemoteCache>>> = OnceLock::new();
/// The counts already reported, so each build's line shows its own.
static REPORTED: Mutex<Option<RemoteStats>> = Mutex::new(None);

/// The remote tier to use, if any. A bad setting is an error (exit 2); an unreachable cache is
/// not (it is found out, and skipped, during the build).
pub fn open(a: &RemoteArgs) -> miette::Result<Option<Arc<RemoteCache>>> {
    if let Some(r) = OPENED.get() {
        return Ok(r.clone());
    }
    let r = open_uncached(a)?;
    Ok(OPENED.get_or_init(|| r).clone())
}

fn open_uncached(a: &RemoteArgs) -> miette::Result<Option<Arc<RemoteCache>>> {
    let flags = Settings { url: a.remote_cache.clone(), mode: a.remote_cache_mode.clone(), namespace: a.remote_cache_namespace.clone(), timeout: a.remote_cache_timeout.clone(), retries: None };
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    let project = Settings::from_project(&aorta_labels::find_workspace_root(&cwd));
    let settings = flags.or(Settings::from_env()).or(project);
    let bad = |e: aorta_remote::ConfigError| crate::cmd_sweep::usage(e.message, e.help);
    let Some(cfg) = settings.resolve().map_err(bad)? else { return Ok(None) };
    Ok(Some(Arc::new(aorta_remote::open(&cfg).map_err(bad)?)))
}

/// One stderr line after a build that used a remote cache.
pub fn report(remote: Option<&Arc<RemoteCache>>) {
    let Some(r) = remote else { return };
    let total = r.stats();
    let mut reported = REPORTED.lock().unwrap_or_else(|p| p.into_inner());
    let before = reported.replace(total.clone()).unwrap_or_default();
    let s = RemoteStats {
        downloaded: total.downloaded - before.downloaded,
        misses: total.misses - before.misses,
        rejected: total.rejected - before.rejected,
        uploaded: total.uploaded - before.uploaded,
        already_present: total.already_present - before.already_present,
        errors: total.errors - before.errors,
        disabled: total.disabled,
    };
    let mut line = format!("aorta: remote cache {} ({}, namespace {}): {} downloaded, {} uploaded", r.config().url, r.mode().as_str(), r.config().namespace, s.downloaded, s.uploaded);
    if s.already_present > 0 {
        line += &format!(", {} already there", s.already_present);
    }
    if s.rejected > 0 {
        line += &format!(", {} rejected (did not verify)", s.rejected);
    }
    if s.disabled.is_some() {
        line += ", unreachable (skipped)";
    } else if s.errors > 0 {
        line += &format!(", {} errors (skipped)", s.errors);
    }
    eprintln!("{line}");
}
