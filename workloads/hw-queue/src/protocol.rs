//! The workload protocol (docs/workload-protocol.md): invoked as `aorta-workload-hw_queue`,
//! the binary answers `describe` and `run --config C --result R`, so a recipe can say
//! `workload: hw_queue`. The engine gives each trial a fresh process with the cell's env vars
//! (CUDA_DEVICE_MAX_CONNECTIONS among them), so `mode: run` (the default) measures in-process.
//!
//! `config` keys: `workload` (default spin_streams), `mode` (run | sweep), `connections` (sweep
//! mode), `min_concurrency` / `max_probe_p50_us` (pass criteria, on the points whose label is in
//! `criteria_labels`, default all), and any workload key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::backend::host_ns;
use crate::compare::flatten;
use crate::results::{write_atomic, ResultFile};
use crate::{runner, workloads};

pub const NAME: &str = "hw_queue";

/// What `describe` prints for each of this crate's workloads: one process, any world size.
pub fn describe(name: &str) -> Value {
    json!({"protocol": 1, "name": name, "version": env!("CARGO_PKG_VERSION"),
           "launch_mode": "single_process", "min_world_size": 1})
}

pub fn main(args: &[String]) -> i32 {
    serve(NAME, describe(NAME), args, run_trial)
}

/// A workload's command line (docs/workload-protocol.md): `describe` prints `described`;
/// `run --config C --result R` runs one trial; anything else is a usage error (exit 2).
pub fn serve(name: &str, described: Value, args: &[String], run: fn(&Path, &Path) -> i32) -> i32 {
    match args {
        [d] if d == "describe" => {
            println!("{described}");
            0
        }
        [r, c, config, rr, result] if r == "run" && c == "--config" && rr == "--result" => {
            run(Path::new(config), Path::new(result))
        }
        _ => {
            eprintln!("usage: aorta-workload-{name} describe | run --config CONFIG.json --result RESULT.json");
            2
        }
    }
}

/// Writes workload `name`'s RESULT.json atomically; a failure to write is said on stderr (the
/// engine then finds no result and records the trial as unrecorded).
pub fn write_result(name: &str, result: &Path, v: &Value) {
    if let Err(e) = write_atomic(result, v.to_string().as_bytes()) {
        eprintln!("{name}: cannot write {}: {e}", result.display());
    }
}

/// A trial of workload `name` that could not start (bad CONFIG, no GPU): RESULT.json with
/// `main_work_started: false` and one failure detail, the error on stderr; exit code 2.
pub fn setup_failed(name: &str, result: &Path, kind: &str, error: &str, hint: &str) -> i32 {
    eprintln!("{name}: {error}");
    let r = json!({
        "passed": false, "failure_count": 1, "first_failure_iteration": null,
        "failure_details": [{"type": kind, "error": error, "hint": hint}],
        "total_iterations": 0, "executed_iterations": 0, "configured_iterations": 0,
        "step_times_ms": [], "elapsed_sec": 0.0, "metrics": {}, "main_work_started": false
    });
    write_result(name, result, &r);
    2
}

/// CONFIG.json as the engine wrote it; `Err`: why it cannot be read, naming the file.
pub fn read_config(config: &Path) -> Result<Value, String> {
    std::fs::read_to_string(config)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: {e}", config.display()))
}

