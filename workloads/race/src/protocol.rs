//! The workload protocol (docs/workload-protocol.md): `describe`, and `run --config C --result
//! R [--nproc N]` for one trial. A trial is one rank (world size 1, or a rank started by
//! torchrun / by `--nproc`), or the launcher of N ranks. Bad input is a result with
//! `main_work_started: false` and exit code 2, never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::config::RaceConfig;
use crate::plan::Layout;
use crate::rendezvous::{Client, DistEnv, Server};
use crate::runner::{self, Executor, Outcome, SimExecutor, MAX_RECORDS};
use crate::sim::{Rng, Sim};

pub const NAME: &str = "race";

pub fn describe() -> Value {
    json!({"protocol": 1, "name": NAME, "version": env!("CARGO_PKG_VERSION"),
           "launch_mode": "single_process", "min_world_size": 1})
}

const USAGE: &str = "usage: aorta-workload-race describe | run --config CONFIG.json --result RESULT.json [--nproc N]";

pub fn main(args: &[String]) -> i32 {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["describe"] => {
            println!("{}", describe());
            0
        }
        ["run", rest @ ..] => {
            let (mut config, mut result, mut nproc) = (None, None, None);
            let mut it = rest.iter();
            while let Some(k) = it.next() {
                match (*k, it.next()) {
                    ("--config", Some(v)) => config = Some(PathBuf::from(v)),
                    ("--result", Some(v)) => result = Some(PathBuf::from(v)),
                    ("--nproc", Some(v)) => match v.parse::<u32>() {
                        Ok(n) if n >= 1 => nproc = Some(n),
                        _ => {
                            eprintln!("race: --nproc {v:?}: expected an integer >= 1\n{USAGE}");
                            return 2;
                        }
                    },
                    _ => {
                        eprintln!("{USAGE}");
                        return 2;
                    }
                }
            }
            match (config, result) {
                (Some(c), Some(r)) => run_trial(&c, &r, nproc),
                _ => {
                    eprintln!("{USAGE}");
                    2
                }
            }
        }
        _ => {
            eprintln!("{USAGE}");
            2
        }
    }
}

/// Write `r` atomically (temp file + rename).
pub fn write_result(path: &Path, r: &Value) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(r).unwrap_or_default())?;
    std::fs::rename(&tmp, path)
}

pub fn setup_failed(result: Option<&Path>, kind: &str, error: &str, hint: &str) -> i32 {
    eprintln!("race: {error}");
    if let Some(result) = result {
        let r = json!({
            "passed": false, "failure_count": 1, "first_failure_iteration": null,
            "failure_details": [{"type": kind, "error": error, "hint": hint}],
            "total_iterations": 0, "executed_iterations": 0, "configured_iterations": 0,
            "step_times_ms": [], "elapsed_sec": 0.0, "metrics": {}, "main_work_started": false
        });
        if let Err(e) = write_result(result, &r) {
            eprintln!("race: cannot write {}: {e}", result.display());
        }
    }
    2
}

const GPU_HINT: &str = "run on a machine with an NVIDIA GPU; CUDA libraries (NVRTC, cuBLASLt) on LD_LIBRARY_PATH, NCCL via AORTA_NCCL_LIB or the nvidia-nccl wheel";

fn rdzv_timeout() -> Duration {
    let s = std::env::var("AORTA_RACE_RDZV_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(120);
    Duration::from_secs(s.max(1))
}

fn run_trial(config: &Path, result: &Path, nproc_cli: Option<u32>) -> i32 {
    let doc: Value = match std::fs::read_to_string(config)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            return setup_failed(
                Some(result),
                "config",
                &format!("{}: {e}", config.display()),
                "the engine writes CONFIG.json",
            )
        }
    };
    let mut map: Map<String, Value> = doc
        .get("config")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let trial = doc.get("trial_index").and_then(Value::as_u64).unwrap_or(0);
    let backend = match map.remove("backend") {
        None => "cuda".to_string(),
        Some(Value::String(s)) if s == "cuda" || s == "sim" => s,
        Some(v) => {
            return setup_failed(
                Some(result),
                "config",
                &format!("workload_config.backend: {v} (cuda | sim)"),
                "backend: cuda",
            )
        }
    };
    let (cfg, warnings) = match RaceConfig::from_map(&map) {
        Ok(x) => x,
        Err(e) => return setup_failed(Some(result), "config", &e.to_string(), &e.hint),
    };
    warnings.iter().for_each(|w| eprintln!("WARNING {w}"));
    let dist = match DistEnv::from_env(|k| std::env::var(k).ok()) {
        Ok(d) => d,
        Err(e) => {
            return setup_failed(
                Some(result),
                "launch",
                &e,
                "start ranks with torchrun, or use --nproc N",
            )
        }
    };
    match dist {
        Some(d) => run_rank(&cfg, &backend, d, result, trial),
        None => {
            let nproc = nproc_cli.unwrap_or(cfg.nproc);
            if nproc > 1 {
                match crate::launch::launch(nproc, config, result, Duration::from_secs(30)) {
                    Ok(code) => {
                        if !result.exists() {
                            return setup_failed(
                                Some(result),
                                "launch",
                                &format!("rank 0 ended (exit {code}) without a result"),
                                "see stderr.log for each rank's messages",
                            );
                        }
                        code
                    }
                    Err(e) => setup_failed(Some(result), "launch", &e, "see stderr.log"),
                }
            } else {
                let one = DistEnv {
                    rank: 0,
                    world: 1,
                    local_rank: 0,
                    master: String::new(),
                };
                run_rank(&cfg, &backend, one, result, trial)
            }
        }
    }
}

