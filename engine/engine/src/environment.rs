//! The environment snapshot every trial key embeds: probed once per invocation (again, deep,
//! the first time a recipe keys an import-only field), or read from a recorded file
//! (`--env-snapshot`, `$AORTA_ENV_SNAPSHOT`: a Buck2 action's declared input, a CI artefact).

use crate::error::{EngineError, Result};
use aorta_probe::{probe, EnvKey, KeyRules, ProbeCache, ProbeOptions, Snapshot};
use aorta_recipe::Recipe;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where the snapshot comes from.
#[derive(Debug, Clone, Default)]
pub struct EnvSource {
    /// A recorded snapshot, used as it is.
    pub snapshot_file: Option<PathBuf>,
    /// The interpreter whose PyTorch the probe describes.
    pub python: Option<PathBuf>,
}

impl EnvSource {
    /// The flags first, then `$AORTA_ENV_SNAPSHOT` and `$AORTA_PYTHON`.
    pub fn resolve(snapshot_file: Option<PathBuf>, python: Option<PathBuf>) -> Self {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        EnvSource {
            snapshot_file: snapshot_file.or_else(|| env("AORTA_ENV_SNAPSHOT")),
            python: python.or_else(|| env("AORTA_PYTHON")),
        }
    }
}

/// The snapshot as written to a run directory's `environments/<name>/env.json`: the probe's
/// record plus the key the trials used and the fields that fed it.
#[derive(Debug, Clone, Serialize)]
pub struct EnvRecord {
    #[serde(flatten)]
    pub snapshot: Arc<Snapshot>,
    /// Written as env.json's `key` (the hash) and `keyed_fields`.
    #[serde(flatten, serialize_with = "key_as_recorded")]
    pub key: EnvKey,
}

impl EnvRecord {
    pub fn new(snapshot: Arc<Snapshot>, key: EnvKey) -> Self {
        EnvRecord { snapshot, key }
    }
}

/// env.json's names for the key's two parts.
fn key_as_recorded<S: serde::Serializer>(
    key: &EnvKey,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Recorded<'a> {
        key: &'a str,
        keyed_fields: &'a BTreeMap<String, serde_json::Value>,
    }
    Recorded {
        key: &key.hash,
        keyed_fields: &key.fields,
    }
    .serialize(s)
}

/// The recipe's `env_key` rules in the probe's terms.
pub fn key_rules(recipe: &Recipe) -> KeyRules {
    KeyRules::new(
        recipe.env_key.include.clone(),
        recipe.env_key.exclude.clone(),
    )
}

/// Where the probe caches its interpreter report: the machine's Python is the same for every
/// workspace, so the cache lives with the user, not in one store. `$AORTA_PROBE_CACHE`, else
/// `$XDG_CACHE_HOME/aorta/probe`, else `~/.cache/aorta/probe`, else `<store>/probe-cache`.
/// Entries are validated by a fingerprint of the interpreter and its packages.
pub fn probe_cache_dir(store_root: &Path) -> PathBuf {
    let non_empty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = non_empty("AORTA_PROBE_CACHE") {
        return d;
    }
    if let Some(d) = non_empty("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return d.join("aorta").join("probe");
    }
    if let Some(h) = non_empty("HOME").filter(|d| d.is_absolute()) {
        return h.join(".cache").join("aorta").join("probe");
    }
    store_root.join("probe-cache")
}

/// Probe options for this machine: the built-in mitigations' env vars are recorded too.
pub fn probe_options(python: Option<PathBuf>, cache: Option<PathBuf>, deep: bool) -> ProbeOptions {
    let mut opts = ProbeOptions::current();
    opts.python = python;
    opts.extra_env_vars = aorta_registry::Registry::builtin().mitigation_env_vars();
    opts.cache = cache.map(ProbeCache::new);
    opts.deep = deep;
    opts
}

/// Probes this machine (`aorta env probe`, `aorta env key`).
pub fn probe_machine(python: Option<PathBuf>, cache: Option<PathBuf>, deep: bool) -> Snapshot {
    let opts = probe_options(python, cache, deep);
    probe(&opts)
}

/// A recorded snapshot that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    #[error("cannot read the env snapshot {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: aorta_probe::SnapshotError,
    },
}

impl SnapshotFileError {
    /// AORTA's own env.json, where aorta's snapshot is needed (to key trials): it can only be
    /// compared ([`load_for_diff`]).
    pub fn is_aorta(&self) -> bool {
        matches!(
            self,
            SnapshotFileError::Parse {
                source: aorta_probe::SnapshotError::Aorta { .. },
                ..
            }
        )
    }
}

