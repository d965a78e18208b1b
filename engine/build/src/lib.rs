//! The engine: from a resolved recipe and its planned trials to a run directory.
//!
//! [`build`] opens the store, reuses every cached trial, executes the rest (see [`engine`]),
//! materialises each trial's outputs into the run directory and writes matrix.md,
//! matrix.json, recipe.resolved.yaml and env.json. Nothing here prints except through the
//! event callback, so the CLI owns the terminal.

pub mod engine;
mod fsutil;
mod gpu;
pub mod one;
mod outputs;
mod remote;
mod retention;
mod step_times;
pub mod trial;
pub mod watch;
pub mod workloads;

pub use engine::{Event, Source, TrialResult};
pub use fsutil::write_atomic;
pub use outputs::{run_dir_for, RunPaths};

use aorta_classify::{ClassifierConfig, CustomDetector};
use aorta_exec::{CancelToken, HangConfig, Slots};
use aorta_graph::{KeyContext, PlannedTrial};
use aorta_recipe::{Mode, Recipe};
use aorta_store::LocalStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use trial::{Body, CommandSettings, TrialSpec, WorkloadSettings};

pub struct BuildOptions {
    pub store_root: PathBuf,
    /// `--output`: the run directory's parent (AORTA's default per flow when None).
    pub output: PathBuf,
    pub jobs: usize,
    pub gpus: Vec<String>,
    pub gpus_per_trial: usize,
    /// Kill a trial whose process tree the hang monitor judges hung (AORTA only flagged it).
    pub kill_on_hang: bool,
    /// Timeout for workload-protocol trials (probe recipes carry their own).
    pub workload_timeout: Option<Duration>,
    pub cancel: CancelToken,
    /// Resolved workload executables by name (workload flow).
    pub workloads: Vec<(String, Result<workloads::Workload, String>)>,
    /// The environment snapshot (with the key the trials used) written as each environment's
    /// env.json; `None` writes host basics only.
    pub env_record: Option<serde_json::Value>,
    /// The remote cache tier (`--remote-cache`): pulled before scheduling, pushed after.
    pub remote: Option<Arc<aorta_remote::RemoteCache>>,
}

pub struct BuildOutcome {
    pub run_dir: PathBuf,
    pub executed: usize,
    pub reused: usize,
    pub failed_to_run: Vec<String>,
    pub cancelled: bool,
    pub summary: String,
    /// Set when the matrix could not name a usable baseline (CLI exits 1 after writing).
    pub incomplete: Option<String>,
}

/// `AORTA_TIMING=1` prints how long each phase took, for profiling big matrices.
pub fn timing(phase: &str, since: std::time::Instant) {
    if std::env::var_os("AORTA_TIMING").is_some() {
        eprintln!("aorta timing: {phase}: {:.3} s", since.elapsed().as_secs_f64());
    }
}

/// Resolves workload executables for a recipe and fills the key context's identities.
/// `torch_dir`: the torch package the environment snapshot found, where libtorch is looked for
/// first (see [`workloads::libtorch_lib`]).
pub fn resolve_workloads(recipe: &Recipe, ctx: &mut KeyContext, torch_dir: Option<&Path>) -> Vec<(String, Result<workloads::Workload, String>)> {
    if recipe.mode == Mode::Probe {
        return Vec::new();
    }
    let w = workloads::resolve(&recipe.workload, torch_dir);
    if let Ok(found) = &w {
        ctx.workloads.insert(found.name.clone(), (found.version.clone(), Some(found.blake3.clone())));
    }
    vec![(recipe.workload.clone(), w)]
}

fn command_settings(recipe: &Recipe, argv: &[String], kill_on_hang: bool) -> Result<CommandSettings, String> {
    let p = recipe.probe.as_ref().ok_or("not a probe recipe")?;
    let mut custom = Vec::new();
    for c in &p.custom_patterns {
        let on = match c.on_match {
            aorta_recipe::OnMatch::Fail => aorta_classify::OnMatch::Fail,
            aorta_recipe::OnMatch::Warn => aorta_classify::OnMatch::Warn,
            aorta_recipe::OnMatch::Info => aorta_classify::OnMatch::Info,
        };
        custom.push(CustomDetector::new(c.id.clone(), &c.regex, c.condition.as_deref(), on, c.required_for_pass)?);
    }
    let hang = (!p.disables.tier_disabled(aorta_classify::Tier::Tier2) && !p.disables.detector_disabled("tier2:hang")).then(|| HangConfig {
        window: Duration::from_secs_f64(p.hang_window_sec),
        grace: Duration::from_secs_f64(p.hang_grace_period_at_start),
        kill_on_hang,
        ..HangConfig::default()
    });
    Ok(CommandSettings {
        argv: argv.to_vec(),
        timeout: p.timeout_per_trial.map(Duration::from_secs_f64),
        passthrough: p.env_passthrough_mode,
        hang,
        classifier: ClassifierConfig { custom, tier3_vram_growth: p.tier3_vram_growth, disables: p.disables.clone() },
        dmesg_unavailable: Default::default(),
        // One reader of /dev/kmsg per build; where it cannot be opened, dmesg per trial.
        kernel_log: if p.disables.tier_disabled(aorta_classify::Tier::Tier3) { None } else { aorta_classify::KernelLog::open().ok() },
        step_time_regex: p.step_time_regex.as_deref().map(aorta_recipe::compile_regex).transpose().map_err(|e| format!("step_time_regex: {e}"))?,
    })
}

