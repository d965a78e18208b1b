//! `collect: [torch_profiler]` in the workload binaries on the CPU: with
//! `AORTA_TORCH_PROFILE_OUT` set, each starts and stops libtorch's Kineto profiler and writes
//! the `KernelProfile` aorta reads, with the note that a CPU run has no CUDA kernels.

use std::path::Path;
use std::process::{Command, Output};

use aorta_trial::KernelProfile;
use serde_json::{json, Value};

fn bin(name: &str) -> &'static str {
    match name {
        "training" => env!("CARGO_BIN_EXE_aorta-workload-training"),
        "inference" => env!("CARGO_BIN_EXE_aorta-workload-inference"),
        _ => env!("CARGO_BIN_EXE_aorta-workload-llm_determinism"),
    }
}

/// Runs one trial in `dir`, the profile asked for at `profile` if given.
fn run(dir: &Path, name: &str, config: Value, profile: Option<&Path>) -> Output {
    let cfg = dir.join("config.json");
    let doc = json!({"protocol": 1, "workload": name, "cell": "c", "trial_index": 0, "steps": 2,
                     "config": config, "trial_dir": dir});
    std::fs::write(&cfg, doc.to_string()).unwrap();
    let mut cmd = Command::new(bin(name));
    cmd.args(["run", "--config"])
        .arg(&cfg)
        .arg("--result")
        .arg(dir.join("result.json"))
        .current_dir(dir)
        .env_remove("AORTA_TORCH_PROFILE_OUT");
    if let Some(p) = profile {
        cmd.env("AORTA_TORCH_PROFILE_OUT", p);
    }
    cmd.output().unwrap()
}

fn profile(path: &Path, out: &Output) -> KernelProfile {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "no {}: {e}; stderr: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not a KernelProfile ({e}): {text}"))
}

/// A small CPU config of each workload (their keys differ).
fn tiny(name: &str) -> Value {
    let model = json!({"hidden_size": 32, "num_heads": 4, "ffn_size": 64, "vocab_size": 64});
    match name {
        "inference" => json!({"device": "cpu", "dtype": "fp32", "model": model,
                              "request": {"batch_size": 2, "prompt_len": 4, "generate_tokens": 2}}),
        "llm_determinism" => {
            json!({"device": "cpu", "dtype": "fp32", "seq_len": 8, "batch_size": 2,
                                    "hidden_size": 32, "num_heads": 4, "ffn_size": 64, "vocab_size": 64})
        }
        _ => json!({"device": "cpu", "dtype": "fp32", "seq_len": 8, "model": model}),
    }
}

#[test]
fn each_workload_writes_a_profile_whose_note_says_the_cpu_has_no_cuda_kernels() {
    for name in ["training", "inference", "llm_determinism"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("torch_profile.json");
        let out = run(dir.path(), name, tiny(name), Some(&path));
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = profile(&path, &out);
        assert_eq!(p.tool, "torch_profiler");
        assert!(p.kernels.is_empty(), "{name}: {p:?}");
        // Only a profiler that started and stopped says this (else: why it did not).
        assert_eq!(
            p.note.as_deref(),
            Some("the workload ran on the CPU: no CUDA kernels recorded"),
            "{name}"
        );
        // Written through a temp file beside it, which is gone.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("torch_profile"))
            .collect();
        assert_eq!(names, ["torch_profile.json"]);
    }
}

#[test]
fn a_trial_that_stops_before_its_work_still_writes_a_profile_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torch_profile.json");
    let out = run(
        dir.path(),
        "training",
        json!({"device": "cpu", "batch_size": 0}),
        Some(&path),
    );
    assert_eq!(out.status.code(), Some(2));
    let p = profile(&path, &out);
    assert!(p.kernels.is_empty());
    assert!(
        p.note
            .as_deref()
            .is_some_and(|n| n.starts_with("not started")),
        "{p:?}"
    );
}

#[test]
fn without_the_variable_nothing_is_profiled_and_an_unwritable_path_fails_no_trial() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), "training", tiny("training"), None);
    assert!(out.status.success());
    assert!(!dir.path().join("torch_profile.json").exists());

    // Under a file, so no folder can be made for it.
    let bad = dir.path().join("config.json").join("torch_profile.json");
    let out = run(dir.path(), "training", tiny("training"), Some(&bad));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
    let result: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("result.json")).unwrap()).unwrap();
    assert_eq!(result["passed"], true);
}
