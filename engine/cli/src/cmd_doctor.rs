//! `aorta doctor`: the node's health checks (crate `aorta-doctor`, docs/doctor.md), and the
//! `--doctor LEVEL` preflight of `aorta build` / `sweep run` / `run`: a node that fails is
//! refused before any trial (exit 3, with the remedies) unless `--doctor-mark`, and the report
//! is kept as doctor.json in the run directory. The verdict never enters a trial key.
//!
//! Exit codes of `aorta doctor` (the CLI's table, exit.rs): 0 nothing failed (warnings and
//! "not applicable" included, so a machine without a GPU exits 0), 1 a check failed, 2 bad
//! input (a flag, an unwritable `--out`).

use crate::args::{DoctorArgs, DoctorLevel, ExecArgs};
use crate::exit::{CliError, CliResult, INCOMPLETE, INFRASTRUCTURE};
use aorta_doctor::{EnvFacts, Level, Options, Report, Sources};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn level(l: DoctorLevel) -> Level {
    match l {
        DoctorLevel::Quick => Level::Quick,
        DoctorLevel::Medium => Level::Medium,
        DoctorLevel::Long => Level::Long,
    }
}

/// What the `driver.cuda` check compares the driver with: the recorded snapshot when one is
/// given (`--env-snapshot`, `$AORTA_ENV_SNAPSHOT`), else the toolkit's version.json.
fn env_facts(snapshot: Option<&Path>) -> EnvFacts {
    let snapshot = snapshot.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("AORTA_ENV_SNAPSHOT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    if let Some(v) = snapshot
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        return EnvFacts::from_snapshot(&v);
    }
    let root = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .find(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    EnvFacts {
        toolkit_cuda: aorta_doctor::toolkit_cuda(&root),
        torch_cuda: None,
    }
}

/// Runs the checks; the active trials run under `work_dir` (a temporary directory when None).
fn run_checks(
    l: Level,
    gpus: &[usize],
    snapshot: Option<&Path>,
    work_dir: Option<&Path>,
) -> Report {
    let tmp = tempdir_for_active(l, work_dir);
    let opts = Options {
        level: l,
        gpus: (!gpus.is_empty()).then(|| gpus.to_vec()),
        sources: Sources::from_env(),
        env: env_facts(snapshot),
        workload: aorta_engine::workloads::find(aorta_doctor::active::WORKLOAD),
        work_dir: tmp.as_ref().map(|t| t.0.clone()),
    };
    let report = aorta_doctor::run(&opts);
    if let Some((dir, true)) = tmp {
        let _ = std::fs::remove_dir_all(dir);
    }
    report
}

/// `(dir, remove afterwards)`: where the active trials write CONFIG/RESULT and their logs.
fn tempdir_for_active(l: Level, work_dir: Option<&Path>) -> Option<(PathBuf, bool)> {
    if l == Level::Quick {
        return None;
    }
    if let Some(d) = work_dir {
        return Some((d.to_path_buf(), false));
    }
    // Kept for inspection (bench/doctor/run-on-gpu.sh): CONFIG, RESULT and the logs per GPU.
    if let Some(d) = std::env::var_os("AORTA_DOCTOR_WORK_DIR").filter(|v| !v.is_empty()) {
        return Some((PathBuf::from(d), false));
    }
    let d = std::env::temp_dir().join(format!("aorta-doctor-{}", std::process::id()));
    Some((d, true))
}

fn write_json(report: &Report, path: &Path) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    aorta_engine::write_user_file(&abs, text.as_bytes()).map_err(|e| {
        CliError::from(aorta_engine::EngineError::output(
            format!("cannot write {}", abs.display()),
            &e,
        ))
    })
}

pub fn doctor(a: &DoctorArgs) -> CliResult {
    let report = run_checks(level(a.level), &a.gpus, None, None);
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

/// The preflight's report, and whether the run goes on despite a failure (`--doctor-mark`).
pub struct Preflight {
    pub report: Report,
    pub marked: bool,
}

/// The level a build's preflight runs at: `--doctor`, else the deepest `doctor:` of its
/// recipes.
pub fn wanted<'a>(
    exec: &ExecArgs,
    recipes: impl IntoIterator<Item = &'a aorta_recipe::Recipe>,
) -> Option<Level> {
    if let Some(l) = exec.doctor {
        return Some(level(l));
    }
    recipes
        .into_iter()
        .filter_map(|r| r.doctor)
        .max()
        .map(|l| match l {
            aorta_recipe::DoctorLevel::Quick => Level::Quick,
            aorta_recipe::DoctorLevel::Medium => Level::Medium,
            aorta_recipe::DoctorLevel::Long => Level::Long,
        })
}

/// `--doctor LEVEL` or a recipe's `doctor:` ([`wanted`]): runs the checks before any trial. A
/// failing node is refused (exit 3, infrastructure: the machine, not the input) unless
/// `--doctor-mark`.
pub fn preflight(exec: &ExecArgs, wanted: Option<Level>) -> Result<Option<Preflight>, CliError> {
    let Some(l) = wanted else {
        return Ok(None);
    };
    let report = run_checks(l, &[], exec.env_snapshot.as_deref(), None);
    eprintln!("aorta: {}", report.summary_line());
    if !report.failed() {
        return Ok(Some(Preflight {
            report,
            marked: false,
        }));
    }
    let lines = report.failures().join("\n  ");
    if exec.doctor_mark {
        eprintln!("aorta: warning: this node failed aorta doctor; building anyway (--doctor-mark), the run is marked:\n  {lines}");
        return Ok(Some(Preflight {
            report,
            marked: true,
        }));
    }
    Err(CliError {
        report: miette::miette!(
            help = "fix the node (the remedies above), or pass --doctor-mark to build anyway with the run marked",
            "this node failed aorta doctor --level {}; no trial ran, so no mitigation is credited or blamed for it:\n  {lines}",
            report.level.word()
        ),
        code: INFRASTRUCTURE,
    })
}

/// Keeps the preflight's report as `RUN_DIR/doctor.json` (not an artifact: the trial keys and
/// the rendered matrix do not depend on it).
pub fn record(p: Option<&Preflight>, run_dir: &Path) {
    let Some(p) = p else {
        return;
    };
    let mut v = serde_json::to_value(&p.report).unwrap_or_default();
    v["marked"] = serde_json::Value::Bool(p.marked);
    let path = run_dir.join("doctor.json");
    let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    match aorta_engine::write_atomic(&path, text.as_bytes()) {
        Ok(()) if p.marked => eprintln!(
            "aorta: warning: built on a node that failed aorta doctor: {} says which checks; do not credit or blame a mitigation for these results",
            path.display()
        ),
        Ok(()) => {}
        Err(e) => eprintln!("aorta: warning: cannot write {}: {e}", path.display()),
    }
}
