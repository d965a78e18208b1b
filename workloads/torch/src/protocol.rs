//! The workload protocol (docs/workload-protocol.md) shared by the three binaries: `describe`,
//! `run --config C --result R`, the result JSON (spec §3.4.1), and turning every failure into a
//! result file: bad config → `main_work_started: false` and exit 2; a libtorch error after work
//! began (tch panics on those) → a failed result and exit 1, never a bare panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Map, Value};

/// What CONFIG.json says about the trial.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The dispatcher's `steps` (from `--steps` or the recipe); overrides `config.steps`.
    pub steps: Option<u64>,
    pub config: Map<String, Value>,
    pub trial_dir: PathBuf,
    pub cell: String,
    pub trial_index: u64,
}

/// A failure before any real work: a bad config or a missing device.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupError {
    pub kind: &'static str,
    pub error: String,
    pub hint: String,
}

impl SetupError {
    pub fn config(error: impl Into<String>, hint: impl Into<String>) -> Self {
        SetupError {
            kind: "config",
            error: error.into(),
            hint: hint.into(),
        }
    }
}

/// What a finished run reports; `passed` is derived from `failures`.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub failures: Vec<Value>,
    pub first_failure_iteration: Option<u64>,
    pub configured_iterations: u64,
    pub executed_iterations: u64,
    pub step_times_ms: Vec<f64>,
    pub metrics: Map<String, Value>,
}

impl Outcome {
    pub fn fail(&mut self, step: Option<u64>, detail: Value) {
        if self.first_failure_iteration.is_none() {
            self.first_failure_iteration = step;
        }
        self.failures.push(detail);
    }
}

pub fn describe(name: &str) -> Value {
    json!({"protocol": 1, "name": name, "version": env!("CARGO_PKG_VERSION"),
           "launch_mode": "single_process", "min_world_size": 1, "requires": ["libtorch"]})
}

/// Entry point of a workload binary; returns the process exit code.
pub fn main(name: &str, args: &[String], run: fn(&Trial) -> Result<Outcome, SetupError>) -> i32 {
    match args {
        [d] if d == "describe" => {
            println!("{}", describe(name));
            0
        }
        [r, c, config, rr, result] if r == "run" && c == "--config" && rr == "--result" => {
            run_trial(name, Path::new(config), Path::new(result), run)
        }
        _ => {
            eprintln!("usage: aorta-workload-{name} describe | run --config CONFIG.json --result RESULT.json");
            2
        }
    }
}

pub fn read_trial(config: &Path) -> Result<Trial, SetupError> {
    let text = std::fs::read_to_string(config).map_err(|e| {
        SetupError::config(
            format!("cannot read {}: {e}", config.display()),
            "the engine writes CONFIG.json",
        )
    })?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| {
        SetupError::config(
            format!("{}: {e}", config.display()),
            "CONFIG.json must be a JSON object",
        )
    })?;
    let config_map = match doc.get("config") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(SetupError::config(
                format!("`config` must be an object, got {other}"),
                "workload_config is a mapping",
            ))
        }
    };
    let steps = match doc.get("steps") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().filter(|&s| s >= 1).ok_or_else(|| {
            SetupError::config(
                format!("steps: {v} is not an integer >= 1"),
                "--steps N with N >= 1",
            )
        })?),
    };
    Ok(Trial {
        steps,
        config: config_map,
        trial_dir: doc
            .get("trial_dir")
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".")),
        cell: doc
            .get("cell")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        trial_index: doc.get("trial_index").and_then(Value::as_u64).unwrap_or(0),
    })
}

fn run_trial(
    name: &str,
    config: &Path,
    result: &Path,
    run: fn(&Trial) -> Result<Outcome, SetupError>,
) -> i32 {
    let profile = crate::profile::requested();
    let start = Instant::now();
    let outcome =
        read_trial(config).and_then(|t| match catch_unwind(AssertUnwindSafe(|| run(&t))) {
            Ok(r) => r.map(Ok),
            Err(p) => Ok(Err(panic_text(&p))),
        });
    let elapsed = start.elapsed().as_secs_f64();
    if let Some(out) = &profile {
        // Whatever the outcome: a trial that failed still has its kernels, or a note why not.
        if let Err(e) = crate::profile::finish(out) {
            eprintln!("{name}: cannot write {}: {e}", out.display());
        }
    }
    let (doc, code) = match outcome {
        Err(e) => {
            eprintln!("{name}: {}: {} (hint: {})", e.kind, e.error, e.hint);
            (setup_failed_json(&e), 2)
        }
        Ok(Err(msg)) => {
            eprintln!("{name}: libtorch error: {msg}");
            let o = Outcome {
                failures: vec![
                    json!({"type": "torch_error", "error": msg, "hint": "see stderr.log"}),
                ],
                ..Default::default()
            };
            (result_json(&o, elapsed), 1)
        }
        Ok(Ok(o)) => (result_json(&o, elapsed), 0),
    };
    match write_atomic(
        result,
        serde_json::to_string_pretty(&doc)
            .unwrap_or_default()
            .as_bytes(),
    ) {
        Ok(()) => code,
        Err(e) => {
            eprintln!("{name}: cannot write {}: {e}", result.display());
            1
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

pub fn setup_failed_json(e: &SetupError) -> Value {
    json!({
        "passed": false, "failure_count": 1, "first_failure_iteration": null,
        "failure_details": [{"type": e.kind, "error": e.error, "hint": e.hint}],
        "total_iterations": 0, "executed_iterations": 0, "configured_iterations": 0,
        "step_times_ms": [], "elapsed_sec": 0.0, "metrics": {}, "main_work_started": false
    })
}

pub fn result_json(o: &Outcome, elapsed_sec: f64) -> Value {
    json!({
        "passed": o.failures.is_empty(),
        "failure_count": o.failures.len(),
        "first_failure_iteration": o.first_failure_iteration,
        "failure_details": o.failures,
        "total_iterations": o.executed_iterations,
        "executed_iterations": o.executed_iterations,
        "configured_iterations": o.configured_iterations,
        "step_times_ms": o.step_times_ms,
        "elapsed_sec": elapsed_sec,
        "metrics": o.metrics,
        "main_work_started": true,
    })
}

/// Temp file in the same folder, fsync, rename: a reader never sees half a result.
pub use aorta_fsutil::write_atomic;
