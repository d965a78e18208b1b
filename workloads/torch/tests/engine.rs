//! `aorta run --workload training` end to end: aorta finds the workload next to itself (cargo
//! puts every binary of the workspace in one folder) and libtorch through `$AORTA_LIBTORCH`.
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
