//! `aorta cache stats|verify|gc` and `aorta explain`: look inside the store and the keys.

use crate::args::{CacheCommand, ExplainArgs};
use crate::cmd_sweep::usage;
use aorta_store::{default_store_root, GcPolicy, Key, LocalStore, Lookup};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The store root: `--store`, else `$AORTA_STORE`, else `.aorta/` at the workspace root.
pub fn store_root(explicit: Option<&PathBuf>) -> miette::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.clone());
    }
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    Ok(default_store_root(&aorta_labels::find_workspace_root(&cwd)))
}

/// Where the environment probe caches its interpreter report: the machine's Python is the
/// same for every workspace, so the cache lives with the user, not in one store.
/// `$AORTA_PROBE_CACHE`, else `$XDG_CACHE_HOME/aorta/probe`, else `~/.cache/aorta/probe`, else
/// (no home) `<store>/probe-cache`. Entries are validated by a fingerprint of the interpreter
/// and its packages, so sharing is safe.
pub fn probe_cache_dir(store: Option<&PathBuf>) -> miette::Result<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = non_empty("AORTA_PROBE_CACHE") {
        return Ok(d);
    }
    if let Some(d) = non_empty("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return Ok(d.join("aorta").join("probe"));
    }
    if let Some(h) = non_empty("HOME").filter(|d| d.is_absolute()) {
        return Ok(h.join(".cache").join("aorta").join("probe"));
    }
    Ok(store_root(store)?.join("probe-cache"))
}

fn open(root: &std::path::Path) -> miette::Result<LocalStore> {
    LocalStore::open(root).map_err(|e| usage(format!("cannot open the store at {}: {e}", root.display()), "check --store / AORTA_STORE"))
}

pub fn cache(cmd: &CacheCommand) -> miette::Result<ExitCode> {
    match cmd {
        CacheCommand::Stats { store } => {
            let root = store_root(store.as_ref())?;
            let s = open(&root)?.stats().map_err(|e| miette::miette!("{e}"))?;
            println!("store: {}", root.display());
            println!("blobs: {} ({})", s.blobs, human_bytes(s.blob_bytes));
            println!("action cache entries: {} ({})", s.ac_entries, human_bytes(s.ac_bytes));
            println!("temp files: {}  quarantined: {}  strays: {}", s.tmp_files, s.quarantined, s.strays);
            Ok(ExitCode::SUCCESS)
        }
        CacheCommand::Verify { store, repair } => {
            let root = store_root(store.as_ref())?;
            let r = open(&root)?.verify(*repair).map_err(|e| miette::miette!("{e}"))?;
            println!("checked {} blobs and {} action-cache entries in {}", r.blobs_checked, r.entries_checked, root.display());
            for (what, list) in [("corrupt blob", &r.corrupt_blobs), ("bad entry", &r.bad_entries), ("stray file", &r.strays)] {
                for p in list {
                    println!("  {what}: {} ({})", p.path.display(), p.reason);
                }
            }
            if r.is_clean() {
                println!("clean");
                Ok(ExitCode::SUCCESS)
            } else {
                if r.repaired {
                    println!("moved the problems to quarantine/; affected trials will re-execute");
                } else {
                    println!("run `aorta cache verify --repair` to quarantine them (their trials then re-execute)");
                }
                Ok(ExitCode::from(crate::EXIT_FAILURE))
            }
        }
        CacheCommand::Gc { store, max_age_days, max_bytes, wait } => {
            let root = store_root(store.as_ref())?;
            let policy = GcPolicy {
                max_age: max_age_days.map(|d| Duration::from_secs_f64(d * 86_400.0)),
                max_bytes: *max_bytes,
                wait: *wait,
                ..GcPolicy::default()
            };
            let r = open(&root)?.gc(&policy).map_err(|e| miette::miette!("{e}"))?;
            println!(
                "gc: removed {} blobs ({}), expired {} and evicted {} entries, quarantined {} corrupt; kept {} entries and {} blobs ({})",
                r.blobs_removed,
                human_bytes(r.bytes_freed),
                r.entries_expired,
                r.entries_evicted,
                r.entries_corrupt,
                r.entries_kept,
                r.blobs_kept,
                human_bytes(r.bytes_kept)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `aorta explain LABEL --cell C --trial N`: the key and every input that fed it.
pub fn explain(a: &ExplainArgs) -> miette::Result<ExitCode> {
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    let root = aorta_labels::find_workspace_root(&cwd);
    let targets = aorta_labels::resolve(&root, &a.target).map_err(miette::Report::new)?;
    let [t] = targets.as_slice() else {
        return Err(usage(format!("{} names {} recipes; explain needs exactly one", a.target, targets.len()), "name a single target, e.g. //recipes:quickstart"));
    };
    let sidecars: Vec<_> = t.mitigations_files.iter().chain(&a.mitigations_files).cloned().collect();
    let recipe = aorta_recipe::load_recipe(&t.recipe, &sidecars).map_err(|d| miette::Report::new(*d))?.recipe;
    let argv = if !a.command.is_empty() { Some(a.command.clone()) } else if !t.command.is_empty() { Some(t.command.clone()) } else { None };
    let argv = if recipe.mode == aorta_recipe::Mode::Probe { argv } else { None };
    let ctx = crate::context::key_context(argv.as_deref(), &recipe, &crate::context::EnvSource::from_env())?;
    let Some(ci) = recipe.cells.iter().position(|c| c.name == a.cell) else {
        let names: Vec<&str> = recipe.cells.iter().map(|c| c.name.as_str()).collect();
        return Err(usage(format!("no cell '{}' in {}", a.cell, t.label), format!("cells: {}", names.join(", "))));
    };
    let planned = aorta_graph::trial_inputs(&recipe, &ctx);
    let Some(p) = planned.iter().find(|p| p.cell == ci && p.index == a.trial) else {
        let n = aorta_graph::trial_count(&recipe, &recipe.cells[ci]);
        return Err(usage(format!("cell '{}' has trials 0..{}; there is no trial {}", a.cell, n.saturating_sub(1), a.trial), "pass --trial N with N in range"));
    };
    println!("target:  {}", t.label);
    println!("cell:    {}  trial: {}", a.cell, a.trial);
    println!("key:     {}", p.key);
    let store = store_root(None)?;
    if store.join("VERSION").exists() {
        let status = match (Key::parse(&p.key.0), LocalStore::open(&store)) {
            (Ok(k), Ok(s)) => match s.lookup(&k) {
                Ok(Lookup::Hit(m)) => format!("cached (executed {}, {:.2} s)", m.created_at, m.exec_seconds),
                Ok(Lookup::Miss) => "not cached: the next build executes it".into(),
                Ok(Lookup::Corrupt { reason }) => format!("corrupt entry ({reason}): the next build re-executes it"),
                Err(e) => format!("unknown ({e})"),
            },
            _ => "unknown".into(),
        };
        println!("store:   {status}");
    }
    println!("inputs (the canonical JSON hashed after the domain tag \"aorta.trial-key\\0\"):");
    let pretty: serde_json::Value = serde_json::from_str(&p.inputs.canonical_json()).unwrap_or_default();
    println!("{}", serde_json::to_string_pretty(&pretty).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}
