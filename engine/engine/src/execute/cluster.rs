//! The Slurm executor: every trial the scheduler hands it becomes a task of a job array (one
//! array per resource shape, submitted at the scheduler's next wait) running
//! `aorta trial exec --manifest M` on the cluster; the result lands in the shared store, where
//! this aorta finds it. squeue/sacct say what happened to tasks that left no result: the
//! cluster taking one away (node failure, preemption, boot failure, a cancel this aorta did not
//! issue) resubmits it, a bounded number of times; the task's own time or memory limit kill is
//! the trial's result, recorded here as a local timeout or OOM kill would be; any other failure
//! of the task is reported, never retried. The tasks the scheduler forgets (`stop_after`
//! decided their cells) are cancelled. Ctrl-C cancels the arrays. Each array is recorded in the
//! store before it is submitted (`execute::submissions`), so a later build (after `--detach`, a
//! crash or a kill at any point) follows its tasks instead of submitting them again; squeue
//! failures while tasks live are waited out (`execute::patience`).

mod submit;

use super::nodes::{NodeMismatch, PartitionProbe};
use super::patience::Patience;
use super::submissions::{now_secs, Submissions};
use super::{ArrayProgress, Source, TrialDir};
use super::{Executor, Job, Outcome, Waited};
use crate::compile::{Compiled, RecipeOrigin};
use crate::error::{EngineError, Result};
use crate::execute::process::SchedulerKill;
use crate::session::Session;
use aorta_exec::CancelToken;
use aorta_recipe::Resources;
use aorta_slurm::{Meaning, Slurm, SlurmConfig, TaskId};
use aorta_store::{Key, LocalStore, Lookup};
use aorta_trial::TrialRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MANIFEST_FORMAT: u32 = 3;

/// What the tasks of one array run: `aorta trial exec --manifest FILE` takes trial
/// `$SLURM_ARRAY_TASK_ID` of `trials`, with the submitter's recipe, snapshot and store, and
/// refuses it unless its key is the one recorded here.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskManifest {
    pub format: u32,
    /// The submitter's recipe origin, its paths absolute: a file with its overlays, or a
    /// request (flag mode, `aorta run`, an agent look) the task's database builds again.
    pub origin: RecipeOrigin,
    pub argv: Option<Vec<String>>,
    pub store: PathBuf,
    /// The submitter's environment snapshot: the tasks' keys are computed from it.
    pub env_snapshot: PathBuf,
    pub trial_timeout: Option<f64>,
    pub kill_on_hang: bool,
    /// `env_snapshot` is the partition's (a probe job's), not one the user pinned: each task
    /// keys its trial by its own node's environment and reports a node that differs
    /// ([`NodeMismatch`]) instead of storing its result under the plan's key.
    #[serde(default)]
    pub node_keyed: bool,
    pub trials: Vec<TaskTrial>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskTrial {
    pub cell: String,
    pub index: u32,
    pub key: Key,
}

impl TaskManifest {
    pub fn load(path: &Path) -> Result<TaskManifest> {
        let text = std::fs::read(path).map_err(|e| {
            EngineError::infra(format!("cannot read the manifest {}: {e}", path.display()))
        })?;
        let m: TaskManifest = serde_json::from_slice(&text).map_err(|e| {
            EngineError::infra(format!(
                "the manifest {} is unreadable: {e}",
                path.display()
            ))
        })?;
        if m.format != MANIFEST_FORMAT {
            return Err(EngineError::infra(format!(
                "the manifest {} has format {}, this aorta reads {MANIFEST_FORMAT}",
                path.display(),
                m.format
            )));
        }
        Ok(m)
    }

    /// The trial of array task `index` (default: `$SLURM_ARRAY_TASK_ID`).
    pub fn task(&self, index: Option<u32>) -> Result<&TaskTrial> {
        let i = match index {
            Some(i) => i,
            None => std::env::var("SLURM_ARRAY_TASK_ID")
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| {
                    EngineError::usage(
                        "--manifest needs SLURM_ARRAY_TASK_ID (set by Slurm in an array task)",
                        "aorta submits these tasks itself: aorta build … --executor slurm",
                    )
                })?,
        };
        self.trials.get(i as usize).ok_or_else(|| {
            EngineError::infra(format!(
                "array task {i} is past the manifest's {} trials",
                self.trials.len()
            ))
        })
    }
}