use engine::MakeSpec;

/// Per cell, how to turn a planned trial into the spec the executor runs.
fn spec_maker(cell: &aorta_recipe::Cell, body: impl Fn() -> Body + Send + Sync + 'static) -> MakeSpec {
    let env = cell.resolved_env.clone();
    let name = cell.name.clone();
    Arc::new(move |p: &PlannedTrial| TrialSpec { key: p.key.0.clone(), cell: name.clone(), index: p.index, env: env.clone(), body: body() })
}

fn bodies(recipe: &Recipe, argv: Option<&[String]>, opts: &BuildOptions) -> Result<Vec<Result<MakeSpec, String>>, String> {
    let mut out = Vec::new();
    match recipe.mode {
        Mode::Probe => {
            let argv = argv.ok_or("a probe recipe needs the command to run (after --)")?;
            let settings = Arc::new(command_settings(recipe, argv, opts.kill_on_hang)?);
            for cell in &recipe.cells {
                let settings = settings.clone();
                out.push(Ok(spec_maker(cell, move || Body::Command(settings.clone()))));
            }
        }
        Mode::Triage => {
            let found = opts.workloads.iter().find(|(n, _)| n == &recipe.workload).map(|(_, w)| w.clone());
            for cell in &recipe.cells {
                let w = match &found {
                    Some(Ok(w)) => w.clone(),
                    Some(Err(e)) => {
                        out.push(Err(e.clone()));
                        continue;
                    }
                    None => {
                        out.push(Err(format!("workload '{}' was not resolved", recipe.workload)));
                        continue;
                    }
                };
                let settings = Arc::new(WorkloadSettings { workload: w, steps: cell.effective_steps(recipe), config: cell.effective_workload_config(recipe), timeout: opts.workload_timeout });
                out.push(Ok(spec_maker(cell, move || Body::Workload(settings.clone()))));
            }
        }
    }
    Ok(out)
}

/// Runs a build. `planned` must come from `aorta_graph::trial_inputs(recipe, ctx)`.
pub fn build(recipe: &Recipe, planned: &[PlannedTrial], argv: Option<&[String]>, opts: &BuildOptions, on_event: &mut dyn FnMut(Event)) -> Result<BuildOutcome, String> {
    let store = Arc::new(LocalStore::open(&opts.store_root).map_err(|e| format!("cannot open the store at {}: {e}", opts.store_root.display()))?);
    // Shared lock for the whole build: gc waits until no build holds it.
    let _build_lock = store.build_lock().map_err(|e| format!("cannot lock the store: {e}"))?;
    if let Some(remote) = &opts.remote {
        remote::pull(&store, remote, planned);
    }
    let paths = outputs::RunPaths::create(recipe, &opts.output).map_err(|e| format!("cannot create the run directory: {e}"))?;
    let bodies = bodies(recipe, argv, opts)?;
    let slots = Slots::new(opts.jobs.max(1), opts.gpus.clone());
    let schedule = engine::Schedule {
        recipe,
        planned,
        bodies,
        store: store.clone(),
        staging: paths.staging.clone(),
        slots,
        gpus_per_trial: opts.gpus_per_trial,
        cancel: opts.cancel.clone(),
    };
    let t_run = std::time::Instant::now();
    let executed = schedule.run(on_event);
    timing("schedule (lookups + execution)", t_run);
    // Write-back (readwrite mode) of what ran here; after Ctrl-C, exit first.
    if let Some(remote) = opts.remote.as_ref().filter(|_| !executed.cancelled) {
        remote::push(&store, remote, executed.results.iter().filter(|r| r.source == Source::Executed).map(|r| r.key.as_str()));
    }
    if executed.cancelled {
        let _ = std::fs::remove_dir_all(&paths.staging);
        return Ok(BuildOutcome {
            run_dir: paths.run_dir,
            executed: executed.results.iter().filter(|r| r.source == Source::Executed).count(),
            reused: executed.results.iter().filter(|r| r.source == Source::Reused).count(),
            failed_to_run: executed.failures,
            cancelled: true,
            summary: String::new(),
            incomplete: None,
        });
    }
    let t_mat = std::time::Instant::now();
    let placed = outputs::materialize(&store, recipe, &paths, &executed.results);
    timing("materialise", t_mat);
    let _ = std::fs::remove_dir_all(&paths.staging);
    placed?;
    let t_rep = std::time::Instant::now();
    let report = outputs::write_report(recipe, &paths, &executed, argv, opts.env_record.as_ref())?;
    timing("report", t_rep);
    // Durable directory entries for the store and the run directory, once for the whole build.
    let t_sync = std::time::Instant::now();
    store.sync().map_err(|e| e.to_string())?;
    aorta_store::sync_filesystem(&paths.run_dir).map_err(|e| format!("cannot sync {}: {e}", paths.run_dir.display()))?;
    timing("sync", t_sync);
    Ok(BuildOutcome {
        run_dir: paths.run_dir,
        executed: executed.results.iter().filter(|r| r.source == Source::Executed).count(),
        reused: executed.results.iter().filter(|r| r.source == Source::Reused).count(),
        failed_to_run: executed.failures,
        cancelled: false,
        summary: report.0,
        incomplete: report.1,
    })
}
