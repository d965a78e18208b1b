//! The binary on a machine without a GPU: clear errors with exit 2, list, compare's exit
//! codes, and the workload protocol under the name aorta-workload-hw_queue.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn bin() -> Command {
    Command::cargo_bin("aorta-hw-queue").unwrap()
}

fn no_gpu_here() -> bool {
    if aorta_hw_queue::backend::cuda::driver_present() {
        eprintln!("libcuda is present on this machine: skipping the no-GPU checks");
        return false;
    }
    true
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200-issue-sweep.json")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_without_a_gpu_exits_2_with_a_clear_message() {
    if !no_gpu_here() {
        return;
    }
    let o = bin()
        .args(["run", "spin_streams", "--streams", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("no usable GPU") && e.contains("libcuda.so.1"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    // The sweep's first child hits the same and the sweep stops with 2.
    let o = bin()
        .args([
            "sweep",
            "spin_streams",
            "--connections",
            "1,8",
            "--streams",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("CUDA_DEVICE_MAX_CONNECTIONS=1 (fresh process)"));
}

#[test]
fn bad_usage_exits_2() {
    let o = bin().args(["run", "no_such_workload"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown workload"));
    let o = bin()
        .args(["run", "spin_streams", "--set", "kernal_ms=3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("kernal_ms"), "{}", stderr(&o));
    let o = bin()
        .args(["sweep", "spin_streams", "--connections", "64"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = bin().args(["bench"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn list_names_every_workload() {
    let o = bin().arg("list").output().unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("Available workloads (9):"), "{out}");
    for w in [
        "hetero_kernels",
        "tiny_kernel_stress",
        "large_gemm_only",
        "spin_streams",
        "priority_convoy",
        "copy_overlap",
        "graph_subgraphs",
        "prefill_decode",
        "launch_overhead",
    ] {
        assert!(out.contains(w), "{w}");
    }
    let o = bin().args(["list", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 9);
    assert_eq!(v[0]["defaults"]["kernels_per_stream"], 2);
}

#[test]
fn compare_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let base = fixture();
    let o = bin().arg("compare").arg(&base).arg(&base).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Drop concurrency at one point by 30%.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let c = &mut v["runs"][5]["points"][12]["metrics"]["concurrency"];
    *c = Value::from(c.as_f64().unwrap() * 0.7);
    let worse = dir.path().join("worse.json");
    std::fs::write(&worse, v.to_string()).unwrap();
    let o = bin()
        .arg("compare")
        .arg(&base)
        .arg(&worse)
        .args(["--threshold", "0.1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("RESULT: REGRESSIONS DETECTED"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("REGRESSION")
            && out.contains("connections=32 depth streams=32")
            && out.contains("1 regressions"),
        "{out}"
    );
    let o = bin()
        .arg("compare")
        .arg(&base)
        .arg(&worse)
        .args(["--threshold", "0.5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let o = bin().arg("compare").arg(&base).arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

fn protocol_bin(dir: &Path) -> PathBuf {
    let link = dir.join("aorta-workload-hw_queue");
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("aorta-hw-queue"), &link).unwrap();
    link
}

#[test]
fn workload_protocol_by_invocation_name() {
    let dir = tempfile::tempdir().unwrap();
    let exe = protocol_bin(dir.path());
    let o = std::process::Command::new(&exe)
        .arg("describe")
        .output()
        .unwrap();
    assert!(o.status.success());
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["protocol"], 1);
    assert_eq!(d["name"], "hw_queue");
    assert_eq!(d["launch_mode"], "single_process");
    let o = std::process::Command::new(&exe)
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "protocol mode has no `list`");

    // A config error is a setup failure.
    let cfg = dir.path().join("config.json");
    let res = dir.path().join("result.json");
    let write_cfg = |c: Value| {
        let doc = serde_json::json!({"protocol": 1, "workload": "hw_queue", "cell": "c8", "trial_index": 0, "steps": 1,
                                     "config": c, "trial_dir": dir.path()});
        std::fs::write(&cfg, doc.to_string()).unwrap();
    };
    write_cfg(serde_json::json!({"workload": "spin_streams", "kernal_ms": 1}));
    let o = std::process::Command::new(&exe)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--result")
        .arg(&res)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
    assert_eq!(r["main_work_started"], false);
    assert_eq!(r["failure_details"][0]["type"], "config");

    if !no_gpu_here() {
        return;
    }
    write_cfg(
        serde_json::json!({"workload": "spin_streams", "streams": [1, 8], "orders": ["depth"]}),
    );
    let o = std::process::Command::new(&exe)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--result")
        .arg(&res)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
    assert_eq!(r["passed"], false);
    assert_eq!(r["main_work_started"], false);
    assert_eq!(r["failure_details"][0]["type"], "gpu_unavailable");
    assert!(r["failure_details"][0]["error"]
        .as_str()
        .unwrap()
        .contains("libcuda"));
}

/// The whole sweep path on the simulated GPU: one child per connection count (the child reads
/// CUDA_DEVICE_MAX_CONNECTIONS like the driver does), JSON back, analysis, table, plots; then the
/// protocol's sweep mode and compare on the output.
#[test]
fn sweep_end_to_end_on_the_simulated_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let o = bin()
        .env("AORTA_HW_QUEUE_BACKEND", "sim")
        .args([
            "sweep",
            "spin_streams",
            "--connections",
            "1,8,32",
            "--streams",
            "4,16,32",
            "--order",
            "breadth,depth",
        ])
        .args(["-i", "2", "-w", "1", "--kernel-ms", "2"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("depth: concurrency (model)"), "{table}");
    assert!(
        table.contains("32 streams: from 8 connections down"),
        "{table}"
    );
    let f = aorta_hw_queue::results::ResultFile::read(&out.join("result.json")).unwrap();
    assert_eq!(
        f.runs.iter().map(|r| r.connections).collect::<Vec<_>>(),
        vec![Some(1), Some(8), Some(32)]
    );
    // Each child saw its own value at "context creation".
    assert!(stderr(&o).contains("simulated GPU, 32 queues"));
    let depth = f
        .analysis
        .as_ref()
        .unwrap()
        .groups
        .iter()
        .find(|g| g.label == "depth")
        .unwrap()
        .clone();
    let fd = |n: u32| {
        depth
            .false_dependencies
            .iter()
            .find(|f| f.streams == n)
            .unwrap()
            .starts_at
    };
    assert_eq!((fd(4), fd(16), fd(32)), (Some(1), Some(8), Some(8)));
    for svg in [
        "concurrency-depth.svg",
        "concurrency-breadth.svg",
        "tiny-latency-depth.svg",
        "table.txt",
    ] {
        assert!(out.join(svg).exists(), "{svg}");
    }
    let r = out.join("result.json");
    let o = bin().arg("compare").arg(&r).arg(&r).output().unwrap();
    assert_eq!(o.status.code(), Some(0));

    // The protocol in sweep mode spawns the same children.
    let exe = protocol_bin(dir.path());
    let cfg = dir.path().join("config.json");
    let doc = serde_json::json!({"protocol": 1, "workload": "hw_queue", "cell": "all", "trial_index": 0, "steps": 1,
        "config": {"mode": "sweep", "connections": [1, 32], "streams": [16], "orders": ["depth"], "iterations": 1, "kernel_ms": 2,
                   "min_concurrency": 8.0},
        "trial_dir": dir.path()});
    std::fs::write(&cfg, doc.to_string()).unwrap();
    let res = dir.path().join("result-protocol.json");
    let o = std::process::Command::new(&exe)
        .env("AORTA_HW_QUEUE_BACKEND", "sim")
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--result")
        .arg(&res)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
    assert_eq!(r["main_work_started"], true);
    // 16 streams at 1 connection: concurrency ≈ 1.9 < 8 fails; at 32 connections it passes.
    assert_eq!(r["passed"], false);
    assert_eq!(r["failure_details"].as_array().unwrap().len(), 1);
    assert_eq!(r["failure_details"][0]["point"], "c1/depth/16");
    assert!(r["metrics"]["c32/depth/16/concurrency"].as_f64().unwrap() > 15.0);
    assert!(dir.path().join("hw-queue-result.json").exists());
}

/// AORTA 0.3.0's gpu_smoke through the workload protocol: `describe`; a bad config is a setup
/// failure; a trial passes where there is a CUDA driver and device, and is a setup failure
/// saying why where there is none (the CPU machines CI runs on).
#[test]
fn gpu_smoke_speaks_the_protocol_and_says_why_it_cannot_run() {
    let exe = assert_cmd::cargo::cargo_bin("aorta-workload-gpu_smoke");
    let o = std::process::Command::new(&exe)
        .arg("describe")
        .output()
        .unwrap();
    assert!(o.status.success());
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["name"], "gpu_smoke");
    assert_eq!(d["launch_mode"], "single_process");
    let dir = tempfile::tempdir().unwrap();
    let (cfg, res) = (
        dir.path().join("config.json"),
        dir.path().join("result.json"),
    );
    let run = |c: Value| {
        let doc = serde_json::json!({"protocol": 1, "workload": "gpu_smoke", "cell": "baseline",
                                     "trial_index": 0, "steps": 3, "config": c, "trial_dir": dir.path()});
        std::fs::write(&cfg, doc.to_string()).unwrap();
        let o = std::process::Command::new(&exe)
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--result")
            .arg(&res)
            .output()
            .unwrap();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
        (o, r)
    };
    let (o, r) = run(serde_json::json!({"dtype": "float64"}));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(r["main_work_started"], false);
    assert!(r["failure_details"][0]["error"]
        .as_str()
        .unwrap()
        .contains("unknown dtype"));
    let (o, r) = run(serde_json::json!({"n": 1000}));
    let stderr = String::from_utf8_lossy(&o.stderr);
    if Path::new("/proc/driver/nvidia/version").exists() {
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        assert_eq!(r["passed"], true, "{r}");
        assert_eq!(r["metrics"]["sum"], 3000.0, "{r}");
    } else {
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(r["main_work_started"], false, "{r}");
        assert_eq!(r["failure_details"][0]["type"], "gpu_unavailable", "{r}");
    }
}
