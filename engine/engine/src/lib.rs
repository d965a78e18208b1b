//! The engine: one layer that every entry point of `aorta` goes through.
//!
//! A [`Session`] is opened once per invocation and owns what the invocation touches: the local
//! store, the remote tier, the environment snapshot, resolved workloads and the salsa compile
//! database. [`Session::compile`] turns a target into a [`Compiled`]: its recipe, the trial
//! keys and the DAG (environment snapshot → trials → cells → artifacts). The same compiled
//! target is then planned ([`Session::plan`]), built ([`Session::build`]: trials in parallel
//! under the slots, cells and artifacts when their inputs are done, artifacts content-addressed
//! and cached like trials), built one trial at a time ([`Session::build_one`], for Buck2),
//! explained ([`Session::explain`]) or watched ([`watch::Watch`]). Nothing here prints except
//! through the event callback and explicit warnings on stderr, so the CLI owns the terminal.

mod artifacts;
mod bodies;
mod build;
mod compile;
mod dirs;
pub mod doctor;
pub mod environment;
mod error;
mod execute;
mod explain;
mod one;
mod outcome;
mod outputs;
mod placement;
mod profilers;
mod records;
mod remote_sync;
mod report_html;
mod retention;
mod reuse;
mod sanitize;
mod schedule;
mod session;
mod step_times;
mod traced;
pub mod watch;
pub mod workloads;

pub use aorta_report::{AgentCandidate, AgentPage, Answer};
pub use artifacts::{ArtifactRecord, RENDERER_VERSION};
pub use bodies::classifier_config;
pub use compile::{normalize, Compiled, RecipeOrigin, TargetId, TargetSpec};
pub use dirs::{user_path_error, write_atomic, write_user_file, UserFile};
pub use environment::EnvRecord;
pub use error::{Category, EngineError, Result, OUTPUT_HELP};
/// What a Slurm array task of `--executor slurm` runs (`aorta trial exec --manifest`).
pub use execute::cluster::{TaskManifest, TaskTrial};
pub use explain::{Explanation, NodeQuery};
pub use one::OneOutcome;
pub use outcome::{BuildOutcome, CellOutcome};
pub use outputs::{run_dir_for, RunPaths};
pub use report_html::render_run_dir;
pub use reuse::{NotReused, Rerun, RerunWhat};
pub use schedule::{Event, Source, TrialResult};
pub use session::{Session, SessionOptions};

/// Types the CLI names in flags and output, re-exported so it depends on the engine alone.
pub use aorta_exec::{containment, shutdown_containment, CancelToken, Containment};
pub use aorta_graph::{Artifact, Key};
pub use aorta_probe::{KeyRules, Snapshot};
pub use aorta_remote::Settings as RemoteSettings;
pub use aorta_slurm::Settings as SlurmSettings;
pub use aorta_store::{GcPolicy, GcReport, StoreStats, VerifyReport};
pub use aorta_trial::TrialRecord;

/// When the process started, for [`timing`]'s offsets ([`timing_start`] sets it).
static TIMING_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Whether `AORTA_TIMING` is set (read once).
fn timing_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("AORTA_TIMING").is_some())
}

/// Marks the start of the process for [`timing`]'s offsets: the first thing `main` does.
pub fn timing_start() {
    TIMING_START.get_or_init(std::time::Instant::now);
}

/// `AORTA_TIMING=1` prints how long each phase took and when it ended (milliseconds since
/// [`timing_start`]), for profiling big matrices and a build's head and tail.
pub fn timing(phase: &str, since: std::time::Instant) {
    if timing_on() {
        eprintln!(
            "aorta timing: {phase}: {:.2} ms{}",
            since.elapsed().as_secs_f64() * 1e3,
            timing_offset()
        );
    }
}

/// `AORTA_TIMING=1` prints the CPU time the calling thread spent on a phase since `cpu_since`
/// (an [`aorta_exec::thread_cpu_time`] reading): its cost apart from the machine's contention.
pub fn timing_cpu(phase: &str, cpu_since: std::time::Duration) {
    if timing_on() {
        let spent = aorta_exec::thread_cpu_time().saturating_sub(cpu_since);
        eprintln!(
            "aorta timing: {phase}: {:.2} ms of CPU{}",
            spent.as_secs_f64() * 1e3,
            timing_offset()
        );
    }
}

/// `AORTA_TIMING=1` prints when a point of the run was reached (milliseconds since
/// [`timing_start`]).
pub fn timing_mark(point: &str) {
    if timing_on() {
        eprintln!("aorta timing: {point}{}", timing_offset());
    }
}

fn timing_offset() -> String {
    TIMING_START
        .get()
        .map(|t| format!(" (at {:.2} ms)", t.elapsed().as_secs_f64() * 1e3))
        .unwrap_or_default()
}
