//! `aorta trial exec`: execute (or reuse from the store / remote cache) exactly one trial of a
//! recipe, selected by cell and index, and write its outputs to a directory. This is the action
//! each Buck2 trial target runs (rules/aorta.bzl), so Buck2's action cache and remote execution
//! see one action per trial, with the recipe, registries and environment snapshot as inputs.

use crate::args::ExecArgs;
use crate::exit::{usage, CliResult};
use aorta_engine::{RecipeOrigin, Source, TargetSpec};
use aorta_recipe::Mode;
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

pub fn trial(c: &TrialCommand) -> CliResult {
    let TrialCommand::Exec(a) = c;
    if a.exec.output.is_some() {
        return Err(usage("aorta trial exec writes to --out DIR; --output is for whole builds", "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR"));
    }
    let session = a.exec.session()?;
    let origin = RecipeOrigin::File { path: a.recipe.clone(), sidecars: a.mitigations_files.clone() };
    let id = session.add_target(TargetSpec { label: None, origin, argv: (!a.command.is_empty()).then(|| a.command.clone()) });
    let compiled = session.compile(id)?;
    if compiled.recipe.mode == Mode::Probe && a.command.is_empty() {
        return Err(usage(format!("{}: a probe recipe needs the command after --", a.recipe.display()), "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR -- bash launch.sh"));
    }
    let out = session.build_one(&compiled, &a.cell, a.trial, &a.out, a.expect_key.as_deref())?;
    if let Some(line) = session.remote_report() {
        eprintln!("{line}");
    }
    let how = match out.source {
        Source::Executed => "executed",
        Source::Reused => "reused from the cache",
    };
    println!("{} trial {} {}: {} ({how}) -> {}", a.cell, a.trial, out.key, out.verdict, a.out.display());
    Ok(ExitCode::SUCCESS)
}
