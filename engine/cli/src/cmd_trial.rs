//! `aorta trial exec`: execute (or reuse from the store / remote cache) exactly one trial of a
//! recipe, selected by cell and index, and write its outputs to a directory. This is the action
//! each Buck2 trial target runs (rules/aorta.bzl), so Buck2's action cache and remote execution
//! see one action per trial, with the recipe, registries and environment snapshot as inputs.

use crate::args::ExecArgs;
use crate::cmd_sweep::usage;
use aorta_recipe::{load_recipe, Mode};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum TrialCommand {
    /// Execute one trial (cell + index) and write its outputs (result.json, logs) to --out.
    Exec(TrialExecArgs),
}

#[derive(Debug, Args)]
pub struct TrialExecArgs {
    /// The recipe file.
    #[arg(long)]
    pub recipe: PathBuf,
    /// Sidecar registry files, in order.
    #[arg(long = "mitigations-file", value_name = "PATH")]
    pub mitigations_files: Vec<PathBuf>,
    /// The cell's name (as in matrix.md).
    #[arg(long)]
    pub cell: String,
    /// The trial index (0-based).
    #[arg(long)]
    pub trial: u32,
    /// Where the trial's outputs go (created; Buck2 passes its declared output).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Fail unless the trial's key is this one (Buck2 targets can pin it).
    #[arg(long, value_name = "KEY")]
    pub expect_key: Option<String>,
    /// Store, GPUs, timeouts, `--env-snapshot` (under Buck2: the snapshot the result is valid
    /// for, a declared input), `--remote-cache`: as for `aorta build`.
    #[command(flatten)]
    pub exec: ExecArgs,
    /// The command a probe recipe wraps.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn trial(c: &TrialCommand) -> miette::Result<ExitCode> {
    let TrialCommand::Exec(a) = c;
    if a.exec.output.is_some() {
        return Err(usage("aorta trial exec writes to --out DIR; --output is for whole builds", "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR"));
    }
    let recipe = load_recipe(&a.recipe, &a.mitigations_files).map_err(|d| miette::Report::new(*d))?.recipe;
    let argv: Option<Vec<String>> = (recipe.mode == Mode::Probe).then(|| a.command.clone());
    if recipe.mode == Mode::Probe && a.command.is_empty() {
        return Err(usage(format!("{}: a probe recipe needs the command after --", a.recipe.display()), "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR -- bash launch.sh"));
    }
    let Some(cell) = recipe.cells.iter().position(|c| c.name == a.cell) else {
        let names: Vec<&str> = recipe.cells.iter().map(|c| c.name.as_str()).collect();
        return Err(usage(format!("{}: no cell named {:?}", a.recipe.display(), a.cell), format!("cells: {}", names.join(", "))));
    };
    // The same keys `aorta build` computes: the environment snapshot (probed, or the recorded
    // `--env-snapshot`) under the recipe's env_key rules, plus the command's input hashes.
    let (snapshot, env_key) = crate::context::environment(&recipe, &crate::context::EnvSource::from_args(&a.exec))?;
    let mut ctx = crate::context::key_context_with(argv.as_deref(), env_key.hash.clone())?;
    let torch_dir = snapshot.pytorch.torch_dir.as_deref().map(std::path::Path::new);
    let workloads = aorta_build::resolve_workloads(&recipe, &mut ctx, torch_dir);
    let planned = aorta_graph::trial_inputs(&recipe, &ctx);
    let Some(p) = planned.iter().find(|p| p.cell == cell && p.index == a.trial) else {
        let n = planned.iter().filter(|p| p.cell == cell).count();
        return Err(usage(format!("cell {:?} has {n} trial(s); there is no trial {}", a.cell, a.trial), format!("use --trial 0..{}", n.saturating_sub(1))));
    };
    if let Some(want) = &a.expect_key {
        if want != &p.key.0 {
            return Err(usage(format!("trial {} of cell {:?} has key {}, not {want}", a.trial, a.cell, p.key.0), "the recipe, registries, command inputs or environment changed; regenerate the pinned key"));
        }
    }
    let cancel = aorta_exec::install_interrupt_handler().map_err(|e| miette::miette!("cannot install the Ctrl-C handler: {e}"))?;
    let opts = aorta_build::BuildOptions {
        store_root: crate::cmd_cache::store_root(a.exec.store.as_ref())?,
        output: a.out.clone(),
        jobs: 1,
        gpus: a.exec.gpus.clone(),
        // One trial: it gets every device given (Buck2: the worker's first `gpus`).
        gpus_per_trial: a.exec.gpus.len(),
        kill_on_hang: a.exec.kill_on_hang,
        workload_timeout: a.exec.trial_timeout.map(std::time::Duration::from_secs_f64),
        cancel,
        workloads,
        env_record: Some(crate::context::snapshot_record(&snapshot, env_key)),
        remote: crate::cmd_remote::open(&a.exec.remote)?,
    };
    let out = aorta_build::one::build_one(&recipe, p, argv.as_deref(), &opts, &a.out).map_err(|e| miette::miette!("{e}"))?;
    crate::cmd_remote::report(opts.remote.as_ref());
    let how = match out.source {
        aorta_build::Source::Executed => "executed",
        aorta_build::Source::Reused => "reused from the cache",
    };
    println!("{} trial {} {}: {} ({how}) -> {}", a.cell, a.trial, out.key, out.verdict, a.out.display());
    Ok(ExitCode::SUCCESS)
}
