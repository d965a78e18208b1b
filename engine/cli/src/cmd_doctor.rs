//! `aorta doctor`: the node's health checks (docs/doctor.md), and what the `--doctor LEVEL`
//! preflight of `aorta build` / `sweep run` / `run` prints. The checks, the refusal of a
//! failing node and the run directory's doctor.json are the engine's (`aorta_engine::doctor`,
//! `Session::preflight`); this module maps the flags and prints.
//!
//! Exit codes of `aorta doctor` (the CLI's table, exit.rs): 0 nothing failed (warnings and
//! "not applicable" included, so a machine without a GPU exits 0), 1 a check failed, 2 bad
//! input (a flag, an unwritable `--out`).

use crate::args::{DoctorArgs, DoctorLevel, ExecArgs};
use crate::exit::{CliError, CliResult, INCOMPLETE};
use aorta_engine::doctor::{Level, Recorded, Report};
use aorta_engine::{EngineError, Session};
use std::path::Path;
use std::process::ExitCode;

fn level(l: DoctorLevel) -> Level {
    match l {
        DoctorLevel::Quick => Level::Quick,
        DoctorLevel::Medium => Level::Medium,
        DoctorLevel::Long => Level::Long,
    }
}

fn write_json(report: &Report, path: &Path) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    aorta_engine::write_user_file(&abs, text.as_bytes()).map_err(|e| {
        CliError::from(EngineError::output(
            format!("cannot write {}", abs.display()),
            &e,
        ))
    })
}

pub fn doctor(a: &DoctorArgs) -> CliResult {
    let report = aorta_engine::doctor::run_checks(level(a.level), &a.gpus, None, None);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", report.render_text());
    }
    if let Some(out) = &a.out {
        write_json(&report, out)?;
    }
    Ok(if report.failed() {
        ExitCode::from(INCOMPLETE)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--doctor LEVEL` or a recipe's `doctor:`: the session runs the checks before any trial and
/// refuses a failing node (exit 3, infrastructure: the machine, not the input) unless
/// `--doctor-mark`. Prints the summary line, and the failing checks of a marked run.
pub fn preflight<'s, 'r>(
    session: &'s Session,
    exec: &ExecArgs,
    recipes: impl IntoIterator<Item = &'r aorta_recipe::Recipe>,
) -> Result<Option<&'s Recorded>, CliError> {
    let recipes: Vec<&aorta_recipe::Recipe> = recipes.into_iter().collect();
    let wanted = aorta_engine::doctor::wanted(exec.doctor.map(level), recipes.iter().copied());
    if exec.doctor_mark && wanted.is_none() {
        return Err(crate::exit::usage(
            "--doctor-mark marks a run built on a node that failed aorta doctor, but nothing asks for the checks",
            "add --doctor quick (or medium, long), or `doctor: quick` to the recipe",
        ));
    }
    // Under --executor slurm the checks run on a node of the first recipe's partition.
    match session.preflight(wanted, exec.doctor_mark, recipes.first().copied()) {
        Ok(None) => Ok(None),
        Ok(Some(p)) => {
            match (session.runs_on_cluster(), &p.report.host) {
                (true, Some(host)) => {
                    eprintln!("aorta: {} on node {host}", p.report.summary_line())
                }
                _ => eprintln!("aorta: {}", p.report.summary_line()),
            }
            if p.marked {
                let lines = p.report.failures().join("\n  ");
                eprintln!("aorta: warning: this node failed aorta doctor; building anyway (--doctor-mark), the run is marked:\n  {lines}");
            }
            Ok(Some(p))
        }
        Err(e) => {
            if let Some(report) = e.report() {
                eprintln!("aorta: {}", report.summary_line());
            }
            Err(EngineError::from(e).into())
        }
    }
}

/// After a marked run's build: where its record is (the build wrote it; its pages show it).
pub fn marked(p: Option<&Recorded>, run_dir: &Path) {
    if p.is_some_and(|p| p.marked) {
        eprintln!(
            "aorta: warning: built on a node that failed aorta doctor: {} says which checks; do not credit or blame a mitigation for these results",
            run_dir.join(aorta_engine::doctor::RECORD).display()
        );
    }
}