/// A submitted task without a result yet, as this build follows it (its array's record in the
/// store, [`Submissions`], is what survives the build).
#[derive(Debug, Clone)]
struct Submitted {
    job: String,
    task: u32,
    attempt: u32,
    /// Its array's name: the record and the folder.
    array: String,
    array_dir: PathBuf,
    /// Seconds since the epoch: a task squeue does not list yet is not lost right away.
    at: u64,
    /// Submitted by an earlier build: a task of it that ended without a result runs again
    /// (its result was collected and later evicted, or its submitter never saw it end).
    inherited: bool,
}

/// Whether Slurm killed a task for the trial's own time or memory limit: `TIMEOUT`,
/// `OUT_OF_MEMORY`, or `FAILED` with slurmstepd's memory line in the task's `log` (memory
/// enforced by polling, without cgroups, ends a task that way).
fn scheduler_kill(state: &aorta_slurm::JobState, log: &Path) -> Option<SchedulerKill> {
    use aorta_slurm::JobState;
    match state {
        JobState::Timeout => Some(SchedulerKill::TimeLimit),
        JobState::OutOfMemory => Some(SchedulerKill::MemoryLimit),
        JobState::Failed
            if std::fs::read_to_string(log).is_ok_and(|t| aorta_slurm::killed_for_memory(&t)) =>
        {
            Some(SchedulerKill::MemoryLimit)
        }
        _ => None,
    }
}

/// An array this build follows, by name.
struct ArrayState {
    job: String,
    /// Tasks that ended in this build, for progress.
    done: usize,
    /// Trials of its record not yet ended in this build nor found with a result: at 0 the
    /// record goes, and the folder unless a task failed.
    open: usize,
    dir: PathBuf,
    /// A task failed: its log stays.
    keep: bool,
}

/// How long a task squeue does not list yet, or an array recorded without a job id that squeue
/// does not know, may still be on its way (sbatch's answer, an orphaned sbatch still running).
const ON_ITS_WAY_SECS: u64 = 30;

pub(crate) struct SlurmExecutor<'a> {
    c: &'a Compiled,
    store: Arc<LocalStore>,
    cfg: &'a SlurmConfig,
    slurm: Slurm,
    root: PathBuf,
    cancel: CancelToken,
    /// `--detach`: submit, then leave the tasks to a later build.
    detach: bool,
    /// The jobs started and not yet ended.
    jobs: HashMap<Key, Job>,
    /// Jobs to submit at the next wait, each with its attempt number.
    fresh: Vec<(Key, u32)>,
    /// Submitted tasks (by this build or an earlier one) without a result yet.
    pending: HashMap<Key, Submitted>,
    /// Tasks earlier builds submitted (their records), without a result, until started here.
    recorded: HashMap<Key, Submitted>,
    /// Trials earlier builds submitted whose results landed since: collected by this build.
    collected: HashSet<Key>,
    /// The arrays followed, by name.
    arrays: BTreeMap<String, ArrayState>,
    submissions: Submissions,
    patience: Patience,
    common: TaskManifest,
    aorta: PathBuf,
    cwd: PathBuf,
    /// The cluster's `MaxArraySize`, once read.
    max_array: Option<u32>,
}

