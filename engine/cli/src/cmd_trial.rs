//! `aorta trial exec`: execute (or reuse from the store / remote cache) exactly one trial of a
//! recipe, selected by cell and index, and write its outputs to a directory. This is the action
//! each Buck2 trial target runs (rules/aorta.bzl), so Buck2's action cache and remote execution
//! see one action per trial, with the recipe, registries and environment snapshot as inputs.

use crate::args::TrialCommand;
use crate::exit::{usage, CliResult};
use aorta_engine::{RecipeOrigin, Source, TargetSpec};
use aorta_recipe::Mode;
use std::process::ExitCode;

pub fn trial(c: &TrialCommand) -> CliResult {
    let TrialCommand::Exec(a) = c;
    if a.exec.output.is_some() {
        return Err(usage(
            "aorta trial exec writes to --out DIR; --output is for whole builds",
            "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR",
        ));
    }
    let session = a.exec.session()?;
    let origin = RecipeOrigin::File {
        path: a.recipe.clone(),
        sidecars: a.mitigations_files.clone(),
    };
    let id = session.add_target(TargetSpec {
        label: None,
        origin,
        argv: (!a.command.is_empty()).then(|| a.command.clone()),
    });
    let compiled = session.compile(id)?;
    if compiled.recipe.mode == Mode::Probe && a.command.is_empty() {
        return Err(usage(
            format!(
                "{}: a probe recipe needs the command after --",
                a.recipe.display()
            ),
            "aorta trial exec --recipe r.yaml --cell C --trial 0 --out DIR -- bash launch.sh",
        ));
    }
    let out = session.build_one(&compiled, &a.cell, a.trial, &a.out, a.expect_key.as_deref())?;
    if let Some(line) = session.remote_report() {
        eprintln!("{line}");
    }
    let how = match out.source {
        Source::Executed => "executed",
        Source::Reused => "reused from the cache",
    };
    println!(
        "{} trial {} {}: {} ({how}) -> {}",
        a.cell,
        a.trial,
        out.key,
        out.verdict,
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