/// What to do with AORTA's env.json where aorta's snapshot is needed.
pub const AORTA_SNAPSHOT_HELP: &str = "compare it with this machine's snapshot: `aorta env diff AORTA.json env.json` (env.json from `aorta env probe`); to key trials, pass a snapshot written by `aorta env probe`";

/// Reads a recorded snapshot of aorta's own, the one that keys trials; the error says what is
/// wrong with the file (AORTA's env.json: [`SnapshotFileError::is_aorta`]).
pub fn load_snapshot(path: &Path) -> std::result::Result<Snapshot, SnapshotFileError> {
    read_snapshot(path, Snapshot::from_json)
}

/// [`load_snapshot`], or AORTA's own env.json imported (`aorta env diff`).
pub fn load_for_diff(path: &Path) -> std::result::Result<Snapshot, SnapshotFileError> {
    read_snapshot(path, Snapshot::from_json_or_aorta)
}

fn read_snapshot(
    path: &Path,
    parse: fn(&str) -> std::result::Result<Snapshot, aorta_probe::SnapshotError>,
) -> std::result::Result<Snapshot, SnapshotFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| SnapshotFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|source| SnapshotFileError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// One snapshot per session. The flag says whether it serves rules that key import-only
/// fields: a deep probe, or a recorded file (used as it is).
#[derive(Default)]
pub(crate) struct SnapshotSlot(Mutex<Option<(Arc<Snapshot>, bool)>>);

impl SnapshotSlot {
    /// The snapshot, probed or loaded at most once (probed again, deep, when first needed: a
    /// deep snapshot has every default-keyed field of a plain one, so earlier keys stay valid).
    pub(crate) fn get(
        &self,
        src: &EnvSource,
        probe_cache: PathBuf,
        deep: bool,
    ) -> Result<Arc<Snapshot>> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((s, serves_deep)) = slot.as_ref() {
            if *serves_deep || !deep {
                return Ok(s.clone());
            }
        }
        let t0 = std::time::Instant::now();
        let snap = match &src.snapshot_file {
            // The snapshot keys every trial: without it nothing can be looked up or run.
            Some(f) => load_snapshot(f).map_err(|e| match e.is_aorta() {
                // The user's input, not the machine: exit 2.
                true => EngineError::usage(
                    format!("--env-snapshot / AORTA_ENV_SNAPSHOT: {e}"),
                    AORTA_SNAPSHOT_HELP,
                ),
                false => EngineError::infra_with_help(e.to_string(), "pass an env.json written by `aorta env probe`, or unset AORTA_ENV_SNAPSHOT to probe this machine"),
            })?,
            None => probe_machine(src.python.clone(), Some(probe_cache), deep),
        };
        crate::timing(
            if deep {
                "env snapshot (deep)"
            } else {
                "env snapshot"
            },
            t0,
        );
        let arc = Arc::new(snap);
        *slot = Some((arc.clone(), deep || src.snapshot_file.is_some()));
        Ok(arc)
    }
}

/// The snapshot and this recipe's key over it.
pub(crate) fn environment(
    slot: &SnapshotSlot,
    src: &EnvSource,
    probe_cache: PathBuf,
    recipe: &Recipe,
) -> Result<EnvRecord> {
    let rules = key_rules(recipe);
    let deep = rules.needs_deep();
    let snap = slot.get(src, probe_cache, deep)?;
    if deep && snap.pytorch.collected.as_deref() == Some(aorta_probe::COLLECTED_FILES) {
        eprintln!("warning: the recipe's env_key keys fields only `aorta env probe --deep` collects (pytorch.build, sdpa, numerics, ...), but the environment snapshot has none: they enter its key as null (record the snapshot with --deep)");
    }
    let key = snap.key(&rules);
    Ok(EnvRecord::new(snap, key))
}

/// A recorded snapshot (a Slurm partition's) and this recipe's key over it.
pub(crate) fn recorded(file: &Path, recipe: &Recipe) -> Result<EnvRecord> {
    let snap = load_snapshot(file).map_err(|e| EngineError::infra(e.to_string()))?;
    let key = snap.key(&key_rules(recipe));
    Ok(EnvRecord::new(Arc::new(snap), key))
}

/// [`probe_cache_dir`] for commands without a session (`aorta env probe|key`): the store root
/// is the default one of the current directory's workspace.
pub fn default_probe_cache_dir() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    probe_cache_dir(&aorta_store::default_store_root(
        &aorta_labels::find_workspace_root(&cwd),
    ))
}

pub use aorta_probe::diff;