impl Session {
    /// The Slurm executor for a compiled target's trials (see the module's doc). Its tasks
    /// compile the target again on the nodes, from the same origin.
    pub(crate) fn slurm_executor<'a>(
        &'a self,
        c: &'a Compiled,
        store: &Arc<LocalStore>,
    ) -> Result<SlurmExecutor<'a>> {
        let cfg = &self.slurm;
        let root = store.root().join("slurm");
        let submissions = Submissions::new(&root);
        std::fs::create_dir_all(root.join("submitted"))
            .and_then(|_| std::fs::create_dir_all(root.join("arrays")))
            .map_err(|e| EngineError::infra(format!("cannot create {}: {e}", root.display())))?;
        let snapshot = root
            .join("arrays")
            .join(format!("env-{}.json", c.env.key.hash));
        if !snapshot.exists() {
            crate::dirs::write_atomic(&snapshot, c.env.snapshot.to_json_pretty().as_bytes())
                .map_err(|e| {
                    EngineError::infra(format!("cannot write {}: {e}", snapshot.display()))
                })?;
        }
        let aorta = match &cfg.aorta {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| {
                EngineError::infra(format!("cannot find this aorta's executable: {e}"))
            })?,
        };
        let mut executor = SlurmExecutor {
            c,
            store: Arc::clone(store),
            cfg,
            slurm: Slurm::new(cfg.bin_dir.clone()),
            root,
            cancel: self.cancel_token()?,
            detach: self.opts.detach,
            jobs: HashMap::new(),
            fresh: Vec::new(),
            pending: HashMap::new(),
            recorded: HashMap::new(),
            collected: HashSet::new(),
            arrays: BTreeMap::new(),
            submissions,
            patience: Patience::default(),
            max_array: None,
            common: TaskManifest {
                format: MANIFEST_FORMAT,
                origin: self.origin(c).absolute(&self.cwd),
                argv: c.argv.clone(),
                store: store.root().to_path_buf(),
                env_snapshot: snapshot,
                trial_timeout: self.opts.trial_timeout,
                kill_on_hang: self.opts.kill_on_hang,
                node_keyed: self.partition_keyed(),
                trials: Vec::new(),
            },
            aorta,
            cwd: self.cwd.clone(),
        };
        executor.load_records()?;
        Ok(executor)
    }

    /// One array task (`aorta trial exec --manifest`): with a partition's snapshot as the plan,
    /// the trial is keyed by this node's environment (`execute::nodes`); else by the
    /// submitter's snapshot, and its key must be the one the submitter recorded.
    pub fn build_task(
        &self,
        c: &Compiled,
        m: &TaskManifest,
        t: &TaskTrial,
    ) -> Result<crate::one::OneOutcome> {
        if !m.node_keyed {
            return self.build_one(c, &t.cell, t.index, None, Some(&t.key));
        }
        let plan = crate::environment::load_snapshot(&m.env_snapshot)
            .map_err(|e| EngineError::infra(e.to_string()))?
            .key(&crate::environment::key_rules(&c.recipe));
        if plan.hash == c.env.key.hash {
            return self.build_one(c, &t.cell, t.index, None, Some(&t.key));
        }
        // Another environment than the plan's: the result goes under this node's own key.
        let out = self.build_one(c, &t.cell, t.index, None, None)?;
        NodeMismatch::leave(&m.store, t.key.as_str(), &plan, &c.env, &out.key)?;
        Ok(out)
    }

    /// `aorta cache gc`, first: the Slurm submission records whose every trial has a result
    /// go, with their arrays' folders. How many went.
    pub fn prune_submissions(&self) -> Result<usize> {
        let store = self.writable_store()?;
        Ok(Submissions::new(&store.root().join("slurm"))
            .prune(&store)
            .removed)
    }

    fn origin(&self, c: &Compiled) -> RecipeOrigin {
        let compiler = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        compiler.targets[c.id.0].spec.origin.clone()
    }
}

impl Executor for SlurmExecutor<'_> {
    fn runs_ahead(&self) -> bool {
        true
    }

    /// A key some earlier build submitted (after `--detach`, or a crash) is waited for, not
    /// submitted again.
    fn start(&mut self, job: Job) -> std::result::Result<(), aorta_exec::SlotError> {
        let key = job.key.clone();
        match self.recorded.remove(&key) {
            Some(s) => {
                self.pending.insert(key.clone(), s);
            }
            None => self.fresh.push((key.clone(), 1)),
        }
        self.jobs.insert(key, job);
        Ok(())
    }

    fn wait(&mut self, progress: &mut dyn FnMut(&[ArrayProgress])) -> Result<Waited> {
        if !self.fresh.is_empty() {
            let fresh = std::mem::take(&mut self.fresh);
            self.submit(fresh)?;
        }
        loop {
            if self.cancel.is_cancelled() {
                self.cancel_all();
                return Ok(Waited::Cancelled);
            }
            if self.pending.is_empty() {
                return Ok(Waited::Ended(Vec::new()));
            }
            if self.detach {
                return Ok(Waited::Detached);
            }
            let Some((ended, again)) = self.poll(progress)? else {
                self.cancel_all();
                return Ok(Waited::Cancelled);
            };
            if !again.is_empty() {
                self.submit(again)?;
            }
            if !ended.is_empty() {
                return Ok(Waited::Ended(ended));
            }
            let until = Instant::now() + self.cfg.poll_interval;
            while Instant::now() < until && !self.cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(50).min(self.cfg.poll_interval));
            }
        }
    }

    fn collects(&self, key: &Key) -> bool {
        self.collected.contains(key)
    }

    fn pending(&self) -> usize {
        self.fresh.len() + self.pending.len()
    }

    /// Cancels the forgotten tasks and forgets their submissions.
    fn forget(&mut self, keys: &[Key]) {
        self.fresh.retain(|(k, _)| !keys.contains(k));
        let drop: Vec<&Key> = keys
            .iter()
            .filter(|k| self.pending.contains_key(*k))
            .collect();
        if !drop.is_empty() {
            let tasks: Vec<String> = drop
                .iter()
                .map(|k| format!("{}_{}", self.pending[*k].job, self.pending[*k].task))
                .collect();
            if let Err(e) = self.slurm.cancel(&tasks) {
                eprintln!(
                    "aorta: cannot cancel the Slurm tasks {} (no longer needed: stop_after): {e}",
                    tasks.join(",")
                );
            }
        }
        for k in keys {
            self.jobs.remove(k);
            if let Some(s) = self.pending.remove(k) {
                self.task_done(&s.array, false);
            }
        }
    }
}

