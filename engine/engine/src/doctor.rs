//! `aorta doctor` and the `--doctor LEVEL` preflight of a build (docs/doctor.md): which level a
//! build asks for, running the checks (crate `aorta-doctor`) with this machine's sources, the
//! refusal of a failing node, and RUN_DIR/doctor.json, the record whose verdict a run's
//! env.json, matrix.md and report.html show. The verdict is an input of those artifacts' keys,
//! never of a trial key: a node's health is a precondition, not what a trial measured.

use crate::error::EngineError;
use aorta_doctor::{EnvFacts, Options, Sources};
use std::path::{Path, PathBuf};

pub use aorta_doctor::{Level, NodeVerdict, Recorded, Report};

/// The record's name in a run directory.
pub const RECORD: &str = "doctor.json";

/// What the CLI says after a refusal.
pub const REFUSED_HELP: &str =
    "fix the node (the remedies above), or pass --doctor-mark to build anyway with the run marked";

/// Why a build may not start.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The node failed and `--doctor-mark` was not given: no trial runs.
    #[error("this node failed aorta doctor --level {}; no trial ran, so no mitigation is credited or blamed for it:\n  {}", .report.level.word(), .report.failures().join("\n  "))]
    Refused { report: Box<Report> },
    /// The checks could not run where the trials run (the Slurm job that runs them failed).
    #[error("{0}")]
    NotChecked(Box<EngineError>),
}

impl PreflightError {
    /// The report that refused the node; none when the checks could not run.
    pub fn report(&self) -> Option<&Report> {
        match self {
            PreflightError::Refused { report } => Some(report),
            PreflightError::NotChecked(_) => None,
        }
    }
}

/// A refusal is the machine's fault, not the input's: exit 3.
impl From<PreflightError> for EngineError {
    fn from(e: PreflightError) -> Self {
        match e {
            PreflightError::NotChecked(e) => *e,
            refused => EngineError::infra_with_help(refused.to_string(), REFUSED_HELP),
        }
    }
}

/// Why RUN_DIR/doctor.json could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not an aorta doctor report: {source}", path.display())]
    NotAReport {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

fn level_of(l: aorta_recipe::DoctorLevel) -> Level {
    match l {
        aorta_recipe::DoctorLevel::Quick => Level::Quick,
        aorta_recipe::DoctorLevel::Medium => Level::Medium,
        aorta_recipe::DoctorLevel::Long => Level::Long,
    }
}

/// The level a build's preflight runs at: the flag's, else the deepest `doctor:` of its
/// recipes; `None`: no preflight.
pub fn wanted<'a>(
    flag: Option<Level>,
    recipes: impl IntoIterator<Item = &'a aorta_recipe::Recipe>,
) -> Option<Level> {
    flag.or_else(|| {
        recipes
            .into_iter()
            .filter_map(|r| r.doctor)
            .max()
            .map(level_of)
    })
}

