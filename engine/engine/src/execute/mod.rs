//! Where the trials the scheduler could not reuse run. The policy — store lookups, the reuse
//! rule, keys shared between cells, `stop_after`, events, what a build reports — is the
//! scheduler's alone ([`crate::schedule`]); an executor only runs the trials it is handed and
//! says how each ended. Two implement [`Executor`]: [`local::LocalExecutor`] (child processes
//! under this machine's slots) and [`cluster::SlurmExecutor`] (tasks of Slurm job arrays), as
//! buck2's `PreparedCommandExecutor` has a local and a remote implementation under one
//! scheduler.

pub(crate) mod cluster;
pub(crate) mod gpu_readings;
pub(crate) mod local;
pub(crate) mod nodes;
mod patience;
pub(crate) mod process;
mod submissions;

use crate::error::Result;
use crate::execute::process::TrialSpec;
use aorta_store::{Key, Manifest};
use aorta_trial::TrialRecord;

/// One trial to run, with the first cell that needs it (a key shared by several cells runs
/// once for all of them: the scheduler hands the others the result).
pub(crate) struct Job {
    pub key: Key,
    pub cell: usize,
    pub index: u32,
    pub spec: TrialSpec,
    /// The result id ([`crate::schedule::TrialResult::result_id`]) of a stored result of this
    /// key that the scheduler refused to reuse (an error, an edited input): still in the store
    /// until the new result replaces it, and never this job's result.
    pub refused: Option<String>,
}

/// How a job ended.
pub(crate) enum Outcome {
    /// Its result, committed to the store: executed for this job, or found there (another
    /// build ran the key meanwhile).
    Done(Box<Manifest<TrialRecord>>, Source, TrialDir),
    /// Ctrl-C stopped it; nothing was stored.
    Cancelled,
    /// It could not be run or judged (the trial removed its own directory, an input changed
    /// while it ran): no verdict, and the build is incomplete.
    Failed(String),
    /// The store or the run directory could not take it (a full disk, a claim or staging
    /// directory that cannot be made, a result that cannot be written): no verdict, and an
    /// infrastructure failure of the build.
    Unrecorded(String),
}

/// What [`Executor::wait`] returns.
pub(crate) enum Waited {
    /// These jobs ended (none: nothing was pending).
    Ended(Vec<(Key, Outcome)>),
    /// Ctrl-C: every pending job was cancelled and is not awaited.
    Cancelled,
    /// `--detach`: the pending jobs run on without this aorta; a later build collects them.
    Detached,
}

/// How a trial's result was obtained in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Executed,
    Reused,
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

/// One Slurm array's counts, for progress ([`crate::schedule::Event::Cluster`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayProgress {
    pub job: String,
    pub queued: usize,
    pub running: usize,
    pub done: usize,
}

/// Which result a store entry is ([`crate::schedule::TrialResult::result_id`]): the key and a
/// stamp of its execution; the measured durations differ between any two executions.
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

/// Runs trials. The scheduler calls [`start`](Executor::start) for each trial it decided to
/// execute, then [`wait`](Executor::wait) until nothing is pending.
pub(crate) trait Executor {
    /// Whether a `stop_after` cell's later trials may run before its earlier ones decided the
    /// cell: a Slurm queue wait costs more than a trial run in vain (cancelled, or kept in the
    /// store but not the cell's); locally a cell runs its trials in order, as AORTA does.
    fn runs_ahead(&self) -> bool;

    /// Takes a job. `Err` is a slot request no trial of the job's cell can ever get here (a
    /// GPU request larger than the machine): the cell's error.
    fn start(&mut self, job: Job) -> std::result::Result<(), aorta_exec::SlotError>;

    /// Blocks until at least one started job ends, telling `progress` how a cluster's arrays
    /// stand meanwhile (or returns at once, `Ended(vec![])`, when
    /// none is pending). `Err` is an infrastructure fault that ends the build (sbatch or
    /// squeue failing).
    fn wait(&mut self, progress: &mut dyn FnMut(&[ArrayProgress])) -> Result<Waited>;

    /// Whether a stored result of `key` is one this executor ran for an earlier build that
    /// did not wait for it (a Slurm task after `--detach`): the build that finds it collects
    /// it, as executed, not reused.
    fn collects(&self, _key: &Key) -> bool {
        false
    }

    /// Jobs started and not yet returned by `wait`.
    fn pending(&self) -> usize;

    /// The scheduler no longer needs these pending jobs (their cells' `stop_after` decided):
    /// stop them if that saves anything; they are not awaited.
    fn forget(&mut self, keys: &[Key]);
}
