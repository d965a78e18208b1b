//! The executable as the engine and torchrun run it: real processes, loopback rendezvous, and
//! clean errors (no panics) on this machine, which has no GPU.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_aorta-workload-race");

fn write_config(dir: &Path, config: Value, trial: u64) -> std::path::PathBuf {
    let p = dir.join("config.json");
    let doc = json!({"protocol": 1, "workload": "race", "cell": "c", "trial_index": trial, "steps": 1,
                     "config": config, "trial_dir": dir.display().to_string()});
    std::fs::write(&p, doc.to_string()).unwrap();
    p
}

fn run(
    dir: &Path,
    config: Value,
    extra: &[&str],
    env: &[(&str, String)],
) -> (Output, Option<Value>) {
    let cfg = write_config(dir, config, 0);
    let res = dir.join("result.json");
    let mut c = Command::new(BIN);
    c.args([
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--result",
        res.to_str().unwrap(),
    ])
    .args(extra);
    for k in [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "AORTA_NCCL_LIB",
        "NCCL_LIB",
    ] {
        c.env_remove(k);
    }
    c.envs(env.iter().map(|(k, v)| (*k, v.clone())));
    let out = c.output().unwrap();
    let r = std::fs::read(&res)
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (out, r)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn describe_speaks_protocol_1() {
    let o = Command::new(BIN).arg("describe").output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["protocol"].as_u64(), v["name"].as_str()),
        (Some(1), Some("race"))
    );
    assert_eq!(
        Command::new(BIN)
            .arg("frobnicate")
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn bad_config_is_a_setup_failure_with_a_hint() {
    let d = tempfile::tempdir().unwrap();
    let (o, r) = run(d.path(), json!({"mode": "pipeline"}), &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    let r = r.unwrap();
    assert_eq!(r["main_work_started"], false);
    assert_eq!(r["failure_details"][0]["type"], "config");
    assert!(r["failure_details"][0]["hint"]
        .as_str()
        .unwrap()
        .contains("ddp"));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn no_gpu_is_a_clean_setup_failure() {
    let d = tempfile::tempdir().unwrap();
    let (o, r) = run(d.path(), json!({"verify_iterations": 2}), &[], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r = r.unwrap();
    assert_eq!(r["main_work_started"], false);
    assert_eq!(r["failure_details"][0]["type"], "gpu_unavailable");
    assert!(!r["failure_details"][0]["hint"].as_str().unwrap().is_empty());
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

#[test]
fn sim_backend_reports_the_race_and_the_fix() {
    let base = json!({"backend": "sim", "mode": "ddp", "ddp_bucketed": true, "h2d_tensor_size": 64,
        "allreduce_tensor_size": 16, "warmup_iterations": 1, "verify_iterations": 30, "unknown_knob": 1});
    let d = tempfile::tempdir().unwrap();
    let mut bug = base.clone();
    bug["missing_sync"] = json!(true);
    let (o, r) = run(d.path(), bug, &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("ignoring unknown workload_config key \"unknown_knob\""));
    let r = r.unwrap();
    assert_eq!(
        (r["passed"].as_bool(), r["main_work_started"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(r["failure_count"], 1, "stops at the first corruption");
    let d0 = &r["failure_details"][0];
    for k in ["type", "rank", "iteration", "expected", "actual", "hint"] {
        assert!(!d0[k].is_null(), "{k} missing in {d0}");
    }
    assert_eq!(r["first_failure_iteration"], d0["iteration"]);
    assert_eq!(
        r["step_times_ms"].as_array().unwrap().len() as u64,
        r["executed_iterations"].as_u64().unwrap() - 1
    );
    assert!(
        r["metrics"]["dropped_waits_per_iteration"]
            .as_u64()
            .unwrap()
            > 0
    );

    let (o, r) = run(d.path(), base, &[], &[]);
    assert_eq!(o.status.code(), Some(0));
    let r = r.unwrap();
    assert_eq!(r["passed"], true);
    assert_eq!(r["step_times_ms"].as_array().unwrap().len(), 30);
    assert_eq!(r["configured_iterations"], 31);
}

/// Three real ranks rendezvous on loopback; rank 0 finds no GPU and every rank learns why.
#[test]
fn nproc_ranks_rendezvous_and_fail_together_without_a_gpu() {
    let d = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let (o, r) = run(
        d.path(),
        json!({"verify_iterations": 2}),
        &["--nproc", "3"],
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let r = r.unwrap();
    assert_eq!(r["main_work_started"], false);
    assert_eq!(r["failure_details"][0]["type"], "gpu_unavailable", "{r}");
    assert!(r["failure_details"][0]["error"]
        .as_str()
        .unwrap()
        .starts_with("rank 0:"));
    assert!(
        err.contains("rank exit codes [Some(2), Some(2), Some(2)]"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(t.elapsed().as_secs() < 30);
}

/// torchrun-style env: a missing rank is a rendezvous error after the timeout, not a hang.
#[test]
fn a_missing_rank_times_out_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let port = aorta_race::rendezvous::free_port().unwrap().to_string();
    let env = [
        ("RANK", "0".to_string()),
        ("WORLD_SIZE", "3".into()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port),
        ("AORTA_RACE_RDZV_TIMEOUT_S", "2".into()),
    ];
    let (o, r) = run(d.path(), json!({}), &[], &env);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = r.unwrap()["failure_details"][0]["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(e.contains("only 1 of 3 ranks joined"), "{e}");
}

#[test]
fn bad_torchrun_env_is_explained() {
    let d = tempfile::tempdir().unwrap();
    let (o, r) = run(
        d.path(),
        json!({}),
        &[],
        &[
            ("RANK", "4".into()),
            ("WORLD_SIZE", "2".into()),
            ("MASTER_ADDR", "x".into()),
            ("MASTER_PORT", "1".into()),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(r.unwrap()["failure_details"][0]["error"]
        .as_str()
        .unwrap()
        .contains("outside WORLD_SIZE"));
}

#[test]
fn the_fixed_schedule_is_reported_and_a_blinding_depth_is_refused() {
    let base = json!({"backend": "sim", "mode": "ddp", "ddp_bucketed": true, "h2d_tensor_size": 64,
        "allreduce_tensor_size": 16, "warmup_iterations": 1, "verify_iterations": 5});
    let d = tempfile::tempdir().unwrap();
    let (o, r) = run(d.path(), base.clone(), &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = &r.unwrap()["metrics"];
    assert_eq!(
        (
            m["buffer_depth"].as_u64(),
            m["schedule"].as_str(),
            m["config"]["buffer_depth"].as_u64()
        ),
        (Some(2), Some("pipelined"), Some(2))
    );
    let mut bug = base.clone();
    bug["missing_sync"] = json!(true);
    let (_, r) = run(d.path(), bug, &[], &[]);
    let m = &r.unwrap()["metrics"];
    assert_eq!(
        (m["buffer_depth"].as_u64(), m["schedule"].as_str()),
        (Some(1), Some("single_buffered"))
    );
    let mut three = base;
    three["buffer_depth"] = json!(3);
    let (o, r) = run(d.path(), three, &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    let f = &r.unwrap()["failure_details"][0];
    assert_eq!(f["type"], "config");
    assert!(
        f["error"].as_str().unwrap().contains("use buffer_depth: 2"),
        "{f}"
    );
    assert!(f["hint"].as_str().unwrap().contains("buffer_depth"), "{f}");
}
