//! The environment snapshot behind `aorta env probe|diff|key` (docs/env-snapshot.md).
//!
//! - [`probe`] never fails: every field is present (`null` when unknown), and `partial` +
//!   `partial_reasons` name each field the probe expected but could not read, and why.
//! - [`Snapshot::key`] hashes the fields that change results under [`KeyRules`] (defaults plus
//!   a recipe's `env_key: {include, exclude}`); trial keys embed it.
//! - [`diff`] compares two snapshots section by section, marking key-relevant differences.
//! - [`ProbeCache`] keeps the interpreter's answer (and the deep probe's `import torch`) and
//!   library hashes on disk, so a warm probe starts no Python.
//!
//! Everything is gathered by subprocesses and file reads: the probe never loads CUDA, ROCm or
//! libtorch into aorta. By default it never imports torch either (torch is described from its
//! files); [`ProbeOptions::deep`] adds the fields only `import torch` can give, in a process
//! that never creates a GPU context.

mod cache;
mod cmd;
mod cuda;
mod diff;
mod driver;
mod envvars;
mod error;
mod field;
mod gpu;
mod host;
mod import;
mod installed;
mod key;
mod libs;
mod linkage;
mod python;
mod report;
mod rocm;
mod run;
mod schema;
mod stack;
mod summary;
mod util;

pub use aorta_fieldpattern::matches as pattern_matches;
pub use cache::ProbeCache;
pub use diff::{
    diff, diff_env_vars_sides, Change, Diff, DiffEntry, DiffSection, EnvVarsSide, Prepared,
    Uncompared, Unlisted,
};
pub use envvars::{canonical_names, AORTA_ENV_VARS, NVIDIA_ENV_VARS, TRACKED_PREFIXES};
pub use error::SnapshotError;
pub use field::{lookup, FieldError};
pub use import::ImportError;
pub use key::KeyPatternError;
pub use key::{flatten, EnvKey, KeyRules, DEFAULT_EXCLUDE, DEFAULT_INCLUDE, KEY_DOMAIN};
pub use python::{COLLECTED_FILES, COLLECTED_IMPORT};
pub use schema::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use util::{Reasons, Steps};

/// What to probe and how.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// The interpreter whose torch is described (`--python`); default: `$VIRTUAL_ENV`'s, then
    /// `$CONDA_PREFIX`'s, then `python3` on `PATH`.
    pub python: Option<PathBuf>,
    /// The environment: variables are read from it, tools are found on its `PATH`, and every
    /// subprocess gets exactly it.
    pub env: BTreeMap<String, String>,
    /// Variables recorded on top of the canonical lists (the CLI passes
    /// `Registry::mitigation_env_vars()`).
    pub extra_env_vars: BTreeSet<String>,
    /// Filesystem root for the fixed paths (`/proc`, `/sys`, `/etc`, `/dev`, `/opt/rocm`,
    /// `/usr/local/cuda`, `/.dockerenv`); `/` except in tests.
    pub root: PathBuf,
    pub timeouts: Timeouts,
    /// `None`: no cache; every probe runs the interpreter and hashes libraries.
    pub cache: Option<ProbeCache>,
    /// Also `import torch` for the import-only fields ([`IMPORT_ONLY_FIELDS`]: build config,
    /// SDPA and numerics flags, allocator backend, mapped libraries). Cached per install like
    /// the default answer. Never changes a default-keyed field, so never the default key.
    pub deep: bool,
}

/// Deadlines for the subprocesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `nvidia-smi`, `nvcc`, `ldconfig`, `amd-smi`, … (AORTA: 5 s).
    pub tool: Duration,
    /// The interpreter (a deep probe's `import torch` takes 3–6 s on the H200 machine).
    pub python: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tool: Duration::from_secs(5),
            python: Duration::from_secs(60),
        }
    }
}

