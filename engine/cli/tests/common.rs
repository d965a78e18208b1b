#![allow(dead_code)]
use std::path::PathBuf;
use std::process::Output;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs the real `aorta` binary from the repository root.
pub fn aorta(args: &[&str]) -> Output {
    // A recorded snapshot keeps keys in dry-run snapshots the same on every machine.
    assert_cmd::Command::cargo_bin("aorta")
        .unwrap()
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .env_remove("AORTA_STORE")
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        // Workload keys hash the executable: the built-in ones (built beside `aorta` by
        // `cargo test --workspace`, or not) would make keys differ from build to build. These
        // committed symlinks to the pyecho fixture are found first, the same everywhere.
        .env(
            "AORTA_WORKLOAD_PATH",
            repo_root().join("engine/cli/tests/fixtures/stand-in-workloads"),
        )
        .args(args)
        .output()
        .unwrap()
}

/// Exit code and both streams, for snapshots.
pub fn transcript(out: &Output) -> String {
    let mut s = format!(
        "exit: {}\n",
        out.status.code().map_or("signal".into(), |c| c.to_string())
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stdout.is_empty() {
        s.push_str(&format!("--- stdout\n{stdout}"));
    }
    if !stderr.is_empty() {
        s.push_str(&format!("--- stderr\n{stderr}"));
    }
    s
}