impl SlurmExecutor<'_> {
    /// Submits at the first wait and leaves the tasks to a later build, as `--detach` does.
    pub(crate) fn submit_only(mut self) -> Self {
        self.detach = true;
        self
    }

    /// The store's result for a started key: not the one the scheduler refused.
    fn result(&self, key: &Key) -> Result<Option<aorta_store::Manifest<TrialRecord>>> {
        match self.store.lookup_as::<TrialRecord>(key) {
            Ok(Lookup::Hit(m)) if !self.refused(key, &m) => Ok(Some(m)),
            Ok(_) => Ok(None),
            Err(e) => Err(EngineError::infra(format!(
                "store lookup of {key} failed: {e}"
            ))),
        }
    }

    fn refused(&self, key: &Key, m: &aorta_store::Manifest<TrialRecord>) -> bool {
        let refused = self.jobs.get(key).and_then(|j| j.refused.as_deref());
        refused.is_some_and(|id| id == super::result_id(key, m.exec_seconds, &m.trial))
    }

    /// A started key's job ended with `outcome`: its submission is forgotten.
    fn ended(&mut self, key: &Key, failed: bool) {
        self.jobs.remove(key);
        if let Some(s) = self.pending.remove(key) {
            self.task_done(&s.array, failed);
        }
    }

    /// The trial's resources over the configured defaults.
    fn shape(&self, key: &Key) -> Resources {
        let cell = self.jobs[key].cell;
        let recipe = &self.c.recipe;
        let defaults = Resources {
            partition: self.cfg.partition.clone(),
            account: self.cfg.account.clone(),
            ..Resources::default()
        };
        recipe.cells[cell]
            .effective_resources(recipe)
            .over(&defaults)
    }

    /// Asks Slurm about the pending tasks (one squeue for all, waiting out an outage; the
    /// store is read only for the tasks that ended): what ended (a result, a limit kill
    /// recorded, a failure), and the ones to submit again (interrupted while retries last, or
    /// an earlier build's task that left no result). `None`: Ctrl-C during an outage.
    #[allow(clippy::type_complexity)]
    fn poll(
        &mut self,
        report: &mut dyn FnMut(&[ArrayProgress]),
    ) -> Result<Option<(Vec<(Key, Outcome)>, Vec<(Key, u32)>)>> {
        let (t_poll, polled) = (Instant::now(), self.pending.len());
        let mut ended = Vec::new();
        let jobs: Vec<String> = {
            let mut j: Vec<String> = self.pending.values().map(|s| s.job.clone()).collect();
            j.sort();
            j.dedup();
            j
        };
        let slurm = &self.slurm;
        // Whatever squeue says while tasks live, it is never the end of the build.
        let states = self
            .patience
            .call(
                self.cfg,
                &self.cancel,
                "squeue",
                |_| true,
                |_| slurm.states(&jobs),
            )
            .map_err(|e| {
                EngineError::infra(format!("cannot ask Slurm for the tasks' states: {e}"))
            })?;
        let Some(states) = states else {
            return Ok(None);
        };
        crate::timing("slurm poll: squeue", t_poll);
        let cpu_after_squeue = aorta_exec::thread_cpu_time();
        let mut progress: BTreeMap<String, ArrayProgress> = BTreeMap::new();
        let mut again = Vec::new();
        let keys: Vec<Key> = self.pending.keys().cloned().collect();
        for key in keys {
            let s = self.pending[&key].clone();
            let id: TaskId = (s.job.clone(), s.task);
            let p = progress
                .entry(s.job.clone())
                .or_insert_with(|| ArrayProgress {
                    job: s.job.clone(),
                    ..ArrayProgress::default()
                });
            let state = states.get(&id);
            let meaning = match state {
                Some(st) => st.meaning(),
                // Not listed yet (just submitted), or forgotten by squeue and unknown to sacct.
                None if now_secs() < s.at + ON_ITS_WAY_SECS => Meaning::Active,
                None => Meaning::Interrupted,
            };
            let shown = state.map_or("gone from squeue and sacct", |st| st.as_str());
            let log = s.array_dir.join(format!("task-{}.log", s.task));
            match meaning {
                Meaning::Active => match state {
                    Some(aorta_slurm::JobState::Pending) | None => p.queued += 1,
                    _ => p.running += 1,
                },
                Meaning::Finished | Meaning::TrialFailed | Meaning::Interrupted => {
                    // The task may have committed between the store check and squeue.
                    if let Some(m) = self.result(&key)? {
                        self.ended(&key, false);
                        ended.push((key, executed(m)));
                        continue;
                    }
                    self.pending.remove(&key);
                    self.task_done(&s.array, true);
                    let kill = state.and_then(|st| scheduler_kill(st, &log));
                    if let Some(kill) = kill {
                        let said = match (kill, state) {
                            (SchedulerKill::MemoryLimit, Some(aorta_slurm::JobState::Failed)) => {
                                format!("{shown} (exceeded its memory limit)")
                            }
                            _ => shown.to_owned(),
                        };
                        let outcome = match self.record_kill(&key, &s, kill, &said) {
                            Ok(m) => executed(m),
                            Err(e) => Outcome::Failed(format!("trial {key}: Slurm task {}_{} ended {shown}; cannot record it: {e}", s.job, s.task)),
                        };
                        self.jobs.remove(&key);
                        ended.push((key, outcome));
                        continue;
                    }
                    match meaning {
                        Meaning::Interrupted if s.attempt <= self.cfg.retries => {
                            eprintln!(
                                "aorta: Slurm task {}_{} ({}) is {shown}; submitting it again (attempt {} of {})",
                                s.job,
                                s.task,
                                key,
                                s.attempt + 1,
                                self.cfg.retries + 1
                            );
                            again.push((key, s.attempt + 1));
                        }
                        _ if let Some(note) = NodeMismatch::take(&self.root, &key) => {
                            PartitionProbe::forget_all(&self.root);
                            self.jobs.remove(&key);
                            ended.push((key.clone(), Outcome::Failed(note.message(&key))));
                        }
                        _ if s.inherited && meaning != Meaning::Interrupted => {
                            eprintln!(
                                "aorta: Slurm task {}_{} of an earlier build ended {shown} and left no result for trial {key}; running it again",
                                s.job, s.task
                            );
                            again.push((key, 1));
                        }
                        _ => {
                            let e = format!(
                                "trial {key}: Slurm task {}_{} ended {shown} without a result (log: {})",
                                s.job,
                                s.task,
                                log.display()
                            );
                            self.jobs.remove(&key);
                            ended.push((key, Outcome::Failed(e)));
                        }
                    }
                }
            }
        }
        for a in self.arrays.values() {
            if let Some(p) = progress.get_mut(&a.job) {
                p.done += a.done;
            }
        }
        let list: Vec<ArrayProgress> = progress.into_values().collect();
        report(&list);
        crate::timing(&format!("slurm poll of {polled} pending task(s)"), t_poll);
        crate::timing_cpu(
            &format!("slurm poll after squeue, {} ended", ended.len()),
            cpu_after_squeue,
        );
        Ok(Some((ended, again)))
    }

    /// Stores the record of a trial whose task Slurm killed for its own time or memory limit
    /// (no `aorta trial exec` survived to write one): judged as a local timeout or OOM kill,
    /// with the task's Slurm log as its `slurm-task.log`, so it counts in the cell's failure
    /// rate and the next build reuses it.
    fn record_kill(
        &self,
        key: &Key,
        s: &Submitted,
        kill: SchedulerKill,
        state: &str,
    ) -> std::result::Result<aorta_store::Manifest<TrialRecord>, super::local::CommitError> {
        let spec = &self.jobs[key].spec;
        let claim = self
            .store
            .claim(key)
            .map_err(|source| super::local::CommitError::Claim {
                key: key.clone(),
                source,
            })?;
        if let Ok(Lookup::Hit(m)) = claim.lookup_as::<TrialRecord>() {
            if !self.refused(key, &m) {
                return Ok(m);
            }
        }
        let dir = self.store.root().join("tmp").join(format!(
            "slurm-{}-{}",
            &key.as_str()[..16],
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(source) = std::fs::create_dir_all(&dir) {
            return Err(super::local::CommitError::CreateDir { dir, source });
        }
        let task_log = s.array_dir.join(format!("task-{}.log", s.task));
        let log = dir.join("slurm-task.log");
        let log = std::fs::copy(&task_log, &log).ok().map(|_| log);
        // What Slurm enforced: the limit, in whole minutes.
        let walltime = match kill {
            SchedulerKill::TimeLimit => self
                .shape(key)
                .time_limit_secs
                .map_or(Duration::ZERO, |t| Duration::from_secs(t.div_ceil(60) * 60)),
            SchedulerKill::MemoryLimit => Duration::ZERO,
        };
        let record = crate::execute::process::killed_by_scheduler(
            spec,
            &dir,
            kill,
            walltime,
            log.as_deref(),
            state,
        );
        let m = super::local::commit(claim, &dir, record, walltime.as_secs_f64());
        let _ = std::fs::remove_dir_all(&dir);
        m
    }

    /// Ctrl-C: cancel every array with a pending task and forget the submissions.
    fn cancel_all(&mut self) {
        let mut jobs: Vec<String> = self.pending.values().map(|s| s.job.clone()).collect();
        jobs.sort();
        jobs.dedup();
        if let Err(e) = self.slurm.cancel(&jobs) {
            // Their records stay: a later build finds the tasks again.
            eprintln!(
                "aorta: cannot cancel the Slurm jobs {} (a later build waits for them): {e}",
                jobs.join(",")
            );
            return;
        }
        let names: Vec<String> = self
            .arrays
            .iter()
            .filter(|(_, a)| jobs.contains(&a.job))
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            self.submissions.remove(&name);
            if let Some(a) = self.arrays.remove(&name) {
                let _ = std::fs::remove_dir_all(&a.dir);
            }
        }
        self.pending.clear();
    }
}

