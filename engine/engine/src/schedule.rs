//! Walking the DAG's trial nodes: look every trial key up in the store, execute the misses in
//! parallel child processes under the slots (one claim per key, so concurrent builds never run
//! a key twice; a key shared by several cells runs once for all of them), honour stop_after
//! per cell. Cells and artifacts follow in `build` once their trials are done.

use crate::fsutil::list_files;
use crate::trial::{prepare_trial, PreparedTrial, StartedTrial, TrialRun, TrialSpec};
use aorta_exec::{CancelToken, Pool, SlotRequest, Slots};
use aorta_graph::{Dag, PlannedTrial};
use aorta_recipe::Recipe;
use aorta_store::{Key, LocalStore, Lookup, Manifest};
use aorta_trial::TrialRecord;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// How a trial's result was obtained in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Executed,
    Reused,
}

#[derive(Debug, Clone)]
pub struct TrialResult {
    pub cell: usize,
    pub index: u32,
    /// The store entry's key. The entry itself is not kept (a 10,000-trial rerun would hold
    /// 10,000 of them): materialising looks it up again for the trials whose directory needs it.
    pub key: Key,
    /// How long the trial took when it was executed.
    pub exec_seconds: f64,
    pub record: Arc<TrialRecord>,
    pub source: Source,
    /// Where this cell's directory for the trial comes from (the build's own business).
    pub(crate) dir: TrialDir,
}

impl TrialResult {
    /// Which result this is: the key and a stamp of its execution. One key can hold
    /// different results over time (an error run again, a traced input edited, `--rerun`), so
    /// cells fold results, not keys, and the run directory's index says which one is in place.
    pub fn result_id(&self) -> String {
        result_id(&self.key, self.exec_seconds, &self.record)
    }
}

/// [`TrialResult::result_id`]: the measured durations differ between any two executions.
pub(crate) fn result_id(key: &Key, exec_seconds: f64, record: &TrialRecord) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&exec_seconds.to_bits().to_le_bytes());
    h.update(&record.walltime_sec.to_bits().to_le_bytes());
    h.update(record.verdict.as_str().as_bytes());
    h.update(&record.exit_code.to_le_bytes());
    if let Some(d) = record.inputs.as_ref().and_then(|i| i.digest.as_deref()) {
        h.update(d.as_bytes());
    }
    format!("{key}@{}", &h.finalize().to_hex()[..16])
}

/// Where a trial's directory in the run directory comes from in this build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrialDir {
    /// Executed here and moved into the run directory as it finished, while later trials ran.
    Placed,
    /// Executed here and still in this staging directory (placing it failed, or the schedule
    /// places nothing): moved into place when the build materialises.
    Staged(crate::placement::StagedDir),
    /// Copied out of the store when the build materialises.
    Stored,
}

/// A store entry reduced to what the build needs, its record parsed once.
pub(crate) struct Resolved {
    key: Key,
    exec_seconds: f64,
    record: Arc<TrialRecord>,
    dir: TrialDir,
}

pub enum Event<'a> {
    Reused(&'a TrialResult),
    Executed(&'a TrialResult),
    Failed {
        cell: &'a str,
        index: u32,
        error: &'a str,
    },
    /// The Slurm executor's arrays: queued, running and done tasks of each.
    Cluster(&'a [ArrayProgress]),
    /// A stored result this build does not reuse (and executes instead), and why.
    Stale {
        cell: &'a str,
        index: u32,
        why: &'a crate::reuse::NotReused,
    },
}

/// What a store lookup found for a key.
pub(crate) enum Found {
    Hit(Arc<Resolved>),
    Miss,
    /// A stored result that may not be reused ([`crate::reuse::reusable`]).
    Stale(crate::reuse::NotReused),
}

/// One Slurm array's counts, for progress ([`Event::Cluster`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayProgress {
    pub job: String,
    pub queued: usize,
    pub running: usize,
    pub done: usize,
}

enum JobOut {
    Done(Box<Manifest<TrialRecord>>, Source, TrialDir),
    Cancelled,
    Failed(String),
}

/// Builds a trial's spec from its plan entry (per cell: the body and env are fixed).
pub type MakeSpec = Arc<dyn Fn(&PlannedTrial) -> TrialSpec + Send + Sync>;

pub struct Schedule<'a> {
    pub recipe: &'a Recipe,
    pub planned: &'a [PlannedTrial],
    /// The compiled graph: which planned trials each cell has, which keys cells share.
    pub dag: &'a Dag,
    /// Body settings per cell (`None`: the cell cannot run, e.g. unknown workload; its error).
    pub bodies: Vec<Result<MakeSpec, String>>,
    pub store: Arc<LocalStore>,
    /// The build's shared lock on `store`, which every claim shares instead of taking its own.
    pub build_lock: aorta_store::BuildLock,
    pub staging: PathBuf,
    /// Where executed trials are placed as they finish (`placement::place_trial`); `None`
    /// leaves them in staging (`aorta trial exec` places its one trial itself).
    pub run_dir: Option<PathBuf>,
    pub slots: Slots,
    /// GPUs each trial of a cell is granted, by cell (0: a CPU trial, which inherits visibility).
    pub gpus_per_cell: Vec<usize>,
    pub cancel: CancelToken,
    /// Traced inputs: verified before a stored result is reused, recorded after a trial runs.
    pub inputs: Arc<crate::traced::Inputs>,
}

