//! The trial record: one JSON document per executed trial (`result.json`), shared by the
//! executor (writes it), the store (caches it by trial key) and the report (aggregates it).
//!
//! It is the union of AORTA's dispatcher `TrialResult` (§3.4.1) and the probe `result.json`
//! (§3.4.2), so one aggregation path serves both flows.

mod small_map;

use serde::{Deserialize, Serialize};
pub use small_map::SmallMap;

/// Bumped when the record's meaning changes; part of every trial key.
pub const TRIAL_RECORD_SCHEMA: &str = "aorta.trial/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Error,
}

impl Verdict {
    pub fn parse(s: &str) -> Option<Verdict> {
        match s {
            "pass" => Some(Verdict::Pass),
            "fail" => Some(Verdict::Fail),
            "error" => Some(Verdict::Error),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
        }
    }
}

/// How a probe trial hands the cell's env to its command (`env_passthrough_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PassthroughMode {
    /// The child inherits the cell's environment directly.
    Inherit,
    /// Additionally write `probe.env` and export `AORTA_ENV_FILE` for wrappers (docker, sudo).
    File,
}

impl PassthroughMode {
    pub fn parse(s: &str) -> Option<PassthroughMode> {
        match s {
            "inherit" => Some(PassthroughMode::Inherit),
            "file" => Some(PassthroughMode::File),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PassthroughMode::Inherit => "inherit",
            PassthroughMode::File => "file",
        }
    }
}

/// How the trial's body ended, in AORTA's vocabulary (`exit_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// The body ran to completion (it may still have failed its checks: see `verdict`).
    Ok,
    /// The workload ran and reported `passed: false`.
    WorkloadFailed,
    /// The workload could not set up (missing model, bad config): main work never started.
    WorkloadSetupFailed,
    /// aorta could not run the body at all (exec failure, crash of the workload protocol).
    InfrastructureFailed,
}

/// What the workload (or the subprocess wrapper) reported: AORTA's `WorkloadResult`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkloadResult {
    pub passed: bool,
    pub failure_count: u64,
    pub first_failure_iteration: Option<u64>,
    /// Free-form dicts; an optional `hint` string per entry is surfaced in the matrix.
    pub failure_details: Vec<serde_json::Value>,
    pub total_iterations: u64,
    pub step_times_ms: Vec<f64>,
    pub elapsed_sec: f64,
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub main_work_started: Option<bool>,
    pub executed_iterations: Option<u64>,
    pub configured_iterations: Option<u64>,
}

/// One executed trial. Field names follow AORTA's JSON where one exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    pub schema_version: String,
    /// The trial key (blake3 hex) this record is cached under.
    pub key: String,
    pub cell_name: String,
    pub trial_index: u32,
    pub workload: String,
    /// The subprocess flow's command, forwarded byte-for-byte.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// The subprocess flow's `env_passthrough_mode` (AORTA §3.4.2). Already part of the trial
    /// key; absent for workload trials and in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_passthrough_mode: Option<PassthroughMode>,
    pub verdict: Verdict,
    pub exit_status: ExitStatus,
    /// Process exit code; negative = killed by that signal (Python's convention, which the
    /// condition sandbox's `exit_code` follows); -1 with `timed_out`.
    pub exit_code: i32,
    pub timed_out: bool,
    pub walltime_sec: f64,
    #[serde(default)]
    pub peak_vram_mib: Option<i64>,
    #[serde(default)]
    pub failure_detectors_fired: Vec<String>,
    #[serde(default)]
    pub error_detectors_fired: Vec<String>,
    #[serde(default)]
    pub warn_detectors_fired: Vec<String>,
    /// Named regex groups from custom patterns plus classifier breadcrumbs.
    #[serde(default)]
    pub capture: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub tier_durations_ms: SmallMap<f64>,
    /// The env vars the cell set for this trial (mitigations then extra_env), not the whole env.
    #[serde(default)]
    pub env: SmallMap<String>,
    #[serde(default)]
    pub result: WorkloadResult,
    /// Set when the trial could not be started for a reason of its own, before any process:
    /// `env_file_validation_failed` (AORTA §3.4.2), with `error_message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Output files of the trial, relative to its directory (logs, artifacts).
    #[serde(default)]
    pub outputs: Vec<String>,
}

impl TrialRecord {
    /// AORTA's `trial_verdict` (§3.5) is already resolved into `verdict` by whoever built the
    /// record; this checks the invariant that error statuses are never a pass.
    pub fn is_consistent(&self) -> bool {
        !matches!(
            self.exit_status,
            ExitStatus::InfrastructureFailed | ExitStatus::WorkloadSetupFailed
        ) || self.verdict == Verdict::Error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_tolerates_missing_optional_fields() {
        let json = serde_json::json!({
            "schema_version": TRIAL_RECORD_SCHEMA, "key": "ab", "cell_name": "none-none", "trial_index": 0,
            "workload": "_subprocess", "verdict": "fail", "exit_status": "ok", "exit_code": 1,
            "timed_out": false, "walltime_sec": 0.5
        });
        let r: TrialRecord = serde_json::from_value(json).unwrap();
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.result.step_times_ms.is_empty());
        let back: TrialRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(r.is_consistent());
    }
}