enum Peers {
    Alone,
    Root(Server),
    Rank(Client),
}

/// One rank: rendezvous, setup, barrier (NCCL id), the loop, and the result (rank 0 merges).
fn run_rank(cfg: &RaceConfig, backend: &str, d: DistEnv, result: &Path, trial: u64) -> i32 {
    let is_root = d.rank == 0;
    let out_path = is_root.then_some(result);
    let layout = match Layout::new(cfg, d.rank, d.world) {
        Ok(l) => l,
        Err(e) => {
            let hint = if e.contains("buffer_depth") {
                "set the buffer_depth the message names"
            } else {
                "make every tensor size at least the world size"
            };
            return setup_failed(out_path, "config", &e, hint);
        }
    };
    if backend == "cuda" {
        for (k, v) in crate::launch::SAFE_ENV {
            if std::env::var_os(k).is_none() {
                // Single-threaded here, before NCCL reads its environment.
                std::env::set_var(k, v);
            }
        }
    }
    let timeout = rdzv_timeout();
    let listener = if is_root && d.world > 1 {
        match Server::bind(&d.master) {
            Ok(l) => Some(l),
            Err(e) => {
                return setup_failed(out_path, "rendezvous", &e, "set MASTER_PORT to a free port")
            }
        }
    } else {
        None
    };
    let client = if !is_root {
        match Client::join(&d.master, d.rank, d.world, timeout) {
            Ok(c) => Some(c),
            Err(e) => return setup_failed(None, "rendezvous", &e, ""),
        }
    } else {
        None
    };
    // Local setup; rank 0 also creates the NCCL id.
    let ex: Result<Box<dyn Executor>, String>;
    let mut id = Err(String::new());
    let mut info = json!({"backend": backend});
    if backend == "sim" {
        ex = if d.world == 1 {
            Ok(Box::new(SimExecutor {
                sim: Sim::new(&layout.bufs, cfg.dtype, 1),
                rng: Some(Rng(trial + 1)),
            }))
        } else {
            Err("backend sim runs world size 1 only".into())
        };
        id = ex.as_ref().map(|_| [0u8; 128]).map_err(Clone::clone);
    } else {
        match crate::gpu::Runtime::new(cfg, &layout, d.local_rank, d.world) {
            Ok(rt) => {
                info = rt.info.clone();
                if is_root {
                    id = rt.nccl_unique_id();
                }
                ex = Ok(Box::new(rt));
            }
            Err(e) => ex = Err(e),
        }
    }
    if !is_root {
        id = Ok([0u8; 128]);
    }
    let own_id = match (&ex, id) {
        (Ok(_), Ok(i)) => Ok(i),
        (Err(e), _) => Err(e.clone()),
        (_, Err(e)) => Err(e),
    };
    let (peers, id) = match (listener, client) {
        (Some(l), _) => match Server::accept(l, d.world, timeout) {
            Ok(mut s) => {
                let id = s.barrier(own_id);
                (Peers::Root(s), id)
            }
            Err(e) => {
                return setup_failed(
                    out_path,
                    "rendezvous",
                    &e,
                    "every rank must reach MASTER_ADDR:MASTER_PORT",
                )
            }
        },
        (None, Some(mut c)) => {
            let id = c.barrier(own_id.map(|_| ()));
            (Peers::Rank(c), id)
        }
        (None, None) => (Peers::Alone, own_id),
    };
    let (mut ex, id) = match (ex, id) {
        (Ok(ex), Ok(id)) => (ex, id),
        (_, Err(e)) | (Err(e), _) => {
            let kind = if e.contains("rendezvous") {
                "rendezvous"
            } else {
                "gpu_unavailable"
            };
            return setup_failed(out_path, kind, &e, GPU_HINT);
        }
    };
    if backend == "cuda" {
        if let Err(e) = ex.init_comm(&id, d.rank) {
            return setup_failed(
                out_path,
                "nccl",
                &e,
                "NCCL_DEBUG=INFO shows why the communicator failed",
            );
        }
    }
    eprintln!("race: rank {} of {} ready ({})", d.rank, d.world, info);
    let mut log = |m: String| eprintln!("{m}");
    let out = runner::run(&mut *ex, cfg, &layout, d.rank, &mut log);
    let summary = runner::rank_summary(&out, d.rank);
    drop(ex);
    match peers {
        Peers::Rank(mut c) => {
            if let Err(e) = c.send_result(summary.to_string().as_bytes()) {
                eprintln!("race: rank {}: {e}", d.rank);
            }
            i32::from(out.error.is_some())
        }
        Peers::Root(mut s) => {
            let others = s.gather(timeout);
            finish(cfg, &out, summary, others, &layout, d.world, info, result)
        }
        Peers::Alone => finish(cfg, &out, summary, Vec::new(), &layout, 1, info, result),
    }
}

