//! One trial by itself: what `aorta trial exec` (and so each Buck2 trial action) runs. The same
//! store lookup, claim, execution and commit as a whole build, for a single planned trial, then
//! its outputs materialised into a directory of the caller's choosing (Buck2's declared output).

use crate::engine::{Schedule, Source};
use crate::BuildOptions;
use aorta_exec::Slots;
use aorta_graph::PlannedTrial;
use aorta_recipe::Recipe;
use aorta_store::LocalStore;
use std::path::Path;
use std::sync::Arc;

pub struct OneOutcome {
    pub key: String,
    pub source: Source,
    pub verdict: String,
}

/// Runs (or reuses) exactly `trial`, one of `recipe`'s planned trials, and materialises its
/// outputs (`result.json`, logs, collected files) into `out`.
pub fn build_one(recipe: &Recipe, trial: &PlannedTrial, argv: Option<&[String]>, opts: &BuildOptions, out: &Path) -> Result<OneOutcome, String> {
    let store = Arc::new(LocalStore::open(&opts.store_root).map_err(|e| format!("cannot open the store at {}: {e}", opts.store_root.display()))?);
    let _build_lock = store.build_lock().map_err(|e| format!("cannot lock the store: {e}"))?;
    let planned = std::slice::from_ref(trial);
    if let Some(remote) = &opts.remote {
        crate::remote::pull(&store, remote, planned);
    }
    let staging = tempfile_dir(&opts.store_root)?;
    let bodies = crate::bodies(recipe, argv, opts)?;
    let schedule = Schedule {
        recipe,
        planned,
        bodies,
        store: store.clone(),
        staging: staging.clone(),
        slots: Slots::new(1, opts.gpus.clone()),
        gpus_per_trial: opts.gpus_per_trial,
        cancel: opts.cancel.clone(),
    };
    let executed = schedule.run(&mut |_| {});
    let _ = std::fs::remove_dir_all(&staging);
    if executed.cancelled {
        return Err("interrupted".into());
    }
    if let Some(e) = executed.cell_errors.values().next().or(executed.failures.first()) {
        return Err(e.clone());
    }
    let r = executed.results.into_iter().next().ok_or("the trial produced no result")?;
    if let Some(remote) = &opts.remote {
        if r.source == Source::Executed {
            crate::remote::push(&store, remote, std::iter::once(r.manifest.key.as_str()));
        }
    }
    store.materialize(&r.manifest, out).map_err(|e| format!("cannot write the outputs to {}: {e}", out.display()))?;
    Ok(OneOutcome { key: r.manifest.key.to_string(), source: r.source, verdict: r.record.verdict.as_str().to_owned() })
}

fn tempfile_dir(store_root: &Path) -> Result<std::path::PathBuf, String> {
    let dir = store_root.join("tmp").join(format!("one-{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}
