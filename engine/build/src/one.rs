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
    let placed = place(&store, &executed, out);
    let _ = std::fs::remove_dir_all(&staging);
    let r = placed?;
    // Durable store entries and outputs (the whole-build path does the same once per build).
    store.sync().map_err(|e| e.to_string())?;
    aorta_store::sync_filesystem(out).map_err(|e| format!("cannot sync {}: {e}", out.display()))?;
    if let Some(remote) = &opts.remote {
        if r.source == Source::Executed {
            crate::remote::push(&store, remote, std::iter::once(r.key.as_str()));
        }
    }
    Ok(OneOutcome { key: r.key.to_string(), source: r.source, verdict: r.record.verdict.as_str().to_owned() })
}

/// Writes the one result's outputs and its `result.json` into `out` (replacing what was there),
/// copied from the store entry whether the trial ran just now or was reused. The recipe's
/// retention policy is not applied: Buck2 keeps what the action declared.
fn place(store: &LocalStore, executed: &crate::engine::Executed, out: &Path) -> Result<crate::TrialResult, String> {
    if executed.cancelled {
        return Err("interrupted".into());
    }
    if let Some(e) = executed.cell_errors.values().next().or(executed.failures.first()) {
        return Err(e.clone());
    }
    let r = executed.results.first().ok_or("the trial produced no result")?.clone();
    let into = |e: std::io::Error| format!("cannot write the outputs to {}: {e}", out.display());
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(into)?;
    // Always from the store (verified copies): the staging directory may sit on another
    // filesystem than `out`, and the store entry is what a cache hit would give anyway.
    let manifest = match store.lookup(&r.key) {
        Ok(aorta_store::Lookup::Hit(m)) => m,
        Ok(_) => return Err(format!("the store entry {} vanished or went bad; run it again", r.key)),
        Err(e) => return Err(format!("cannot read the store entry {}: {e}", r.key)),
    };
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staged = parent.join(format!(".{name}.aorta-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staged);
    store.materialize(&manifest, &staged).map_err(|e| format!("cannot write the outputs to {}: {e}", out.display()))?;
    let json = serde_json::to_vec_pretty(&*r.record).unwrap_or_default();
    crate::fsutil::write_atomic(&staged.join("result.json"), &json).map_err(into)?;
    crate::fsutil::replace_dir(&staged, out).map_err(into)?;
    Ok(r)
}

fn tempfile_dir(store_root: &Path) -> Result<std::path::PathBuf, String> {
    let dir = store_root.join("tmp").join(format!("one-{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}
