//! `aorta cache stats|verify|gc` and `aorta explain`: look inside the store and the keys.

use crate::args::{CacheCommand, ExecArgs, ExplainArgs};
use crate::exit::{usage, CliResult};
use aorta_engine::{Artifact, GcPolicy, NodeQuery, Session};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn open(store: &Option<PathBuf>) -> Result<Session, crate::exit::CliError> {
    ExecArgs {
        store: store.clone(),
        ..Default::default()
    }
    .session()
}

/// A session on a store that must already exist: `cache stats` and `verify` only read, so a
/// mistyped `--store` is said to be no store, never made into an empty one.
fn open_existing(store: &Option<PathBuf>) -> Result<Session, crate::exit::CliError> {
    let session = open(store)?;
    let root = session.store_root();
    // VERSION, or for a store older than it, its action cache or blob directory.
    let is_store = ["VERSION", "ac", "cas"]
        .iter()
        .any(|n| root.join(n).symlink_metadata().is_ok());
    if !is_store {
        let what = if root.exists() {
            "is not an aorta store"
        } else {
            "does not exist"
        };
        return Err(usage(
            format!("no store at {}: it {what}", root.display()),
            "pass the store a build used (--store DIR, $AORTA_STORE, else .aorta/ at the \
             workspace root); nothing was created",
        ));
    }
    Ok(session)
}

pub fn cache(cmd: &CacheCommand) -> CliResult {
    match cmd {
        CacheCommand::Stats { store, json } => {
            let session = open_existing(store)?;
            let root = session.store_root().to_path_buf();
            let s = session
                .store()?
                .stats()
                .map_err(|e| crate::exit::infra(e.to_string()))?;
            if *json {
                #[derive(serde::Serialize)]
                struct StatsJson<'a> {
                    store: &'a std::path::Path,
                    #[serde(flatten)]
                    stats: &'a aorta_engine::StoreStats,
                }
                let out = StatsJson {
                    store: &root,
                    stats: &s,
                };
                println!("{}", serde_json::to_string(&out).unwrap_or_default());
                return Ok(ExitCode::SUCCESS);
            }
            println!("store: {}", root.display());
            println!("blobs: {} ({})", s.blobs, human_bytes(s.blob_bytes));
            println!(
                "action cache entries: {} ({})",
                s.ac_entries,
                human_bytes(s.ac_bytes)
            );
            println!(
                "temp files: {}  quarantined: {}  strays: {}",
                s.tmp_files, s.quarantined, s.strays
            );
            Ok(ExitCode::SUCCESS)
        }
        CacheCommand::Verify { store, repair } => {
            let session = open_existing(store)?;
            let root = session.store_root().to_path_buf();
            let r = session
                .store()?
                .verify(*repair)
                .map_err(|e| crate::exit::infra(e.to_string()))?;
            println!(
                "checked {} blobs and {} action-cache entries in {}",
                r.blobs_checked,
                r.entries_checked,
                root.display()
            );
            for (what, list) in [
                ("corrupt blob", &r.corrupt_blobs),
                ("bad entry", &r.bad_entries),
                ("stray file", &r.strays),
            ] {
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
                Ok(ExitCode::from(crate::exit::INCOMPLETE))
            }
        }
        CacheCommand::Gc {
            store,
            max_age_days,
            max_bytes,
            wait,
        } => {
            let session = open(store)?;
            let records = session.prune_submissions()?;
            if records > 0 {
                println!("gc: removed {records} Slurm submission record(s) whose trials all have results");
            }
            let policy = GcPolicy {
                max_age: max_age_days.map(|d| Duration::from_secs_f64(d * 86_400.0)),
                max_bytes: *max_bytes,
                wait: *wait,
                ..GcPolicy::default()
            };
            let r = session
                .store()?
                .gc(&policy)
                .map_err(|e| crate::exit::infra(e.to_string()))?;
            let linked = match r.bytes_still_linked {
                0 => String::new(),
                b => format!(
                    "; {} more stay on disk as run directories' links to them",
                    human_bytes(b)
                ),
            };
            println!(
                "gc: removed {} blobs ({} freed{linked}), expired {} and evicted {} entries, quarantined {} corrupt; kept {} entries and {} blobs ({})",
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

/// `aorta explain TARGET (--cell C [--trial N] | --artifact PATH)`: a node's key, what fed
/// it, and whether the next build would run (or render) it.
pub fn explain(a: &ExplainArgs) -> CliResult {
    a.exec.refuse_build_only("aorta explain")?;
    let session = a.exec.session()?;
    let ids = crate::targets::add(
        &session,
        std::slice::from_ref(&a.target),
        &a.mitigations_files,
        &a.command,
    )?;
    let [id] = ids.as_slice() else {
        return Err(usage(
            format!(
                "{} names {} recipes; explain needs exactly one",
                a.target,
                ids.len()
            ),
            "name a single target, e.g. //recipes:quickstart",
        ));
    };
    let c = session.compile(*id)?;
    let query = match (&a.cell, a.trial, &a.artifact) {
        (Some(cell), Some(index), _) => NodeQuery::Trial { cell: cell.clone(), index },
        (Some(cell), None, _) => NodeQuery::Cell { cell: cell.clone() },
        (None, _, Some(path)) => NodeQuery::Artifact(Artifact::from_path(path).ok_or_else(|| usage(format!("{path} is not an artifact of a run directory"), "one of matrix.json, matrix.md, recipe.resolved.yaml, environments/<name>/env.json"))?),
        (None, _, None) => return Err(usage("explain needs --cell (and --trial) or --artifact", "aorta explain //recipes:quickstart --cell none-none --trial 0")),
    };
    let explanation = session.explain(&c, &query)?;
    if a.json {
        let line = serde_json::to_string(&explanation).map_err(|e| {
            crate::exit::infra(format!("cannot write the explanation as JSON: {e}"))
        })?;
        println!("{line}");
    } else {
        print!("{explanation}");
    }
    Ok(ExitCode::SUCCESS)
}
