//! The trial record: one JSON document per executed trial (`result.json`), shared by the
//! executor (writes it), the store (caches it by trial key) and the report (aggregates it).
//!
//! It is the union of AORTA's dispatcher `TrialResult` (§3.4.1) and the probe `result.json`
//! (§3.4.2), so one aggregation path serves both flows.

mod capture;
mod sanitizer;
mod small_map;

pub use capture::{Capture, RetainLevel, Retention, RESERVED as RESERVED_CAPTURE_KEYS};
pub use sanitizer::{Hazard, KernelProfile, KernelStat, SanitizerReport};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// AORTA's free-form dicts, with the keys aorta writes or reads typed.
    pub failure_details: Vec<FailureDetail>,
    pub total_iterations: u64,
    pub step_times_ms: Vec<f64>,
    pub elapsed_sec: f64,
    pub metrics: SmallMap<Metric>,
    pub main_work_started: Option<bool>,
    pub executed_iterations: Option<u64>,
    pub configured_iterations: Option<u64>,
}

/// One entry of `failure_details`. AORTA's is a free-form dict; the keys aorta writes or the
/// report reads are fields here, and whatever else a workload put in its dict is kept in
/// `extra` as the workload wrote it (user data aorta never interprets, like a workload's config).
/// A known key of an unexpected type stays in `extra` too: a workload's odd `hint` never loses
/// its result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "serde_json::Map<String, serde_json::Value>")]
pub struct FailureDetail {
    /// What kind of failure (`subprocess_nonzero_exit`, `timeout`, a workload's own word).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_detectors_fired: Option<Vec<String>>,
    /// One line for a triager; matrix.md's "Failure hints" quote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl FailureDetail {
    pub fn of_kind(kind: &str) -> FailureDetail {
        FailureDetail {
            kind: Some(kind.into()),
            ..Default::default()
        }
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for FailureDetail {
    fn from(mut extra: serde_json::Map<String, serde_json::Value>) -> FailureDetail {
        use serde_json::Value;
        /// Takes `key` out of `extra` when `get` accepts its value (`null` reads as absent).
        fn take<T>(
            extra: &mut serde_json::Map<String, Value>,
            key: &str,
            get: impl Fn(&Value) -> Option<T>,
        ) -> Option<T> {
            let v = extra.get(key)?;
            let typed = if v.is_null() { None } else { Some(get(v)?) };
            extra.shift_remove(key);
            typed
        }
        let text = |v: &Value| v.as_str().map(str::to_owned);
        FailureDetail {
            kind: take(&mut extra, "type", text),
            exit_code: take(&mut extra, "exit_code", |v| {
                v.as_i64().and_then(|n| i32::try_from(n).ok())
            }),
            timed_out: take(&mut extra, "timed_out", Value::as_bool),
            error: take(&mut extra, "error", text),
            failure_detectors_fired: take(&mut extra, "failure_detectors_fired", |v| {
                serde_json::from_value(v.clone()).ok()
            }),
            hint: take(&mut extra, "hint", text),
            extra,
        }
    }
}

/// One value of `result.metrics`: the engine's own (`verdict`, `exit_code`, `peak_rss_kib`,
/// `step_time_samples`) and a workload's (losses, checksums, detector lists). `Other` keeps a
/// workload's nested value as it wrote it.
///
/// Read through a `serde_json::Value`, not `#[serde(untagged)]`: serde_json's
/// `arbitrary_precision` (which starlark turns on in this workspace) hides a number from an
/// untagged enum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, from = "serde_json::Value")]
pub enum Metric {
    Int(i64),
    Number(f64),
    Text(String),
    Texts(Vec<String>),
    Other(serde_json::Value),
}

impl From<serde_json::Value> for Metric {
    fn from(v: serde_json::Value) -> Metric {
        use serde_json::Value;
        match v {
            Value::Number(n) => match n.as_i64() {
                Some(i) => Metric::Int(i),
                None => n
                    .as_f64()
                    .map_or(Metric::Other(Value::Number(n)), Metric::Number),
            },
            Value::String(s) => Metric::Text(s),
            Value::Array(items) if items.iter().all(Value::is_string) => Metric::Texts(
                items
                    .into_iter()
                    .filter_map(|v| match v {
                        Value::String(s) => Some(s),
                        _ => None,
                    })
                    .collect(),
            ),
            other => Metric::Other(other),
        }
    }
}

impl Metric {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Metric::Int(n) => Some(*n as f64),
            Metric::Number(x) => Some(*x),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Metric::Text(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_texts(&self) -> Option<&[String]> {
        match self {
            Metric::Texts(v) => Some(v),
            _ => None,
        }
    }
}

impl From<&str> for Metric {
    fn from(s: &str) -> Metric {
        Metric::Text(s.into())
    }
}

impl From<i64> for Metric {
    fn from(n: i64) -> Metric {
        Metric::Int(n)
    }
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
    /// Named regex groups from custom patterns plus classifier and engine breadcrumbs.
    #[serde(default)]
    pub capture: Capture,
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
    /// What the command's process tree read (traced inputs, docs/cache-keys.md): absent for
    /// workload trials and records written before inputs were traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<InputsSummary>,
    /// A sanitizer cell's findings (docs/diagnostics.md); absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<SanitizerReport>,
    /// The probe recipe's kernel profilers' findings (`collect: [ncu]`, docs/diagnostics.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<KernelProfile>,
}

/// A command trial's traced inputs, summarised: the list itself is the trial's `inputs.json`
/// (a blob of its store entry, whose blake3 is `digest`), verified before the result is reused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputsSummary {
    /// Whether the process tree was traced; when not, `reason` says why and reuse checks only
    /// the files the command names (the rule before tracing), and says so.
    pub traced: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Input files recorded (after the scope rules).
    pub count: usize,
    /// blake3 (hex) of `inputs.json`; absent when nothing was traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl TrialRecord {
    /// The record of a trial before it is judged: an error with an infrastructure failure
    /// until whoever runs it fills in the outcome.
    pub fn unjudged(
        key: String,
        cell_name: String,
        trial_index: u32,
        workload: String,
        argv: Option<Vec<String>>,
        env: SmallMap<String>,
    ) -> TrialRecord {
        TrialRecord {
            schema_version: TRIAL_RECORD_SCHEMA.into(),
            key,
            cell_name,
            trial_index,
            workload,
            argv,
            env_passthrough_mode: None,
            failure_type: None,
            error_message: None,
            verdict: Verdict::Error,
            exit_status: ExitStatus::InfrastructureFailed,
            exit_code: 0,
            timed_out: false,
            walltime_sec: 0.0,
            peak_vram_mib: None,
            failure_detectors_fired: Vec::new(),
            error_detectors_fired: Vec::new(),
            warn_detectors_fired: Vec::new(),
            capture: Default::default(),
            tier_durations_ms: Default::default(),
            env,
            result: WorkloadResult::default(),
            outputs: Vec::new(),
            inputs: None,
            sanitizer: None,
            profiles: Vec::new(),
        }
    }

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

    #[test]
    fn failure_details_type_what_aorta_reads_and_keep_the_rest_as_written() {
        let d: FailureDetail = serde_json::from_str(
            r#"{"type": "mismatch", "rank": 3, "hint": "expected 5 got 4", "error": null, "exit_code": "odd"}"#,
        )
        .unwrap();
        assert_eq!(d.kind.as_deref(), Some("mismatch"));
        assert_eq!(d.hint.as_deref(), Some("expected 5 got 4"));
        assert_eq!(d.error, None);
        assert_eq!(d.exit_code, None, "a string exit code is not an exit code");
        assert_eq!(d.extra["rank"], 3);
        assert_eq!(d.extra["exit_code"], "odd", "kept as the workload wrote it");
        let back = serde_json::to_string(&d).unwrap();
        assert_eq!(
            back,
            r#"{"type":"mismatch","hint":"expected 5 got 4","rank":3,"exit_code":"odd"}"#
        );
    }

    #[test]
    fn metrics_keep_numbers_texts_and_nested_values() {
        let m: SmallMap<Metric> = serde_json::from_str(
            r#"{"exit_code": -9, "loss": 2.5, "verdict": "fail", "ids": ["a"], "by": {"x": 1}}"#,
        )
        .unwrap();
        assert_eq!(m.get("exit_code"), Some(&Metric::Int(-9)));
        assert_eq!(m.get("loss").and_then(Metric::as_f64), Some(2.5));
        assert_eq!(m.get("verdict").and_then(Metric::as_str), Some("fail"));
        assert_eq!(
            m.get("ids").and_then(Metric::as_texts),
            Some(&["a".to_string()][..])
        );
        assert!(matches!(m.get("by"), Some(Metric::Other(_))));
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"by":{"x":1},"exit_code":-9,"ids":["a"],"loss":2.5,"verdict":"fail"}"#
        );
    }
}
