//! `aorta build LABEL…`: resolve labels through BUCK files, compile each recipe on the session
//! and build it (or, with `--dry-run`, print its plan). With `--keep-going`, a target that
//! cannot be compiled or built is reported and skipped, and the others still build.

use crate::args::BuildArgs;
use crate::exit::{usage, CliError, CliResult};
use aorta_engine::{Compiled, Session, TargetId};
use aorta_plan::Plan;
use aorta_recipe::Mode;
use std::process::ExitCode;

pub fn build(a: &BuildArgs) -> CliResult {
    let session = a.exec.session()?;
    let ids = crate::targets::add(&session, &a.targets, &a.mitigations_files, &a.command)?;
    let mut skipped = Skipped::new(a.keep_going, ids.len());
    let mut compiled = Vec::new();
    for id in ids {
        match compile(&session, id, a) {
            Ok(c) => compiled.push(c),
            Err(e) => skipped.add(session.target_name(id), e)?,
        }
    }
    if a.dry_run {
        let plans: Vec<Plan> = compiled.iter().map(|c| session.plan(c)).collect();
        let code = crate::output::print_plans(&plans, a.json)?;
        return Ok(skipped.finish(code));
    }
    // The node is checked before anything is queued: a refusal leaves nothing submitted.
    let doctor =
        crate::cmd_doctor::preflight(&session, &a.exec, compiled.iter().map(|c| &*c.recipe))?;
    if compiled.len() > 1 {
        // Every target's first wave queued before the first is waited for; an error here is
        // said again, in its place, by that target's build.
        for c in &compiled {
            let _ = session.submit_ahead(c);
        }
    }
    let mut code = ExitCode::SUCCESS;
    for c in &compiled {
        let out = match crate::execute::build(&session, c, a.verbosity) {
            Ok(out) => out,
            Err(e) => {
                skipped.add(c.label.clone(), e)?;
                continue;
            }
        };
        crate::cmd_doctor::marked(doctor, &out.run_dir);
        let rc = crate::execute::report(&out, c.recipe.mode, a.exec.strict, a.verbosity, a.json);
        if rc != ExitCode::SUCCESS {
            code = rc;
            if out.cancelled {
                break;
            }
        }
    }
    Ok(skipped.finish(code))
}

fn compile(session: &Session, id: TargetId, a: &BuildArgs) -> Result<Compiled, CliError> {
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
    Ok(c)
}

/// The targets `--keep-going` went past, with the exit code each would have given.
struct Skipped {
    keep_going: bool,
    targets: usize,
    skipped: Vec<(String, u8)>,
}

impl Skipped {
    fn new(keep_going: bool, targets: usize) -> Skipped {
        Skipped {
            keep_going,
            targets,
            skipped: Vec::new(),
        }
    }

    /// Without `--keep-going` the error ends the invocation (with a hint when other targets
    /// were named); with it, the error is reported now and the target listed at the end.
    fn add(&mut self, target: String, e: CliError) -> Result<(), CliError> {
        if !self.keep_going {
            if self.targets > 1 {
                eprintln!("aorta: {target} cannot be built; stopping (--keep-going builds the other targets)");
            }
            return Err(e);
        }
        eprintln!("{:?}", e.report);
        eprintln!("aorta: skipping {target} (--keep-going)");
        self.skipped.push((target, e.code));
        Ok(())
    }

    /// The exit code: the first skipped target's, else the builds'.
    fn finish(self, code: ExitCode) -> ExitCode {
        let Some((_, first)) = self.skipped.first() else {
            return code;
        };
        let list: Vec<String> = self
            .skipped
            .iter()
            .map(|(t, c)| format!("{t} (exit {c})"))
            .collect();
        eprintln!(
            "aorta: {} of {} target(s) skipped: {}",
            self.skipped.len(),
            self.targets,
            list.join(", ")
        );
        ExitCode::from(*first)
    }
}
