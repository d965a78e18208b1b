//! Builders for trial records and small recipes, so each test states only what it varies.
#![allow(dead_code)]

use aorta_recipe::{parse_recipe, Recipe};
use aorta_registry::Registry;
use aorta_report::{CellStats, Matrix, RunInfo};
use aorta_source::{SourceFile, Syntax};
use aorta_trial::{ExitStatus, TrialRecord, Verdict, WorkloadResult, TRIAL_RECORD_SCHEMA};

#[allow(unused_imports)]
pub use aorta_trial::Verdict::{Error as E, Fail as F, Pass as P};

pub fn recipe(yaml: &str) -> Recipe {
    parse_recipe(
        &SourceFile::new("test.yaml", yaml),
        Syntax::Yaml,
        &Registry::builtin(),
    )
    .unwrap_or_else(|d| panic!("{d:?}"))
}

/// Two triage cells: `baseline-local` ([none]) and `tf32-local` ([tf32_off] + extra_env).
pub fn triage() -> Recipe {
    recipe(
        "schema_version: 1\nworkload: training\ntrials: 2\nsteps: 4\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: tf32-local, mitigations: [tf32_off], environment: local, extra_env: {NCCL_DEBUG: INFO}}\n",
    )
}

/// `[none, tf32_off] × [none]`, two trials, explicit baseline none-none.
pub fn probe() -> Recipe {
    recipe("schema_version: 1\nmode: probe\ntrials: 2\nmitigation_axis: [none, tf32_off]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n")
}

/// A trial with the verdict's usual exit status and nothing else reported.
pub fn rec(idx: u32, verdict: Verdict) -> TrialRecord {
    let exit_status = match verdict {
        Verdict::Pass => ExitStatus::Ok,
        Verdict::Fail => ExitStatus::WorkloadFailed,
        Verdict::Error => ExitStatus::InfrastructureFailed,
    };
    TrialRecord {
        schema_version: TRIAL_RECORD_SCHEMA.into(),
        key: format!("key{idx}"),
        cell_name: "c".into(),
        trial_index: idx,
        workload: "training".into(),
        argv: None,
        env_passthrough_mode: None,
        failure_type: None,
        error_message: None,
        verdict,
        exit_status,
        exit_code: if verdict == Verdict::Pass { 0 } else { 1 },
        timed_out: false,
        walltime_sec: 2.0,
        peak_vram_mib: None,
        failure_detectors_fired: Vec::new(),
        error_detectors_fired: Vec::new(),
        warn_detectors_fired: Vec::new(),
        capture: Default::default(),
        tier_durations_ms: Default::default(),
        env: Default::default(),
        result: WorkloadResult {
            passed: verdict == Verdict::Pass,
            ..Default::default()
        },
        outputs: Vec::new(),
        inputs: None,
        sanitizer: None,
        profiles: Vec::new(),
    }
}

/// A trial reporting per-step times.
pub fn steps(idx: u32, verdict: Verdict, ms: &[f64]) -> TrialRecord {
    let mut r = rec(idx, verdict);
    r.result.step_times_ms = ms.to_vec();
    r
}

/// Trials with the given verdicts and per-step times, indices 0..n.
pub fn trials(verdicts: &[Verdict], ms: &[f64]) -> Vec<TrialRecord> {
    verdicts
        .iter()
        .enumerate()
        .map(|(i, v)| steps(i as u32, *v, ms))
        .collect()
}

pub fn agg(recipe: &Recipe, cell: &str, trials: &[TrialRecord]) -> CellStats {
    let c = recipe
        .cells
        .iter()
        .find(|c| c.name == cell)
        .unwrap_or_else(|| panic!("no cell {cell}"));
    CellStats::aggregate(c, recipe, trials, None)
}

pub fn run(ts: &str) -> RunInfo {
    RunInfo {
        run_timestamp: ts.into(),
        warnings: Vec::new(),
        doctor: None,
    }
}

pub fn matrix(recipe: &Recipe, cells: Vec<CellStats>) -> Matrix<'_> {
    Matrix::new(recipe, cells, run("2026-01-02T03-04-05"))
}

/// matrix.json exactly as `write_json` streams it.
pub fn json_text(m: &Matrix) -> String {
    let mut out = Vec::new();
    m.write_json(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// matrix.json as `write_json` writes it, parsed back for indexing in assertions.
pub fn json(m: &Matrix) -> serde_json::Value {
    serde_json::from_str(&json_text(m)).unwrap()
}