/// What the `driver.cuda` check compares the driver with: the recorded snapshot when one is
/// given (`--env-snapshot`, `$AORTA_ENV_SNAPSHOT`), else the toolkit's version.json.
fn env_facts(snapshot: Option<&Path>) -> EnvFacts {
    let snapshot = snapshot.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("AORTA_ENV_SNAPSHOT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    // The snapshot's JSON is read as the doctor reads it (a few fields, any schema version).
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

/// Runs the checks of `level` on `gpus` (all when empty) with this machine's sources (or the
/// `AORTA_DOCTOR_*` recordings); the active trials run under `work_dir` (a temporary
/// directory, removed afterwards, when None).
pub fn run_checks(
    level: Level,
    gpus: &[usize],
    snapshot: Option<&Path>,
    work_dir: Option<&Path>,
) -> Report {
    let tmp = tempdir_for_active(level, work_dir);
    let opts = Options {
        level,
        gpus: (!gpus.is_empty()).then(|| gpus.to_vec()),
        sources: Sources::from_env(),
        env: env_facts(snapshot),
        workload: crate::workloads::find(aorta_doctor::active::WORKLOAD),
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

/// The preflight at `level`: a node that fails is refused unless `mark`, which lets the build
/// go on with the record marked.
pub(crate) fn preflight(
    level: Level,
    mark: bool,
    snapshot: Option<&Path>,
) -> Result<Recorded, PreflightError> {
    judge(run_checks(level, &[], snapshot, None), mark)
}

/// A preflight's `report`, wherever it ran: refused when it failed, unless `mark`.
pub(crate) fn judge(report: Report, mark: bool) -> Result<Recorded, PreflightError> {
    if report.failed() && !mark {
        return Err(PreflightError::Refused {
            report: Box::new(report),
        });
    }
    Ok(Recorded {
        marked: report.failed(),
        report,
    })
}

/// RUN_DIR/doctor.json, if a build with a preflight left one.
pub fn read_record(run_dir: &Path) -> Result<Option<Recorded>, RecordError> {
    match read_recorded(&run_dir.join(RECORD)) {
        Err(RecordError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        r => r.map(Some),
    }
}

/// A doctor report at `path`: a run's doctor.json or `aorta doctor --json`'s output.
pub fn read_recorded(path: &Path) -> Result<Recorded, RecordError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecordError::Read {
        path: path.to_owned(),
        source,
    })?;
    Recorded::from_json(&text).map_err(|source| RecordError::NotAReport {
        path: path.to_owned(),
        source,
    })
}

/// The verdict a run's artifacts show. With this invocation's `preflight`, it is written as
/// RUN_DIR/doctor.json (atomically) and shown; without one, the doctor.json an earlier build
/// left is the record of the preflight its trials ran under, so a rebuild that runs none shows
/// it still; none: the node was not checked.
pub(crate) fn verdict_for_run(preflight: Option<&Recorded>, run_dir: &Path) -> Option<NodeVerdict> {
    let Some(p) = preflight else {
        return match read_record(run_dir) {
            Ok(r) => r.map(|r| r.verdict()),
            Err(e) => {
                eprintln!("aorta: warning: {e}; the run's pages say the node was not checked");
                None
            }
        };
    };
    let path = run_dir.join(RECORD);
    let written = serde_json::to_string_pretty(p)
        .map_err(std::io::Error::other)
        .and_then(|t| crate::dirs::write_atomic(&path, (t + "\n").as_bytes()));
    if let Err(e) = written {
        eprintln!("aorta: warning: cannot write {}: {e}", path.display());
    }
    Some(p.verdict())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aorta_doctor::{Check, GpuSummary};

    fn report(fail: bool) -> Report {
        let c = Check::new("pcie.link", Some("0 00000000:00:06.0"), "s").measured("Gen3 x8");
        let c = if fail { c.fail("reseat") } else { c.pass() };
        let gpus = vec![GpuSummary {
            label: "0 00000000:00:06.0".into(),
            name: None,
            vendor: "nvidia".into(),
        }];
        Report::new(Level::Quick, None, gpus, vec![c], 0.1)
    }

    /// A preflight writes the record; a later build without one shows the record's verdict;
    /// an unreadable record is "not checked", not an error.
    #[test]
    fn the_record_outlives_the_invocation_that_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(verdict_for_run(None, dir.path()), None);
        let rec = Recorded {
            report: report(true),
            marked: true,
        };
        let shown = verdict_for_run(Some(&rec), dir.path()).unwrap();
        assert!(shown.marked);
        assert_eq!(read_record(dir.path()).unwrap(), Some(rec));
        assert_eq!(verdict_for_run(None, dir.path()), Some(shown));
        std::fs::write(dir.path().join(RECORD), "{}").unwrap();
        assert!(matches!(
            read_record(dir.path()),
            Err(RecordError::NotAReport { .. })
        ));
        assert_eq!(verdict_for_run(None, dir.path()), None);
    }

    fn recipe(doctor: &str) -> aorta_recipe::Recipe {
        let yaml = format!("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n{doctor}");
        aorta_recipe::parse_recipe(
            &aorta_source::SourceFile::new("r.yaml", &yaml),
            aorta_source::Syntax::Yaml,
            &aorta_registry::Registry::builtin(),
        )
        .unwrap()
    }

    #[test]
    fn the_flag_wins_else_the_deepest_recipe_level() {
        let (none, quick, medium) = (
            recipe(""),
            recipe("doctor: quick\n"),
            recipe("doctor: medium\n"),
        );
        assert_eq!(wanted(None, [&quick, &medium, &none]), Some(Level::Medium));
        assert_eq!(wanted(Some(Level::Quick), [&medium]), Some(Level::Quick));
        assert_eq!(wanted(None, [&none]), None);
    }

    #[test]
    fn a_refusal_names_each_failing_check_and_is_the_machines_fault() {
        let e = PreflightError::Refused {
            report: Box::new(report(true)),
        };
        assert_eq!(
            e.to_string(),
            "this node failed aorta doctor --level quick; no trial ran, so no mitigation is credited or blamed for it:\n  pcie.link [GPU 0 00000000:00:06.0]: reseat"
        );
        let e = EngineError::from(e);
        assert_eq!(e.category(), crate::Category::Infrastructure);
        assert!(!report(false).failed());
    }
}
