//! Executing recipes: the shared path behind `aorta build`, `aorta sweep run` and `aorta run`.

use crate::args::ExecArgs;
use aorta_build::{BuildOptions, Event};
use aorta_recipe::{Mode, Recipe};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

pub struct Outcome {
    pub run_dir: PathBuf,
    pub executed: usize,
    pub reused: usize,
    pub summary: String,
    pub incomplete: Option<String>,
    pub cancelled: bool,
    pub failed_to_run: Vec<String>,
}

/// Runs one recipe to completion (or Ctrl-C) and returns what happened.
/// AORTA's default output directory for each flow.
fn default_output(recipe: &Recipe) -> &'static str {
    match recipe.mode {
        Mode::Probe => "probe_results",
        Mode::Triage => "triage_results",
    }
}

/// `--output` when given, else AORTA's default for the recipe's flow.
pub fn execute(recipe: &Recipe, argv: Option<&[String]>, exec: &ExecArgs, verbose: u8) -> miette::Result<Outcome> {
    let t0 = std::time::Instant::now();
    let (snapshot, env_key) = crate::context::environment(recipe, &crate::context::EnvSource::from_args(exec))?;
    let mut ctx = crate::context::key_context_with(argv, env_key.hash.clone())?;
    // libtorch for workloads that need it: the torch the probe's interpreter would import.
    let torch_dir = snapshot.pytorch.torch_dir.as_deref().map(std::path::Path::new);
    let workloads = aorta_build::resolve_workloads(recipe, &mut ctx, torch_dir);
    let planned = aorta_graph::trial_inputs(recipe, &ctx);
    aorta_build::timing("trial keys", t0);
    let env_record = crate::context::snapshot_record(&snapshot, env_key);
    execute_planned(recipe, &planned, workloads, env_record, argv, exec, verbose)
}

/// Resolved workload executables by name, as [`BuildOptions::workloads`] takes them.
pub type Workloads = Vec<(String, Result<aorta_build::workloads::Workload, String>)>;

/// [`execute`] with the trials already planned (watch mode plans them on its salsa database);
/// `env_record` is the snapshot the keys used ([`crate::context::snapshot_record`]).
pub fn execute_planned(recipe: &Recipe, planned: &[aorta_graph::PlannedTrial], workloads: Workloads, env_record: serde_json::Value, argv: Option<&[String]>, exec: &ExecArgs, verbose: u8) -> miette::Result<Outcome> {
    let cancel = aorta_exec::install_interrupt_handler().map_err(|e| miette::miette!("cannot install the Ctrl-C handler: {e}"))?;
    let opts = BuildOptions {
        store_root: crate::cmd_cache::store_root(exec.store.as_ref())?,
        output: exec.output.clone().unwrap_or_else(|| PathBuf::from(default_output(recipe))),
        jobs: exec.jobs.unwrap_or(if exec.gpus.is_empty() { 1 } else { exec.gpus.len() }),
        gpus: exec.gpus.clone(),
        gpus_per_trial: usize::from(!exec.gpus.is_empty()),
        kill_on_hang: exec.kill_on_hang,
        workload_timeout: exec.trial_timeout.map(std::time::Duration::from_secs_f64),
        cancel,
        workloads,
        env_record: Some(env_record),
        remote: crate::cmd_remote::open(&exec.remote)?,
    };
    let bar = progress_bar(planned.len() as u64, verbose);
    let (mut executed, mut reused, mut failed) = (0u64, 0u64, 0u64);
    let mut on_event = |e: Event| {
        match &e {
            Event::Executed(r) => {
                executed += 1;
                if r.record.verdict != aorta_classify::Verdict::Pass {
                    failed += 1;
                }
            }
            Event::Reused(r) => {
                reused += 1;
                if r.record.verdict != aorta_classify::Verdict::Pass {
                    failed += 1;
                }
            }
            Event::Failed { .. } => failed += 1,
        }
        if verbose > 0 {
            let line = match &e {
                Event::Executed(r) => format!("[ran]    {} trial {}: {} in {:.2}s", r.record.cell_name, r.index, r.record.verdict.as_str(), r.exec_seconds),
                Event::Reused(r) => format!("[cached] {} trial {}: {}", r.record.cell_name, r.index, r.record.verdict.as_str()),
                Event::Failed { cell, index, error } => format!("[error]  {cell} trial {index}: {error}"),
            };
            bar.suspend(|| eprintln!("{line}"));
        }
        bar.set_message(format!("executed {executed} · cached {reused} · not passing {failed}"));
        bar.inc(1);
    };
    let out = aorta_build::build(recipe, planned, argv, &opts, &mut on_event).map_err(|e| crate::cmd_sweep::usage(e, "see the message above"))?;
    bar.finish_and_clear();
    crate::cmd_remote::report(opts.remote.as_ref());
    Ok(Outcome {
        run_dir: out.run_dir,
        executed: out.executed,
        reused: out.reused,
        summary: out.summary,
        incomplete: out.incomplete,
        cancelled: out.cancelled,
        failed_to_run: out.failed_to_run,
    })
}

fn progress_bar(len: u64, verbose: u8) -> ProgressBar {
    if verbose > 0 || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(len);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} trials  {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar
}

/// Prints the end-of-run lines and picks the exit code (AORTA: 0 even with failing cells;
/// 1 when the matrix is incomplete; 130 after Ctrl-C).
pub fn report(o: &Outcome, mode: Mode) -> ExitCode {
    if o.cancelled {
        eprintln!("aorta: interrupted; {} trial(s) finished and are kept in the store; rerun to continue.", o.executed + o.reused);
        return ExitCode::from(130);
    }
    print!("{}", o.summary);
    if !o.summary.ends_with('\n') {
        println!();
    }
    for f in &o.failed_to_run {
        eprintln!("aorta: {f}");
    }
    match mode {
        Mode::Probe => println!("Wrote probe artifacts to {}", o.run_dir.display()),
        Mode::Triage => println!("Wrote matrix to {}", o.run_dir.display()),
    }
    if let Some(reason) = &o.incomplete {
        eprintln!("aorta: the matrix is incomplete: {reason}");
        return ExitCode::from(crate::EXIT_FAILURE);
    }
    if !o.failed_to_run.is_empty() {
        return ExitCode::from(crate::EXIT_FAILURE);
    }
    ExitCode::SUCCESS
}
