//! The local executor: each trial a child process of this aorta under the machine's slots
//! (`--jobs`, `--gpus`). A job claims its key (so concurrent builds never run a key twice),
//! re-checks the store under the claim, stages and prepares its process while every slot is
//! busy, runs, is judged, and is committed to the store and placed into the run directory
//! while later trials run.

use super::{ArrayProgress, Source, TrialDir};
use super::{Executor, Job, Outcome, Waited};
use crate::dirs::list_files;
use crate::error::Result;
use crate::execute::process::{prepare_trial, PreparedTrial, StartedTrial, TrialRun, TrialSpec};
use aorta_exec::{CancelToken, Pool, SlotRequest, Slots};
use aorta_recipe::Recipe;
use aorta_store::{Key, LocalStore, Lookup, Manifest};
use aorta_trial::TrialRecord;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub(crate) struct LocalExecutor<'a> {
    recipe: &'a Recipe,
    store: Arc<LocalStore>,
    /// The build's shared lock on `store`, which every claim shares instead of taking its own.
    build_lock: aorta_store::BuildLock,
    staging: PathBuf,
    /// Where executed trials are placed as they finish (`placement::place_trial`); `None`
    /// leaves them in staging (`aorta trial exec` places its one trial itself).
    run_dir: Option<PathBuf>,
    /// GPUs each trial of a cell is granted, by cell (0: a CPU trial, which inherits visibility).
    gpus_per_cell: Vec<usize>,
    cancel: CancelToken,
    /// Traced inputs: verified under the claim, recorded after a trial runs.
    inputs: Arc<crate::traced::Inputs>,
    retain: Option<aorta_recipe::Retain>,
    pool: Pool<Key, Outcome>,
    /// AORTA_TIMING's mark, once per build (watch mode builds again in one process).
    first_start: Arc<std::sync::Once>,
}

/// What a local executor needs besides the recipe.
pub(crate) struct LocalSettings {
    pub store: Arc<LocalStore>,
    pub build_lock: aorta_store::BuildLock,
    pub staging: PathBuf,
    pub run_dir: Option<PathBuf>,
    pub slots: Slots,
    pub gpus_per_cell: Vec<usize>,
    pub cancel: CancelToken,
    pub inputs: Arc<crate::traced::Inputs>,
}

impl<'a> LocalExecutor<'a> {
    pub(crate) fn new(recipe: &'a Recipe, s: LocalSettings) -> Self {
        LocalExecutor {
            recipe,
            retain: crate::placement::retain(recipe).copied(),
            pool: Pool::new(s.slots),
            store: s.store,
            build_lock: s.build_lock,
            staging: s.staging,
            run_dir: s.run_dir,
            gpus_per_cell: s.gpus_per_cell,
            cancel: s.cancel,
            inputs: s.inputs,
            first_start: Arc::new(std::sync::Once::new()),
        }
    }
}

impl Executor for LocalExecutor<'_> {
    fn runs_ahead(&self) -> bool {
        false
    }

    fn start(&mut self, job: Job) -> std::result::Result<(), aorta_exec::SlotError> {
        let Job {
            key,
            cell,
            index,
            spec,
            refused: _,
        } = job;
        let request = match self.gpus_per_cell.get(cell) {
            Some(&n) if n > 0 => SlotRequest::gpus(n),
            _ => SlotRequest::cpu(),
        };
        let (store, cancel) = (Arc::clone(&self.store), self.cancel.clone());
        let (stage_store, staging) = (Arc::clone(&self.store), self.staging.clone());
        let (stage_inputs, inputs) = (Arc::clone(&self.inputs), Arc::clone(&self.inputs));
        let build_lock = self.build_lock.clone();
        let start_cancel = cancel.clone();
        let first_start = Arc::clone(&self.first_start);
        let place = self.run_dir.as_ref().map(|run_dir| Place {
            dest: run_dir.join(crate::placement::trial_rel(
                self.recipe,
                &self.recipe.cells[cell].name,
                index,
            )),
            retain: self.retain,
        });
        self.pool.submit_staged(
            key,
            request,
            move || stage_one(&stage_store, &build_lock, &staging, spec, &stage_inputs),
            move |staged, lease| {
                first_start.call_once(|| crate::timing_mark("the first trial starting"));
                start_staged(staged, lease, &start_cancel)
            },
            move |running, mut release| {
                finish_running(&store, &inputs, running, &mut release, &cancel, place)
            },
        )
    }

    fn wait(&mut self, _progress: &mut dyn FnMut(&[ArrayProgress])) -> Result<Waited> {
        Ok(Waited::Ended(
            self.pool.next_completed().into_iter().collect(),
        ))
    }

    fn pending(&self) -> usize {
        self.pool.pending()
    }

    /// A local trial runs to its end (its result is stored for a later build): a cell runs
    /// its trials in order here, so the scheduler forgets none that is running.
    fn forget(&mut self, _keys: &[Key]) {}
}

/// The command's input file that changed since compile, if any (see
/// [`crate::execute::process::CommandSettings::changed_input`]).
fn changed_input(spec: &TrialSpec) -> Option<&Path> {
    match &spec.body {
        crate::execute::process::Body::Command(c) => c.changed_input(),
        crate::execute::process::Body::Workload(_) => None,
    }
}