pub struct Executed {
    pub results: Vec<TrialResult>,
    pub cell_errors: BTreeMap<usize, String>,
    pub failures: Vec<String>,
    pub cancelled: bool,
    /// Trials left running on the cluster (`--detach`): a later build collects them.
    pub detached: usize,
}

fn resolve(m: Manifest<TrialRecord>, dir: TrialDir) -> Arc<Resolved> {
    Arc::new(Resolved {
        key: m.key,
        exec_seconds: m.exec_seconds,
        record: Arc::new(m.trial),
        dir,
    })
}

/// Per-cell progress through its trial list.
struct CellState {
    next: usize,
    events: u32,
    done: bool,
    in_flight: usize,
}

/// Stored entries to read before the prefetch is worth spreading over cores.
const PREFETCH_PARALLEL: usize = 32;

impl Schedule<'_> {
    pub fn run(self, on_event: &mut dyn FnMut(Event)) -> Executed {
        let by_cell: Vec<Vec<&PlannedTrial>> = (0..self.recipe.cells.len())
            .map(|c| {
                self.dag
                    .cell_trials(c)
                    .into_iter()
                    .map(|i| &self.planned[i])
                    .collect()
            })
            .collect();
        let stop = self.recipe.stop_after;
        let mut states: Vec<CellState> = by_cell
            .iter()
            .map(|_| CellState {
                next: 0,
                events: 0,
                done: false,
                in_flight: 0,
            })
            .collect();
        let mut cell_errors = BTreeMap::new();
        for (c, b) in self.bodies.iter().enumerate() {
            if let Err(e) = b {
                cell_errors.insert(c, e.clone());
                states[c].done = true;
            }
        }
        let pool: Pool<(usize, u32), JobOut> = Pool::new(self.slots.clone());
        let mut results: Vec<TrialResult> = Vec::new();
        // Results by key, kept only for keys planned more than once (cells sharing a trial).
        let mut known: HashMap<Key, Arc<Resolved>> = HashMap::new();
        let shared = |k: &Key| self.dag.users(k) > 1;
        let mut waiting_on: HashMap<Key, Vec<(usize, u32)>> = HashMap::new();
        let mut failures = Vec::new();
        let mut cancelled = false;
        let mut pending = 0usize;
        let mut prefetched = self.prefetch();
        crate::timing_mark("trial lookups prefetched");
        let retain = crate::placement::retain(self.recipe);
        // AORTA_TIMING's mark, once per build (watch mode builds again in one process).
        let first_start = Arc::new(std::sync::Once::new());

        loop {
            // Advance every cell as far as it can go without waiting.
            for c in 0..by_cell.len() {
                while !states[c].done && !cancelled {
                    let st = &states[c];
                    if st.next >= by_cell[c].len() || (stop.is_some() && st.in_flight > 0) {
                        if st.next >= by_cell[c].len() && st.in_flight == 0 {
                            states[c].done = true;
                        }
                        break;
                    }
                    let p = by_cell[c][st.next];
                    states[c].next += 1;
                    let key = p.key.clone();
                    if let Some(r) = known.get(&key).cloned() {
                        self.accept(
                            c,
                            p.index,
                            &r,
                            Source::Reused,
                            &mut states,
                            &mut results,
                            on_event,
                        );
                        continue;
                    }
                    if let Some(w) = waiting_on.get_mut(&key) {
                        w.push((c, p.index));
                        states[c].in_flight += 1;
                        continue;
                    }
                    let looked = match prefetched.remove(&key) {
                        Some(r) => r,
                        None => self.lookup(&key),
                    };
                    let looked = match looked {
                        Ok(Found::Stale(why)) => {
                            on_event(Event::Stale {
                                cell: &self.recipe.cells[c].name,
                                index: p.index,
                                why: &why,
                            });
                            Ok(None)
                        }
                        Ok(Found::Hit(r)) => Ok(Some(r)),
                        Ok(Found::Miss) => Ok(None),
                        Err(e) => Err(e),
                    };
                    match looked {
                        Ok(Some(r)) => {
                            if shared(&key) {
                                known.insert(key, r.clone());
                            }
                            self.accept(
                                c,
                                p.index,
                                &r,
                                Source::Reused,
                                &mut states,
                                &mut results,
                                on_event,
                            );
                        }
                        Ok(None) => {
                            let spec = match &self.bodies[c] {
                                Ok(make) => make(p),
                                Err(_) => break,
                            };
                            let store = self.store.clone();
                            let staging = self.staging.clone();
                            let cancel = self.cancel.clone();
                            let request = match self.gpus_per_cell.get(c) {
                                Some(&n) if n > 0 => SlotRequest::gpus(n),
                                _ => SlotRequest::cpu(),
                            };
                            let stage_store = Arc::clone(&store);
                            let stage_inputs = Arc::clone(&self.inputs);
                            let inputs = Arc::clone(&self.inputs);
                            let build_lock = self.build_lock.clone();
                            let start_cancel = cancel.clone();
                            let first_start = Arc::clone(&first_start);
                            let place = self.run_dir.as_ref().map(|run_dir| Place {
                                dest: run_dir.join(crate::placement::trial_rel(
                                    self.recipe,
                                    &self.recipe.cells[c].name,
                                    p.index,
                                )),
                                retain: retain.cloned(),
                            });
                            let submitted = pool.submit_staged(
                                (c, p.index),
                                request,
                                move || {
                                    stage_one(
                                        &stage_store,
                                        &build_lock,
                                        &staging,
                                        spec,
                                        &stage_inputs,
                                    )
                                },
                                move |staged, lease| {
                                    first_start.call_once(|| {
                                        crate::timing_mark("the first trial starting")
                                    });
                                    start_staged(staged, lease, &start_cancel)
                                },
                                move |running, mut release| {
                                    finish_running(
                                        &store,
                                        &inputs,
                                        running,
                                        &mut release,
                                        &cancel,
                                        place,
                                    )
                                },
                            );
                            match submitted {
                                Ok(()) => {
                                    pending += 1;
                                    states[c].in_flight += 1;
                                    waiting_on.insert(key, vec![(c, p.index)]);
                                }
                                Err(e) => {
                                    cell_errors.insert(c, e.to_string());
                                    states[c].done = true;
                                }
                            }
                        }
                        Err(e) => {
                            failures.push(e.clone());
                            on_event(Event::Failed {
                                cell: &self.recipe.cells[c].name,
                                index: p.index,
                                error: &e,
                            });
                        }
                    }
                }
            }
            if pending == 0 {
                break;
            }
            let Some(((c, index), out)) = pool.next_completed() else {
                break;
            };
            pending -= 1;
            let Some(key) = by_cell[c]
                .iter()
                .find(|p| p.index == index)
                .map(|p| p.key.clone())
            else {
                continue;
            };
            let waiters = waiting_on.remove(&key).unwrap_or_default();
            match out {
                JobOut::Done(m, source, dir) => {
                    let r = resolve(*m, dir);
                    if shared(&key) {
                        known.insert(key, r.clone());
                    }
                    for (i, (wc, wi)) in waiters.into_iter().enumerate() {
                        states[wc].in_flight -= 1;
                        let src = if i == 0 { source } else { Source::Reused };
                        self.accept(wc, wi, &r, src, &mut states, &mut results, on_event);
                    }
                }
                JobOut::Cancelled => {
                    cancelled = true;
                    for (wc, _) in waiters {
                        states[wc].in_flight -= 1;
                    }
                }
                JobOut::Failed(e) => {
                    for (wc, wi) in waiters {
                        states[wc].in_flight -= 1;
                        on_event(Event::Failed {
                            cell: &self.recipe.cells[wc].name,
                            index: wi,
                            error: &e,
                        });
                    }
                    failures.push(e);
                }
            }
            if self.cancel.is_cancelled() {
                cancelled = true;
            }
        }
        results.sort_by_key(|r| (r.cell, r.index));
        Executed {
            results,
            cell_errors,
            failures,
            cancelled,
            detached: 0,
        }
    }

    /// Looks every key up once, on all cores (rayon): a cached rerun of 10,000 trials is mostly
    /// this. Keys whose shard is absent are misses without a look (a cold store's build
    /// starts its first trial at once). Misses are re-checked under the claim before
    /// executing, so racing is harmless.
    fn prefetch(&self) -> HashMap<Key, Result<Found, String>> {
        let shards = self.store.ac_shards().ok();
        let (keys, absent): (Vec<&Key>, Vec<&Key>) = self
            .dag
            .trial_nodes
            .keys()
            .partition(|k| shards.as_ref().is_none_or(|s| s.contains(k.shard())));
        let mut found: HashMap<Key, Result<Found, String>> = absent
            .into_iter()
            .map(|k| (k.clone(), Ok(Found::Miss)))
            .collect();
        // Threads pay off only for many reads (a few store entries take microseconds).
        if keys.len() < PREFETCH_PARALLEL {
            found.extend(keys.iter().map(|&k| (k.clone(), self.lookup(k))));
        } else {
            let looked: Vec<_> = keys
                .par_iter()
                .map(|&k| (k.clone(), self.lookup(k)))
                .collect();
            found.extend(looked);
        }
        found
    }

    /// The store entry for `key` with its record read straight into a [`TrialRecord`] (no JSON
    /// tree: this is most of a cached rerun).
    fn lookup(&self, key: &Key) -> Result<Found, String> {
        match self.store.lookup_as::<TrialRecord>(key) {
            Ok(Lookup::Hit(m)) => match crate::reuse::reusable(&m.trial, &self.store, &self.inputs)
            {
                Ok(()) => Ok(Found::Hit(Arc::new(Resolved {
                    key: m.key,
                    exec_seconds: m.exec_seconds,
                    record: Arc::new(m.trial),
                    dir: TrialDir::Stored,
                }))),
                Err(why) => Ok(Found::Stale(why)),
            },
            Ok(Lookup::Miss) => Ok(Found::Miss),
            Ok(Lookup::Corrupt { reason }) => {
                eprintln!("aorta: cached trial {key} is corrupt ({reason}); re-executing it");
                Ok(Found::Miss)
            }
            Err(e) => Err(format!("store lookup of {key} failed: {e}")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn accept(
        &self,
        c: usize,
        index: u32,
        r: &Arc<Resolved>,
        source: Source,
        states: &mut [CellState],
        results: &mut Vec<TrialResult>,
        on_event: &mut dyn FnMut(Event),
    ) {
        // A record shared between cells keeps its own numbers but reports under this cell.
        let name = &self.recipe.cells[c].name;
        let record = if r.record.cell_name == *name && r.record.trial_index == index {
            r.record.clone()
        } else {
            let mut own = (*r.record).clone();
            own.cell_name = name.clone();
            own.trial_index = index;
            Arc::new(own)
        };
        if let Some(s) = self.recipe.stop_after {
            if record.verdict == s.event_verdict {
                states[c].events += 1;
                if states[c].events >= s.events {
                    states[c].done = true;
                }
            }
        }
        // Only the first user of an executed trial's directory has it (placed or staged); the
        // others copy theirs out of the store.
        let dir = match source {
            Source::Executed => r.dir.clone(),
            Source::Reused => TrialDir::Stored,
        };
        let t = TrialResult {
            cell: c,
            index,
            key: r.key.clone(),
            exec_seconds: r.exec_seconds,
            record,
            source,
            dir,
        };
        match source {
            Source::Executed => on_event(Event::Executed(&t)),
            Source::Reused => on_event(Event::Reused(&t)),
        }
        results.push(t);
    }
}

/// The command's input file that changed since compile, if any (see
/// [`crate::trial::CommandSettings::changed_input`]).
fn changed_input(spec: &TrialSpec) -> Option<&Path> {
    match &spec.body {
        crate::trial::Body::Command(c) => c.changed_input(),
        crate::trial::Body::Workload(_) => None,
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
) -> Result<Staged, JobOut> {
    let key = &spec.key;
    let every = std::time::Duration::from_secs(5);
    let claim = match store.claim_reporting_under(build_lock, key, every, |w, _| {
        eprintln!("aorta: {}", w.message(key))
    }) {
        Ok(c) => c,
        Err(e) => return Err(JobOut::Failed(format!("cannot claim trial {key}: {e}"))),
    };
    if let Ok(Lookup::Hit(m)) = claim.lookup_as::<TrialRecord>() {
        if crate::reuse::reusable(&m.trial, store, inputs).is_ok() {
            return Err(JobOut::Done(Box::new(m), Source::Reused, TrialDir::Stored));
        }
    }
    let dir = staging.join(format!("{}-{}", &key.as_str()[..16], std::process::id()));
    if let Err(e) = crate::fsutil::fresh_dir(&dir) {
        return Err(JobOut::Failed(format!(
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
) -> JobOut {
    let Running {
        claimed: Claimed { spec, claim, dir },
        trial,
        started,
    } = running;
    let key = &spec.key;
    let started_wall = std::time::SystemTime::now() - started.elapsed();
    let run = trial.finish(&spec, dir.path(), release, cancel);
    let Some(claim) = claim.attach(store) else {
        return JobOut::Failed(format!("trial {key} was claimed in another store"));
    };
    match run {
        TrialRun::Cancelled => JobOut::Cancelled,
        TrialRun::Done(record) if interrupted(&record, cancel) => JobOut::Cancelled,
        TrialRun::Done(mut record) => match changed_input(&spec)
            .map(Path::to_path_buf)
            .or_else(|| traced_change(&spec, inputs, dir.path(), started_wall, &mut record))
        {
            // Hashed once: the inputs are re-read only here.
            Some(changed) => JobOut::Failed(format!(
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
                    JobOut::Done(Box::new(m), Source::Executed, dir)
                }
                Err(e) => JobOut::Failed(e),
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
    let crate::trial::Body::Command(c) = &spec.body else {
        return None;
    };
    let summary = match &c.tracing {
        crate::trial::Tracing::Off(reason) => crate::traced::untraced(reason.clone()),
        crate::trial::Tracing::On(_) if !dir.join(crate::traced::TRACE_FILE).exists() => {
            match &record.inputs {
                // Set when the trial was prepared: why it ran untraced.
                Some(s) => s.clone(),
                None => crate::traced::untraced("the tracer left no trace".into()),
            }
        }
        crate::trial::Tracing::On(_) => match inputs.settle(dir, started) {
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

/// Writes the trial's result.json, stores its other files and commits the manifest, which
/// holds the record (moved in, not copied).
pub(crate) fn commit(
    mut claim: aorta_store::Claim<'_>,
    dir: &Path,
    mut record: TrialRecord,
    secs: f64,
) -> Result<Manifest<TrialRecord>, String> {
    let mut files = list_files(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    // Sorted already; result.json is written below if it is not there yet.
    if let Err(at) = files.binary_search_by(|f| f.as_str().cmp("result.json")) {
        files.insert(at, "result.json".into());
    }
    record.outputs = files;
    let json = serde_json::to_vec_pretty(&record)
        .map_err(|e| format!("cannot encode result.json: {e}"))?;
    // A plain write: the staging directory is private until it is renamed into place, and the
    // build syncs the run directory before its index names the trial (artifacts::finish).
    std::fs::write(dir.join("result.json"), &json)
        .map_err(|e| format!("cannot write result.json: {e}"))?;
    let mut m = Manifest::new(claim.key().clone(), record);
    // result.json is the record itself, which the entry holds already: materialising writes it
    // from there, so it costs no blob.
    for f in m.trial.outputs.iter().filter(|f| *f != "result.json") {
        let blob = claim
            .put_blob_file(&dir.join(f))
            .map_err(|e| format!("cannot store {f}: {e}"))?;
        m.outputs.insert(f.clone(), blob);
    }
    m.exec_seconds = secs;
    claim
        .commit(&m)
        .map_err(|e| format!("cannot commit trial {}: {e}", m.key))?;
    Ok(m)
}