/// Rank 0: merge every rank's summary into the WorkloadResult.
#[allow(clippy::too_many_arguments)]
fn finish(
    cfg: &RaceConfig,
    out: &Outcome,
    own: Value,
    others: Vec<(u32, Result<Vec<u8>, String>)>,
    layout: &Layout,
    world: u32,
    info: Value,
    result: &Path,
) -> i32 {
    let mut ranks = vec![own];
    let mut details: Vec<Value> = Vec::new();
    for (rank, r) in others {
        match r.and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string())) {
            Ok(v) => ranks.push(v),
            Err(e) => details.push(json!({"type": "rank_lost", "rank": rank, "error": e, "hint": format!("rank {rank} sent no result: {e}")})),
        }
    }
    let mut failures = 0u64;
    let mut first: Option<u64> = None;
    let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
    let (mut layers_verified, mut mismatches) = (0u64, 0u64);
    for r in &ranks {
        failures += r["corrupt_iterations"].as_u64().unwrap_or(0);
        if let Some(f) = r["first_failure_iteration"].as_u64() {
            first = Some(first.map_or(f, |x| x.min(f)));
        }
        layers_verified += r["layers_verified"].as_u64().unwrap_or(0);
        mismatches += r["layer_checksum_mismatches"].as_u64().unwrap_or(0);
        if let Some(e) = r["error"].as_str() {
            details.push(json!({"type": "gpu_error", "rank": r["rank"], "error": e, "hint": "a CUDA or NCCL call failed mid-run; see stderr.log"}));
        }
        for c in r["corruptions"].as_array().into_iter().flatten() {
            *by_type
                .entry(c["type"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
            if details.len() < MAX_RECORDS {
                details.push(c.clone());
            }
        }
    }
    let errors = details
        .iter()
        .any(|d| d["type"] == "gpu_error" || d["type"] == "rank_lost");
    let steps = &out.step_times_ms;
    let avg = if steps.is_empty() {
        0.0
    } else {
        steps.iter().sum::<f64>() / steps.len() as f64
    };
    let warm = if out.warmup_ms.is_empty() {
        0.0
    } else {
        out.warmup_ms.iter().sum::<f64>() / out.warmup_ms.len() as f64
    };
    let plan = layout.plan(cfg.warmup_iterations, false);
    let r = json!({
        "passed": failures == 0 && !errors,
        "failure_count": failures + u64::from(errors),
        "first_failure_iteration": first,
        "failure_details": details,
        "total_iterations": out.executed, "executed_iterations": out.executed,
        "configured_iterations": cfg.configured_iterations(),
        "step_times_ms": steps,
        "elapsed_sec": out.elapsed_sec,
        "main_work_started": true,
        "metrics": {
            "avg_step_time_ms": avg, "warmup_avg_step_time_ms": warm, "mode": cfg.mode, "compute_type": "gemm",
            "layers_verified": layers_verified, "layer_checksum_mismatches": mismatches,
            "rank": 0, "world_size": world, "corrupt_iterations": failures, "corruptions_by_type": by_type,
            "missing_sync": cfg.missing_sync, "dropped_waits_per_iteration": plan.dropped_waits,
            "buffer_depth": layout.buffer_depth(), "schedule": if layout.buffer_depth() > 1 { "pipelined" } else { "single_buffered" },
            "race_window_us": cfg.race_window_us, "comm_priority": cfg.comm_priority, "comm_delay_us": cfg.comm_delay_us,
            "dtype": cfg.dtype, "config": cfg, "device": info,
            "executed_per_rank": ranks.iter().map(|r| r["executed"].clone()).collect::<Vec<_>>(),
        },
    });
    if let Err(e) = write_result(result, &r) {
        eprintln!("race: cannot write {}: {e}", result.display());
        return 1;
    }
    eprintln!(
        "race: {} verified iterations, {failures} corrupted, avg step {avg:.3} ms",
        steps.len()
    );
    i32::from(out.error.is_some())
}