/// A result a task committed, as the scheduler takes it.
fn executed(m: aorta_store::Manifest<TrialRecord>) -> Outcome {
    Outcome::Done(Box::new(m), Source::Executed, TrialDir::Stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aorta_slurm::JobState;

    #[test]
    fn time_and_memory_kills_are_the_trials_own_the_rest_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.log");
        std::fs::write(&plain, "aorta: something went wrong\n").unwrap();
        let oom = dir.path().join("oom.log");
        std::fs::write(
            &oom,
            "slurmstepd-n1: error: StepId=4_0.batch exceeded memory limit (329748480 > 67108864), being killed\n",
        )
        .unwrap();
        let missing = dir.path().join("missing.log");
        // The words as squeue (--format=%T) and sacct (State) print them.
        let kill = |word: &str, log: &Path| scheduler_kill(&JobState::parse(word), log);
        assert_eq!(kill("TIMEOUT", &missing), Some(SchedulerKill::TimeLimit));
        assert_eq!(
            kill("OUT_OF_MEMORY", &missing),
            Some(SchedulerKill::MemoryLimit)
        );
        assert_eq!(kill("OOM", &plain), Some(SchedulerKill::MemoryLimit));
        assert_eq!(kill("FAILED", &oom), Some(SchedulerKill::MemoryLimit));
        assert_eq!(kill("FAILED", &plain), None);
        assert_eq!(kill("FAILED", &missing), None);
        for word in [
            "DEADLINE",
            "CANCELLED by 1000",
            "NODE_FAIL",
            "COMPLETED",
            "PREEMPTED",
        ] {
            assert_eq!(kill(word, &oom), None, "{word}");
        }
    }
}
