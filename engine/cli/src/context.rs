//! The facts outside a recipe that trial keys depend on, gathered once per invocation: input
//! file hashes and the environment snapshot whose key every trial key embeds.

use crate::args::ExecArgs;
use aorta_graph::{hash_inputs, KeyContext};
use aorta_probe::{probe, EnvKey, KeyRules, ProbeCache, ProbeOptions, Snapshot};
use aorta_recipe::Recipe;
use aorta_source::{Diag, DiagKind};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Where the environment snapshot comes from: a recorded file (`--env-snapshot`,
/// `$AORTA_ENV_SNAPSHOT`: a Buck2 action's declared input, a CI artefact, a test fixture) or a
/// probe of this machine through `--python` / `$AORTA_PYTHON`, cached in the store.
#[derive(Debug, Clone, Default)]
pub struct EnvSource {
    pub snapshot_file: Option<PathBuf>,
    pub python: Option<PathBuf>,
    pub store: Option<PathBuf>,
}

impl EnvSource {
    /// From the environment only (commands without `ExecArgs`).
    pub fn from_env() -> Self {
        EnvSource {
            snapshot_file: std::env::var_os("AORTA_ENV_SNAPSHOT").filter(|v| !v.is_empty()).map(PathBuf::from),
            python: std::env::var_os("AORTA_PYTHON").filter(|v| !v.is_empty()).map(PathBuf::from),
            store: None,
        }
    }

    /// Flags first, then the environment.
    pub fn from_args(exec: &ExecArgs) -> Self {
        let env = Self::from_env();
        EnvSource {
            snapshot_file: exec.env_snapshot.clone().or(env.snapshot_file),
            python: exec.python.clone().or(env.python),
            store: exec.store.clone(),
        }
    }
}

/// One snapshot per process: a build of several recipes probes once (every caller in one
/// invocation passes the same source). The flag says whether it serves rules that key
/// import-only fields: a deep probe, or a recorded file (used as it is).
static SNAPSHOT: Mutex<Option<(Arc<Snapshot>, bool)>> = Mutex::new(None);

/// The environment snapshot for this invocation (probed or loaded at most once; probed again,
/// deep, the first time a recipe keys an import-only field such as `pytorch.build.flags`). A deep
/// snapshot has every default-keyed field of a plain one, so keys computed before the upgrade
/// stay valid.
pub fn snapshot(src: &EnvSource, deep: bool) -> miette::Result<Arc<Snapshot>> {
    let mut slot = SNAPSHOT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((s, serves_deep)) = slot.as_ref() {
        if *serves_deep || !deep {
            return Ok(s.clone());
        }
    }
    let t0 = std::time::Instant::now();
    let snap = match &src.snapshot_file {
        Some(f) => {
            let hint = "pass an env.json written by `aorta env probe`, or unset AORTA_ENV_SNAPSHOT to probe this machine";
            let text = std::fs::read_to_string(f).map_err(|e| crate::cmd_sweep::usage(format!("cannot read the env snapshot {}: {e}", f.display()), hint))?;
            Snapshot::from_json(&text).map_err(|e| crate::cmd_sweep::usage(format!("{}: {e}", f.display()), hint))?
        }
        None => {
            let mut opts = ProbeOptions::current();
            opts.python = src.python.clone();
            opts.extra_env_vars = aorta_registry::Registry::builtin().mitigation_env_vars();
            opts.cache = Some(ProbeCache::new(crate::cmd_cache::probe_cache_dir(src.store.as_ref())?));
            opts.deep = deep;
            probe(&opts)
        }
    };
    aorta_build::timing(if deep { "env snapshot (deep)" } else { "env snapshot" }, t0);
    let arc = Arc::new(snap);
    *slot = Some((arc.clone(), deep || src.snapshot_file.is_some()));
    Ok(arc)
}

/// The recipe's `env_key` rules in the probe's terms.
pub fn key_rules(recipe: &Recipe) -> KeyRules {
    KeyRules::new(recipe.env_key.include.clone(), recipe.env_key.exclude.clone())
}

/// The snapshot and this recipe's environment key over it (hashed once per caller).
pub fn environment(recipe: &Recipe, src: &EnvSource) -> miette::Result<(Arc<Snapshot>, EnvKey)> {
    let rules = key_rules(recipe);
    let deep = rules.needs_deep();
    let snap = snapshot(src, deep)?;
    if deep && snap.pytorch.collected.as_deref() == Some(aorta_probe::COLLECTED_FILES) {
        eprintln!("warning: the recipe's env_key keys fields only `aorta env probe --deep` collects (pytorch.build, sdpa, numerics, ...), but the environment snapshot has none: they enter its key as null (record the snapshot with --deep)");
    }
    let key = snap.key(&rules);
    Ok((snap, key))
}

/// Key facts for a recipe: its environment key plus the command's input hashes.
pub fn key_context(argv: Option<&[String]>, recipe: &Recipe, src: &EnvSource) -> miette::Result<KeyContext> {
    key_context_with(argv, environment(recipe, src)?.1.hash)
}

/// Key facts with the environment key already computed.
pub fn key_context_with(argv: Option<&[String]>, env_snapshot: String) -> miette::Result<KeyContext> {
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    let input_hashes = match argv {
        Some(a) => hash_inputs(&cwd, a, &[]).map_err(|e| miette::Report::new(Diag::new(DiagKind::Io, e).with_help("check the input paths")))?,
        None => Default::default(),
    };
    Ok(KeyContext { env_snapshot, argv: argv.map(<[String]>::to_vec), input_hashes, workloads: Default::default() })
}

/// The snapshot as written to a run directory's `environments/<name>/env.json`: the probe's
/// JSON plus the key the trials used and the fields that fed it.
pub fn snapshot_record(snap: &Snapshot, key: EnvKey) -> serde_json::Value {
    let mut v = serde_json::to_value(snap).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("key".into(), serde_json::Value::String(key.hash));
        m.insert("keyed_fields".into(), serde_json::to_value(&key.fields).unwrap_or_default());
    }
    v
}
