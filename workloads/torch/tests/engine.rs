//! `aorta run --workload training` and a training recipe under `collect: [torch_profiler]` end
//! to end: aorta finds the workload next to itself (cargo puts every binary of the workspace in
//! one folder) and libtorch through `$AORTA_LIBTORCH`.
//! Skipped when the `aorta` binary was not built (`cargo test -p` of this crate alone);
//! `tests/run-all` tests the whole workspace, which builds it.

use std::path::Path;
use std::process::Command;

#[test]
fn aorta_run_training_finds_the_workload_next_to_it() {
    let bins = Path::new(env!("CARGO_BIN_EXE_aorta-workload-training"))
        .parent()
        .unwrap();
    let aorta = bins.join("aorta");
    if !aorta.is_file() {
        eprintln!(
            "skipped: {} not built (cargo test --workspace builds it)",
            aorta.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = r#"{"device": "cpu", "dtype": "fp32", "seq_len": 16, "model": {"hidden_size": 32, "num_heads": 4, "ffn_size": 64, "vocab_size": 64}}"#;
    let out = Command::new(&aorta)
        .args([
            "run",
            "--workload",
            "training",
            "--trials",
            "1",
            "--steps",
            "5",
            "--results-dir",
            "results",
            "--config",
            config,
        ])
        .current_dir(dir.path())
        .env("AORTA_STORE", dir.path().join("store"))
        .env("AORTA_LIBTORCH", env!("AORTA_TORCH_LIB_DIR"))
        .env_remove("AORTA_WORKLOAD_PATH")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("All 1 trial(s) passed"), "{text}");
}

/// A workload recipe's `collect: [torch_profiler]` reaches the workload trials: aorta sets
/// `AORTA_TORCH_PROFILE_OUT`, the training binary writes its profile (on the CPU: none, with
/// the note), the record carries it and matrix.md shows it; a cell with `collect: []` is not
/// profiled. Skipped as the test above when `aorta` was not built.
#[test]
fn a_recipe_collecting_torch_profiler_gets_the_workloads_own_profile() {
    let bins = Path::new(env!("CARGO_BIN_EXE_aorta-workload-training"))
        .parent()
        .unwrap();
    let aorta = bins.join("aorta");
    if !aorta.is_file() {
        eprintln!(
            "skipped: {} not built (cargo test --workspace builds it)",
            aorta.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("r.yaml"),
        "schema_version: 1\nticket: TP\nworkload: training\ntrials: 1\nsteps: 2\ncollect: [torch_profiler]\n\
         workload_config: {device: cpu, dtype: fp32, seq_len: 8, model: {hidden_size: 32, num_layers: 1, num_heads: 4, ffn_size: 64, vocab_size: 64}}\n\
         cells:\n  - {name: baseline, mitigations: [none], environment: local}\n  - {name: plain, mitigations: [none], environment: local, collect: []}\n",
    )
    .unwrap();
    let out = Command::new(&aorta)
        .args(["sweep", "run", "--recipe", "r.yaml", "--output", "out"])
        .current_dir(dir.path())
        .env("AORTA_STORE", dir.path().join("store"))
        .env("AORTA_LIBTORCH", env!("AORTA_TORCH_LIB_DIR"))
        .env_remove("AORTA_WORKLOAD_PATH")
        .env_remove("AORTA_TORCH_PROFILE_OUT")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let run = std::fs::read_dir(dir.path().join("out/TP/training"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let record = |cell: &str| -> serde_json::Value {
        let p = run.join("cells").join(cell).join("trial_0/result.json");
        serde_json::from_slice(
            &std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .unwrap()
    };
    let base = record("baseline");
    assert_eq!(base["verdict"], "pass", "{text}");
    assert_eq!(
        base["profiles"],
        serde_json::json!([{"tool": "torch_profiler", "kernels": [],
                            "note": "the workload ran on the CPU: no CUDA kernels recorded"}])
    );
    assert!(run
        .join("cells/baseline/trial_0/torch_profile.json")
        .is_file());
    let plain = record("plain");
    assert!(
        plain["profiles"].as_array().is_none_or(Vec::is_empty),
        "{plain}"
    );
    assert!(!run.join("cells/plain/trial_0/torch_profile.json").exists());
    assert_ne!(base["key"], plain["key"], "the collectors are keyed");
    let matrix = std::fs::read_to_string(run.join("matrix.md")).unwrap();
    assert!(
        matrix.contains(
            "| baseline | 0 (the workload ran on the CPU: no CUDA kernels recorded) | 0.000 ms"
        ),
        "{matrix}"
    );
}
