//! One trial by itself: what `aorta trial exec` (and so each Buck2 trial action) runs. The same
//! store lookup, claim, execution and commit as a whole build, for a single trial node of the
//! compiled DAG, then its outputs materialised into a directory of the caller's choosing
//! (Buck2's declared output).

use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use crate::execute::local::{LocalExecutor, LocalSettings};
use crate::schedule::{Executed, Schedule, Source, TrialResult};
use crate::session::Session;
use aorta_graph::{Dag, Key};
use aorta_store::LocalStore;
use std::path::Path;

pub struct OneOutcome {
    pub key: Key,
    pub source: Source,
    pub verdict: aorta_trial::Verdict,
}

impl Session {
    /// Runs (or reuses) trial `index` of cell `cell` and materialises its outputs
    /// (`result.json`, logs, collected files) into `out` (none: the store entry is the
    /// output, as for a Slurm array task). With `expect_key`, refuses a trial
    /// whose key is another (a Buck2 target pins it). The one trial gets every `--gpus` device.
    pub fn build_one(
        &self,
        c: &Compiled,
        cell: &str,
        index: u32,
        out: Option<&Path>,
        expect_key: Option<&Key>,
    ) -> Result<OneOutcome> {
        let ci = c.cell_index(cell)?;
        let trial = c.trial(ci, index)?.clone();
        if let Some(want) = expect_key {
            if *want != trial.key {
                return Err(EngineError::usage(
                    format!("trial {index} of cell {cell:?} has key {}, not {want}", trial.key),
                    "the recipe, registries, command inputs or environment changed; regenerate the pinned key",
                ));
            }
        }
        let bodies = crate::bodies::bodies(self, c)?;
        let store = self.writable_store()?;
        let cancel = self.cancel_token()?;
        let build_lock = store
            .build_lock()
            .map_err(|e| EngineError::infra(format!("cannot lock the store: {e}")))?;
        let forced = match self.take_rerun() {
            Some(rerun) => rerun.apply_to(&store, c, std::slice::from_ref(&trial))?,
            None => Default::default(),
        };
        if let Some(remote) = self.remote.as_ref().filter(|_| forced.is_empty()) {
            crate::remote_sync::pull(&store, remote, std::iter::once(&trial.key));
        }
        let staging = tempfile_dir(store.root())?;
        // A one-node graph: this trial, for this cell only.
        let planned = std::slice::from_ref(&trial);
        let dag = Dag::build(c.recipe.cells.len(), planned, &c.env.key.hash, &[]);
        let inputs = self.inputs(c)?;
        let schedule = Schedule {
            recipe: &c.recipe,
            planned,
            dag: &dag,
            bodies,
            store: store.clone(),
            inputs: inputs.clone(),
            cancel: cancel.clone(),
        };
        let mut local = LocalExecutor::new(
            &c.recipe,
            LocalSettings {
                store: store.clone(),
                build_lock: build_lock.clone(),
                staging: staging.clone(),
                run_dir: None,
                slots: self.slots(Some(1)),
                gpus_per_cell: vec![self.opts.gpus.len(); c.recipe.cells.len()],
                cancel,
                inputs,
            },
        );
        let executed = schedule.run(&mut local, &mut |_| {})?;
        self.save_digests();
        let placed = match out {
            Some(out) => place(&store, &executed, ci, out),
            None => first_result(&executed, ci),
        };
        let _ = std::fs::remove_dir_all(&staging);
        let r = placed?;
        // Durable store entries and outputs (the whole-build path does the same once per build).
        store
            .sync()
            .map_err(|e| EngineError::infra(e.to_string()))?;
        if let Some(out) = out {
            aorta_store::sync_filesystem(out)
                .map_err(|e| EngineError::infra(format!("cannot sync {}: {e}", out.display())))?;
        }
        if let Some(remote) = &self.remote {
            if r.source == Source::Executed {
                crate::remote_sync::push(&store, remote, std::iter::once(&r.key));
            }
        }
        Ok(OneOutcome {
            key: r.key.clone(),
            source: r.source,
            verdict: r.record.verdict,
        })
    }
}

/// Writes the one result's outputs and its `result.json` into `out` (replacing what was there),
/// copied from the store entry whether the trial ran just now or was reused. The recipe's
/// retention policy is not applied: Buck2 keeps what the action declared.
fn place(store: &LocalStore, executed: &Executed, cell: usize, out: &Path) -> Result<TrialResult> {
    let r = first_result(executed, cell)?;
    let into = |e: std::io::Error| {
        EngineError::infra(format!(
            "cannot write the outputs to {}: {e}",
            out.display()
        ))
    };
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(into)?;
    // Always from the store (verified copies): the staging directory may sit on another
    // filesystem than `out`, and the store entry is what a cache hit would give anyway.
    let manifest = match store.lookup_as::<serde::de::IgnoredAny>(&r.key) {
        Ok(aorta_store::Lookup::Hit(m)) => m,
        Ok(_) => {
            return Err(EngineError::infra(format!(
                "the store entry {} vanished or went bad; run it again",
                r.key
            )))
        }
        Err(e) => {
            return Err(EngineError::infra(format!(
                "cannot read the store entry {}: {e}",
                r.key
            )))
        }
    };
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staged = parent.join(format!(".{name}.aorta-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staged);
    store.materialize(&manifest, &staged).map_err(|e| {
        EngineError::infra(format!(
            "cannot write the outputs to {}: {e}",
            out.display()
        ))
    })?;
    let json = serde_json::to_vec_pretty(&*r.record)
        .map_err(|e| EngineError::infra(format!("cannot encode result.json: {e}")))?;
    crate::dirs::write_atomic(&staged.join("result.json"), &json).map_err(into)?;
    crate::dirs::replace_dir(&staged, out).map_err(into)?;
    Ok(r)
}

/// The one result, or why there is none.
fn first_result(executed: &Executed, cell: usize) -> Result<TrialResult> {
    if executed.cancelled {
        return Err(EngineError::infra("interrupted"));
    }
    if let Some(e) = executed
        .cell_errors
        .get(&cell)
        .or(executed.failures.first())
    {
        return Err(EngineError::infra(e.clone()));
    }
    executed
        .results
        .first()
        .cloned()
        .ok_or_else(|| EngineError::infra("the trial produced no result"))
}

fn tempfile_dir(store_root: &Path) -> Result<std::path::PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = store_root
        .join("tmp")
        .join(format!("one-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| EngineError::infra(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}