impl Default for ProbeOptions {
    /// An empty environment, root `/`, no cache (use [`ProbeOptions::current`] for the real one).
    fn default() -> Self {
        ProbeOptions {
            python: None,
            env: BTreeMap::new(),
            extra_env_vars: BTreeSet::new(),
            root: PathBuf::from("/"),
            timeouts: Timeouts::default(),
            cache: None,
            deep: false,
        }
    }
}

impl ProbeOptions {
    /// This process's environment, root `/`, no cache.
    pub fn current() -> Self {
        ProbeOptions {
            env: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            ..Self::default()
        }
    }
}

/// Probes the machine. Never fails and never panics outward: an internal panic yields a
/// fully shaped snapshot (env vars still recorded) with `partial: true` and a `probe` reason.
pub fn probe(opts: &ProbeOptions) -> Snapshot {
    let started = Instant::now();
    let reasons = Reasons::default();
    let steps = Steps::default();
    let collected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run::snapshot(opts, &reasons, &steps)
    }));
    let mut snap = collected.unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        reasons.add("probe", format!("unexpected failure ({msg})"));
        Snapshot::default()
    });
    // Recorded even when the probe failed: they are often why.
    snap.env_vars = envvars::collect(&opts.env, &opts.extra_env_vars);
    snap.partial_reasons = reasons.take();
    snap.partial = !snap.partial_reasons.is_empty();
    snap.captured_at = Some(util::now_rfc3339());
    snap.probe.aorta_probe_version = Some(env!("CARGO_PKG_VERSION").to_string());
    snap.probe.steps_ms = steps.take();
    snap.probe.duration_ms = Some(started.elapsed().as_millis() as u64);
    snap
}

impl Snapshot {
    /// Parses a snapshot written by [`probe`] (any `aorta.env/*` schema; unknown keys ignored,
    /// missing ones back-filled): what keys trials. AORTA's own env.json is refused with
    /// [`SnapshotError::Aorta`], which says to compare it instead.
    pub fn from_json(text: &str) -> Result<Snapshot, SnapshotError> {
        Self::read(text, false)
    }

    /// [`Snapshot::from_json`], or AORTA's env.json (schema `1.N`) imported for comparing
    /// (`aorta env diff`): its fields with a counterpart mapped, the rest listed in
    /// `probe.imported`.
    pub fn from_json_or_aorta(text: &str) -> Result<Snapshot, SnapshotError> {
        Self::read(text, true)
    }

    /// Whether `schema` is AORTA's env.json's (`1.N`), which only
    /// [`Snapshot::from_json_or_aorta`] reads: how a reader that takes either kind (`aorta
    /// bisect env`) tells them apart before choosing.
    pub fn is_aorta_schema(schema: &str) -> bool {
        import::is_aorta_schema(schema)
    }

    fn read(text: &str, import_aorta: bool) -> Result<Snapshot, SnapshotError> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(SnapshotError::NotJson)?;
        let serde_json::Value::Object(doc) = v else {
            return Err(SnapshotError::NotObject);
        };
        match doc.get("schema_version").and_then(|s| s.as_str()) {
            Some(s) if s.starts_with("aorta.env/") => {}
            Some(s) if import::is_aorta_schema(s) && import_aorta => {
                return import::import(&doc, s).map_err(|source| SnapshotError::AortaMalformed {
                    schema: s.to_string(),
                    source,
                })
            }
            Some(s) if import::is_aorta_schema(s) => {
                return Err(SnapshotError::Aorta {
                    from: import::release_label(s).unwrap_or_else(|| "AORTA".to_string()),
                    schema: s.to_string(),
                })
            }
            Some(s) => return Err(SnapshotError::OtherSchema(s.to_string())),
            None => return Err(SnapshotError::NoSchema),
        }
        serde_json::from_value(serde_json::Value::Object(doc)).map_err(SnapshotError::Malformed)
    }

    /// Pretty JSON, fields in schema order.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
