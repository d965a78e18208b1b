//! `aorta run --workload NAME --trials N --steps S`: one workload, one cell, no matrix to read.
//! The flags become a request the engine builds into a recipe, so every rule of a file applies.

use crate::args::RunArgs;
use crate::exit::{usage, CliResult};
use aorta_engine::{RecipeOrigin, TargetSpec};
use aorta_recipe::{RecipeRequest, RunRequest};
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(a: &RunArgs) -> CliResult {
    let mut exec = a.exec.clone();
    if exec.output.is_none() {
        exec.output = Some(
            a.results_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("results")),
        );
    }
    let session = exec.session()?;
    let id = session.add_target(TargetSpec {
        label: None,
        origin: RecipeOrigin::Request {
            request: RecipeRequest::Run(RunRequest {
                workload: a.workload.clone(),
                trials: a.trials,
                steps: a.steps,
                environment: a.environment.clone(),
                mitigations: a.mitigations.clone(),
                extra_env: a.extra_env.clone(),
                config: a.config.clone(),
                collect: a.collect.clone(),
                trial_isolation: a.trial_isolation.clone(),
            }),
            sidecars: a.mitigations_files.clone(),
            template: None,
        },
        argv: None,
    });
    let c = session.compile(id)?;
    if let Some(Err(e)) = &c.workload {
        return Err(crate::exit::CliError {
            code: crate::exit::INFRASTRUCTURE,
            ..usage(
                format!("the workload could not run: {e}"),
                aorta_engine::workloads::how_to_get(&a.workload),
            )
        });
    }
    let doctor = crate::cmd_doctor::preflight(&session, &exec, [&*c.recipe])?;
    let out = crate::execute::build(&session, &c, a.verbosity)?;
    crate::cmd_doctor::marked(doctor, &out.run_dir);
    if out.cancelled {
        return Ok(crate::execute::report(
            &out,
            c.recipe.mode,
            exec.strict,
            a.verbosity,
            false,
        ));
    }
    let (passed, errored, total) = out
        .cells
        .first()
        .map_or((0, 0, 0), |cell| (cell.passed, cell.errored, cell.trials));
    let cached = format!(
        "({} executed, {} reused from the cache)",
        out.executed, out.reused
    );
    if passed == total && total > 0 {
        println!(
            "All {total} trial(s) passed. Results in: {}",
            out.run_dir.display()
        );
    } else {
        println!(
            "{}/{total} trials failed. Results in: {}",
            total - passed,
            out.run_dir.display()
        );
    }
    println!("{cached}");
    // The exit-code table: failing trials are results (0); a trial that could not run, or
    // none at all, leaves the run incomplete (1).
    if errored > 0 || total == 0 {
        Ok(ExitCode::from(crate::exit::INCOMPLETE))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}
