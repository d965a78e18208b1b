//! `aorta trial exec`: execute (or reuse from the store / remote cache) exactly one trial of a
//! recipe, selected by cell and index, and write its outputs to a directory. This is the action
//! each Buck2 trial target runs (rules/aorta.bzl), so Buck2's action cache and remote execution
//! see one action per trial, with the recipe, registries and environment snapshot as inputs.
//! With `--manifest`, it is a Slurm array task of `--executor slurm` (docs/slurm.md).

use crate::args::{TrialCommand, TrialExecArgs};
use crate::exit::{usage, CliResult};
use aorta_engine::TaskManifest;
use aorta_engine::{RecipeOrigin, Source, TargetSpec};
use aorta_recipe::Mode;
use std::path::PathBuf;
use std::process::ExitCode;

/// The trial to run: from the flags, or from a Slurm task's manifest.
struct Selected {
    /// The recipe file, or a Slurm task's origin (the submitter's).
    origin: RecipeOrigin,
    command: Vec<String>,
    cell: String,
    trial: u32,
    out: Option<PathBuf>,
    expect_key: Option<aorta_engine::Key>,
    /// A Slurm array task: its manifest and trial.
    task: Option<(TaskManifest, aorta_engine::TaskTrial)>,
}

pub fn trial(c: &TrialCommand) -> CliResult {
    let TrialCommand::Exec(a) = c;
    if a.exec.output.is_some() {
        return Err(usage(
            "aorta trial exec writes to --out DIR; --output is for whole builds",
            "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR",
        ));
    }
    a.exec.refuse_build_only("aorta trial exec")?;
    let mut exec = a.exec.clone();
    // One trial, here: an `AORTA_EXECUTOR=slurm` exported to a Slurm task is not for it.
    exec.slurm.executor = Some("local".into());
    exec.slurm.detach = false;
    let sel = match &a.manifest {
        Some(path) => {
            let m = TaskManifest::load(path)?;
            let t = m.task(None)?.clone();
            // The submitter's store; its snapshot too, unless the trial is keyed by this
            // node's own environment (a partition's snapshot planned it).
            exec.store = Some(m.store.clone());
            if !m.node_keyed {
                exec.env_snapshot = Some(m.env_snapshot.clone());
            }
            exec.trial_timeout = exec.trial_timeout.or(m.trial_timeout);
            exec.kill_on_hang |= m.kill_on_hang;
            Selected {
                origin: m.origin.clone(),
                command: m.argv.clone().unwrap_or_default(),
                cell: t.cell.clone(),
                trial: t.index,
                out: None,
                expect_key: None,
                task: Some((m, t)),
            }
        }
        None => from_flags(a)?,
    };
    let session = exec.session()?;
    let id = session.add_target(TargetSpec {
        label: None,
        origin: sel.origin.clone(),
        argv: (!sel.command.is_empty()).then(|| sel.command.clone()),
    });
    let compiled = session.compile(id)?;
    if compiled.recipe.mode == Mode::Probe && sel.command.is_empty() {
        return Err(usage(
            format!(
                "{}: a probe recipe needs the command after --",
                compiled.label
            ),
            "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR -- bash launch.sh",
        ));
    }
    let out = match &sel.task {
        Some((m, t)) => session.build_task(&compiled, m, t)?,
        None => session.build_one(
            &compiled,
            &sel.cell,
            sel.trial,
            sel.out.as_deref(),
            sel.expect_key.as_ref(),
        )?,
    };
    if let Some(line) = session.remote_report() {
        eprintln!("{line}");
    }
    let how = match out.source {
        Source::Executed => "executed",
        Source::Reused => "reused from the cache",
    };
    let to = sel
        .out
        .as_ref()
        .map_or_else(|| "the store".to_owned(), |o| o.display().to_string());
    println!(
        "{} trial {} {}: {} ({how}) -> {to}",
        sel.cell,
        sel.trial,
        out.key,
        out.verdict.as_str(),
    );
    Ok(ExitCode::SUCCESS)
}

fn from_flags(a: &TrialExecArgs) -> Result<Selected, crate::exit::CliError> {
    let missing = || {
        usage(
            "aorta trial exec needs --recipe, --cell, --trial and --out (or --manifest)",
            "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR",
        )
    };
    Ok(Selected {
        origin: RecipeOrigin::File {
            path: a.recipe.clone().ok_or_else(missing)?,
            sidecars: a.mitigations_files.clone(),
            overlays: Default::default(),
        },
        command: a.command.clone(),
        cell: a.cell.clone().ok_or_else(missing)?,
        trial: a.trial.ok_or_else(missing)?,
        out: Some(a.out.clone().ok_or_else(missing)?),
        expect_key: a.expect_key.clone(),
        task: None,
    })
}
