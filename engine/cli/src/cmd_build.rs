//! `aorta build LABEL…`: resolve labels through BUCK files, compile each recipe on the session
//! and build it (or, with `--dry-run`, print its plan).

use crate::args::BuildArgs;
use crate::exit::{usage, CliResult};
use aorta_plan::Plan;
use aorta_recipe::Mode;
use std::process::ExitCode;

pub fn build(a: &BuildArgs) -> CliResult {
    let session = a.exec.session()?;
    let ids = crate::targets::add(&session, &a.targets, &a.mitigations_files, &a.command)?;
    let mut compiled = Vec::new();
    for id in ids {
        let c = session.compile(id)?;
        if c.recipe.mode == Mode::Triage && !a.command.is_empty() {
            return Err(usage(
                format!(
                    "{}: a command was given after --, but {} is a triage (workload) recipe",
                    c.label,
                    c.recipe
                        .source
                        .as_ref()
                        .map(|s| s.path.display().to_string())
                        .unwrap_or_default()
                ),
                "only probe recipes (mode: probe) wrap a command",
            ));
        }
        compiled.push(c);
    }
    if a.dry_run {
        let plans: Vec<Plan> = compiled.iter().map(|c| session.plan(c)).collect();
        return crate::output::print_plans(&plans, a.json);
    }
    let mut code = ExitCode::SUCCESS;
    for c in &compiled {
        let out = crate::execute::build(&session, c, a.verbosity)?;
        let rc = crate::execute::report(&out, c.recipe.mode, a.exec.strict, a.verbosity, a.json);
        if rc != ExitCode::SUCCESS {
            code = rc;
            if out.cancelled {
                break;
            }
        }
    }
    Ok(code)
}