/// A trial claimed, given its staging directory and its process prepared, waiting for a
/// slot: the work before its process, which the pool does ahead while every slot is busy
/// ([`Pool::submit_staged`]).
struct Staged {
    claimed: Claimed,
    prepared: PreparedTrial,
}

/// A trial's claim and staging directory, from its staging to its commit.
struct Claimed {
    spec: TrialSpec,
    claim: aorta_store::DetachedClaim,
    dir: StagingDir,
}

/// A trial's staging directory, removed unless the trial's result keeps it (a trial cancelled,
/// failed, or never run because the build stopped).
struct StagingDir(Option<PathBuf>);

impl StagingDir {
    fn path(&self) -> &Path {
        self.0.as_deref().expect("present until kept")
    }

    fn keep(mut self) -> PathBuf {
        self.0.take().expect("present until kept")
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Claims the key (waiting for another aorta running it), re-checks the store (another
/// process may have finished the trial meanwhile: `Err` is then the result), makes the
/// staging directory and prepares the process in it.
fn stage_one(
    store: &LocalStore,
    build_lock: &aorta_store::BuildLock,
    staging: &Path,
    spec: TrialSpec,
    inputs: &crate::traced::Inputs,
) -> Result<Staged, Outcome> {
    let key = &spec.key;
    let every = std::time::Duration::from_secs(5);
    let claim = match store.claim_reporting_under(build_lock, key, every, |w, _| {
        eprintln!("aorta: {}", w.message(key))
    }) {
        Ok(c) => c,
        Err(e) => {
            return Err(Outcome::Unrecorded(format!(
                "cannot claim trial {key}: {e}"
            )))
        }
    };
    if let Ok(Lookup::Hit(m)) = claim.lookup_as::<TrialRecord>() {
        if crate::reuse::reusable(&m.trial, store, inputs).is_ok() {
            return Err(Outcome::Done(Box::new(m), Source::Reused, TrialDir::Stored));
        }
    }
    let dir = staging.join(format!("{}-{}", &key.as_str()[..16], std::process::id()));
    if let Err(e) = crate::dirs::fresh_dir(&dir) {
        return Err(Outcome::Unrecorded(format!(
            "cannot create {}: {e}",
            dir.display()
        )));
    }
    let prepared = prepare_trial(&spec, &dir);
    Ok(Staged {
        claimed: Claimed {
            claim: claim.detach(),
            spec,
            dir: StagingDir(Some(dir)),
        },
        prepared,
    })
}

/// A staged trial whose process runs (or that ended before it could start).
struct Running {
    claimed: Claimed,
    trial: StartedTrial,
    started: Instant,
}

/// Starts a staged trial's process on its slot: only that, since it may run on the thread of
/// the trial that gave the slot back ([`Pool::submit_staged`]).
fn start_staged(staged: Staged, lease: aorta_exec::Lease, cancel: &CancelToken) -> Running {
    let started = Instant::now();
    let Staged { claimed, prepared } = staged;
    let trial = prepared.start(&claimed.spec, lease, cancel);
    Running {
        claimed,
        trial,
        started,
    }
}

/// Where an executed trial's directory goes in the run directory, and what of it to keep.
struct Place {
    dest: PathBuf,
    retain: Option<aorta_recipe::Retain>,
}

/// Waits for a started trial, judges it, uploads the outputs, commits the manifest and moves
/// the trial's directory into the run directory (while later trials run: the build's tail
/// then has only reused trials to place). The slot goes back once the process has exited
/// ([`StartedTrial::finish`]).
fn finish_running(
    store: &LocalStore,
    inputs: &crate::traced::Inputs,
    running: Running,
    release: &mut aorta_exec::SlotRelease,
    cancel: &CancelToken,
    place: Option<Place>,
) -> Outcome {
    let Running {
        claimed: Claimed { spec, claim, dir },
        trial,
        started,
    } = running;
    let key = &spec.key;
    let started_wall = std::time::SystemTime::now() - started.elapsed();
    let run = trial.finish(&spec, dir.path(), release, cancel);
    let Some(claim) = claim.attach(store) else {
        return Outcome::Failed(format!("trial {key} was claimed in another store"));
    };
    match run {
        TrialRun::Cancelled => Outcome::Cancelled,
        TrialRun::Done(record) if interrupted(&record, cancel) => Outcome::Cancelled,
        TrialRun::Done(mut record) => match changed_input(&spec)
            .map(Path::to_path_buf)
            .or_else(|| traced_change(&spec, inputs, dir.path(), started_wall, &mut record))
        {
            // Hashed once: the inputs are re-read only here.
            Some(changed) => Outcome::Failed(format!(
                "{} changed while trial {key} ran: its result is not stored (the key hashed the old content); run the build again",
                changed.display()
            )),
            None => match commit(claim, dir.path(), *record, started.elapsed().as_secs_f64()) {
                Ok(m) => {
                    let mut staged = crate::placement::StagedDir::new(dir.keep());
                    let placed = place.is_some_and(|p| {
                        crate::placement::place_trial(
                            &mut staged,
                            &p.dest,
                            p.retain.as_ref(),
                            &m.trial,
                        )
                        .is_ok()
                    });
                    let dir = match placed {
                        true => TrialDir::Placed,
                        false => TrialDir::Staged(staged),
                    };
                    Outcome::Done(Box::new(m), Source::Executed, dir)
                }
                // The trial removed its own directory: its own doing, not the store's.
                Err(e) if !dir.path().is_dir() => Outcome::Failed(format!(
                    "trial {key} removed its own staging directory {}; its result cannot be recorded: {e}",
                    dir.path().display()
                )),
                // The store or the disk refused the result (full, read-only, …).
                Err(e) => Outcome::Unrecorded(format!(
                    "trial {key} ran, but its result could not be recorded: {e}"
                )),
            },
        },
    }
}

/// Settles a traced trial's inputs into its record (and `inputs.json`); an input known before
/// the trial that changed while it ran is returned instead, as the named inputs' check does.
fn traced_change(
    spec: &TrialSpec,
    inputs: &crate::traced::Inputs,
    dir: &Path,
    started: std::time::SystemTime,
    record: &mut TrialRecord,
) -> Option<PathBuf> {
    let crate::execute::process::Body::Command(c) = &spec.body else {
        return None;
    };
    let summary = match &c.tracing {
        crate::execute::process::Tracing::Off(reason) => crate::traced::untraced(reason.clone()),
        crate::execute::process::Tracing::On(_)
            if !dir.join(crate::traced::TRACE_FILE).exists() =>
        {
            match &record.inputs {
                // Set when the trial was prepared: why it ran untraced.
                Some(s) => s.clone(),
                None => crate::traced::untraced("the tracer left no trace".into()),
            }
        }
        crate::execute::process::Tracing::On(_) => match inputs.settle(dir, started) {
            crate::traced::Settled::Ok(s) => s,
            crate::traced::Settled::ChangedDuring(p) => return Some(p),
        },
    };
    record.inputs = Some(summary);
    None
}

/// A trial whose process died of SIGTERM or SIGKILL just as aorta itself was told to stop was
/// interrupted, not failed, and its record must not enter the store: Slurm's scancel and
/// preemption signal every process of the job at once, so the child can die before aorta's
/// handler has cancelled the token.
fn interrupted(record: &TrialRecord, cancel: &CancelToken) -> bool {
    if cancel.is_cancelled() {
        return true;
    }
    if record.timed_out || !matches!(record.exit_code, -15 | -9) {
        return false;
    }
    let until = Instant::now() + std::time::Duration::from_millis(500);
    while Instant::now() < until {
        if cancel.is_cancelled() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// Why a finished trial's result was not stored: the trial is reported as one that failed to
/// run, and runs again next build.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommitError {
    #[error("cannot claim trial {key}: {source}")]
    Claim {
        key: Key,
        #[source]
        source: aorta_store::StoreError,
    },
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot list {}: {source}", dir.display())]
    List {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode result.json: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot write result.json: {0}")]
    Write(#[source] std::io::Error),
    #[error("cannot store {file}: {source}")]
    Blob {
        file: String,
        #[source]
        source: aorta_store::StoreError,
    },
    #[error("cannot commit trial {key}: {source}")]
    Commit {
        key: Key,
        #[source]
        source: aorta_store::StoreError,
    },
}

/// Writes the trial's result.json, stores its other files and commits the manifest, which
/// holds the record (moved in, not copied).
pub(crate) fn commit(
    mut claim: aorta_store::Claim<'_>,
    dir: &Path,
    mut record: TrialRecord,
    secs: f64,
) -> Result<Manifest<TrialRecord>, CommitError> {
    let mut files = list_files(dir).map_err(|source| CommitError::List {
        dir: dir.to_path_buf(),
        source,
    })?;
    // Sorted already; result.json is written below if it is not there yet.
    if let Err(at) = files.binary_search_by(|f| f.as_str().cmp("result.json")) {
        files.insert(at, "result.json".into());
    }
    record.outputs = files;
    let json = serde_json::to_vec_pretty(&record).map_err(CommitError::Encode)?;
    // A plain write: the staging directory is private until it is renamed into place, and the
    // build syncs the run directory before its index names the trial (artifacts::finish).
    std::fs::write(dir.join("result.json"), &json).map_err(CommitError::Write)?;
    let mut m = Manifest::new(claim.key().clone(), record);
    // result.json is the record itself, which the entry holds already: materialising writes it
    // from there, so it costs no blob.
    for f in m.trial.outputs.iter().filter(|f| *f != "result.json") {
        let blob = claim
            .put_blob_file(&dir.join(f))
            .map_err(|source| CommitError::Blob {
                file: f.clone(),
                source,
            })?;
        m.outputs.insert(f.clone(), blob);
    }
    m.exec_seconds = secs;
    if let Err(source) = claim.commit(&m) {
        return Err(CommitError::Commit { key: m.key, source });
    }
    Ok(m)
}