fn run_trial(config: &Path, result: &Path) -> i32 {
    let t_start = host_ns();
    let doc = match read_config(config) {
        Ok(v) => v,
        Err(e) => return setup_failed(NAME, result, "config", &e, "the engine writes CONFIG.json"),
    };
    let mut opts: Map<String, Value> = doc
        .get("config")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let take_str = |o: &mut Map<String, Value>, k: &str, d: &str| {
        o.remove(k)
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or(d.into())
    };
    let workload = take_str(&mut opts, "workload", "spin_streams");
    let mode = take_str(&mut opts, "mode", "run");
    let connections: Vec<u32> = opts
        .remove("connections")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_else(|| vec![1, 2, 4, 8, 16, 32]);
    let min_conc = opts.remove("min_concurrency").and_then(|v| v.as_f64());
    let max_probe = opts.remove("max_probe_p50_us").and_then(|v| v.as_f64());
    let only: Option<Vec<String>> = opts
        .remove("criteria_labels")
        .and_then(|v| serde_json::from_value(v).ok());
    if workloads::find(&workload).is_none() {
        return setup_failed(
            NAME,
            result,
            "config",
            &format!("unknown workload {workload:?}"),
            "aorta-hw-queue list",
        );
    }
    let mut cfg = workloads::config_for(&workload);
    if let Err(e) = cfg.apply(&opts) {
        return setup_failed(
            NAME,
            result,
            "config",
            &e,
            "see `aorta-hw-queue list --verbose` for the keys",
        );
    }
    let trial_dir = doc
        .get("trial_dir")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut log = |m: String| eprintln!("{m}");
    let file: ResultFile = match mode.as_str() {
        "run" => match runner::run_in_process(&workload, &cfg, &mut log) {
            Ok(f) => f,
            Err(e) if e.exit_code() == 2 => return setup_failed(NAME, result, "gpu_unavailable", &e.to_string(), "run on a machine with an NVIDIA GPU; put libcuda and the CUDA toolkit's lib64 on the library path"),
            Err(e) => return setup_failed(NAME, result, "gpu_error", &e.to_string(), "see stderr.log"),
        },
        "sweep" => match runner::run_sweep(&workload, &cfg, &connections, 0.1, &mut log) {
            Ok(f) => f,
            Err((_, e)) => return setup_failed(NAME, result, "gpu_unavailable", &e, "see stderr.log"),
        },
        other => return setup_failed(NAME, result, "config", &format!("mode {other:?} (run|sweep)"), "mode: run or sweep"),
    };
    let file_path = trial_dir.join("hw-queue-result.json");
    let _ = runner::write_outputs(&file, &trial_dir);
    let _ = std::fs::rename(trial_dir.join("result.json"), &file_path);
    let mut metrics = BTreeMap::new();
    let mut failures = Vec::new();
    let mut steps = Vec::new();
    for run in &file.runs {
        if let Some(e) = &run.error {
            failures
                .push(json!({"type": "run_failed", "error": e, "connections": run.connections}));
        }
        let prefix = if file.runs.len() > 1 {
            format!("c{}/", run.effective_connections())
        } else {
            String::new()
        };
        for p in &run.points {
            for (k, v) in flatten(&p.metrics) {
                metrics.insert(format!("{prefix}{}/{}/{k}", p.label, p.streams), json!(v));
            }
            steps.extend(
                p.metrics
                    .span_ms
                    .or(p.metrics.iteration_ms.as_ref().map(|s| s.p50)),
            );
            if only.as_ref().is_some_and(|l| !l.contains(&p.label)) {
                continue;
            }
            if let (Some(min), Some(c)) = (min_conc, p.metrics.concurrency) {
                if c < min {
                    failures.push(json!({"type": "low_concurrency", "point": format!("{prefix}{}/{}", p.label, p.streams),
                        "value": c, "hint": format!("concurrency {c:.2} < min_concurrency {min}")}));
                }
            }
            if let (Some(max), Some(s)) = (max_probe, &p.metrics.tiny_latency_us) {
                if s.p50 > max {
                    failures.push(json!({"type": "slow_probe", "point": format!("{prefix}{}/{}", p.label, p.streams),
                        "value": s.p50, "hint": format!("tiny-kernel p50 {:.0} µs > max_probe_p50_us {max}", s.p50)}));
                }
            }
        }
    }
    metrics.insert("result_file".into(), json!(file_path.display().to_string()));
    let n = steps.len();
    let r = json!({
        "passed": failures.is_empty(),
        "failure_count": failures.len(),
        "first_failure_iteration": if failures.is_empty() { Value::Null } else { json!(0) },
        "failure_details": failures,
        "total_iterations": n, "executed_iterations": n, "configured_iterations": n,
        "step_times_ms": steps,
        "elapsed_sec": (host_ns() - t_start) as f64 / 1e9,
        "metrics": metrics,
        "main_work_started": true,
    });
    match write_atomic(
        result,
        serde_json::to_string_pretty(&r).expect("json").as_bytes(),
    ) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("hw_queue: cannot write {}: {e}", result.display());
            1
        }
    }
}
