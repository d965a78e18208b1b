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
        // Before anything runs: `out` must be new or an empty directory.
        let target = out.map(out_dir).transpose()?;
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
        let placed = match (out, &target) {
            (Some(_), Some(target)) => place(&store, &executed, ci, target),
            _ => first_result(&executed, ci),
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

/// Where `aorta trial exec --out PATH` writes. The rule (docs/exec.md): PATH must be new or an
/// empty directory (a symlink to one is followed); anything else — a directory with files in
/// it, a file, a FIFO, a device — is refused before the trial runs, and nothing is ever deleted.
/// A rerun into the same PATH so needs it emptied or removed first, as Buck2 does with an
/// action's declared outputs.
#[derive(Debug)]
enum OutDir {
    /// Nothing there: the outputs are staged beside it and renamed into place at once.
    New(std::path::PathBuf),
    /// An empty directory (its real path): the outputs are staged inside it and moved up,
    /// so the directory itself (a mount point, the current directory) stays.
    Empty(std::path::PathBuf),
}

impl OutDir {
    /// Where the outputs go (resolved: absolute, or the directory's real path).
    fn path(&self) -> &Path {
        match self {
            OutDir::New(p) | OutDir::Empty(p) => p,
        }
    }
}

fn out_dir(out: &Path) -> Result<OutDir> {
    let shown = out.display();
    let abs = std::path::absolute(out)
        .map_err(|e| EngineError::output(format!("cannot resolve --out {shown}"), &e))?;
    let refuse = |what: String| {
        EngineError::usage(
            format!(
                "--out {shown} {what}: aorta trial exec writes only to a new path or an empty \
                 directory, and deletes nothing"
            ),
            "name a new path, or empty or remove this one yourself (Buck2 removes an action's \
             declared outputs before it runs it)",
        )
    };
    let md = match std::fs::symlink_metadata(&abs) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OutDir::New(abs)),
        Err(e) => {
            return Err(EngineError::output(
                format!("cannot read --out {shown}"),
                &e,
            ))
        }
        Ok(md) => md,
    };
    let followed = match std::fs::metadata(&abs) {
        Ok(m) => m,
        Err(_) => {
            return Err(refuse(format!(
                "is {} that leads nowhere",
                aorta_fsutil::describe(&md.file_type())
            )))
        }
    };
    if !followed.is_dir() {
        return Err(refuse(format!(
            "is {}",
            aorta_fsutil::describe(&followed.file_type())
        )));
    }
    let dir = std::fs::canonicalize(&abs)
        .map_err(|e| EngineError::output(format!("cannot read --out {shown}"), &e))?;
    let mut entries = std::fs::read_dir(&dir)
        .map_err(|e| EngineError::output(format!("cannot read --out {shown}"), &e))?;
    if entries.next().is_some() {
        return Err(refuse("is a directory that is not empty".into()));
    }
    Ok(OutDir::Empty(dir))
}

/// Writes the one result's outputs and its `result.json` to `target` (see [`OutDir`]), copied
/// from the store entry whether the trial ran just now or was reused. The recipe's retention
/// policy is not applied: Buck2 keeps what the action declared.
fn place(
    store: &LocalStore,
    executed: &Executed,
    cell: usize,
    target: &OutDir,
) -> Result<TrialResult> {
    let r = first_result(executed, cell)?;
    let out = target.path();
    let into = |e: std::io::Error| {
        EngineError::output(format!("cannot write the outputs to {}", out.display()), &e)
    };
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
    let pid = std::process::id();
    let staged = match target {
        OutDir::New(dest) => {
            let parent = dest.parent().unwrap_or(Path::new("/"));
            std::fs::create_dir_all(parent).map_err(into)?;
            let name = dest
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            parent.join(format!(".{name}.aorta-{pid}"))
        }
        OutDir::Empty(dir) => dir.join(format!(".aorta-staging-{pid}")),
    };
    // Our own pid's leftover, if any; then a fresh directory, whose failure (a read-only
    // directory) is the path's.
    let _ = std::fs::remove_dir_all(&staged);
    std::fs::create_dir(&staged).map_err(into)?;
    let written = (|| {
        store.materialize(&manifest, &staged).map_err(|e| {
            EngineError::infra(format!(
                "cannot write the outputs to {}: {e}",
                out.display()
            ))
        })?;
        let json = serde_json::to_vec_pretty(&*r.record)
            .map_err(|e| EngineError::infra(format!("cannot encode result.json: {e}")))?;
        crate::dirs::write_atomic(&staged.join("result.json"), &json).map_err(into)?;
        match target {
            // Renaming a directory never replaces a non-empty directory or a file: if one
            // appeared meanwhile, this fails and it stays as it was.
            OutDir::New(dest) => std::fs::rename(&staged, dest).map_err(into),
            OutDir::Empty(dir) => move_up(&staged, dir).map_err(into),
        }
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&staged);
    }
    written.map(|()| r)
}

/// Moves every entry of `staged` (inside `dir`) up into `dir`, then removes `staged`. An entry
/// whose name appeared in `dir` meanwhile is an error, never replaced.
fn move_up(staged: &Path, dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(staged)? {
        let entry = entry?;
        let dest = dir.join(entry.file_name());
        if dest.symlink_metadata().is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} appeared while the outputs were written", dest.display()),
            ));
        }
        std::fs::rename(entry.path(), dest)?;
    }
    std::fs::remove_dir(staged)
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
