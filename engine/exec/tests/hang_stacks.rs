//! Spinning hangs recognised by their stacks, with a real py-spy.
//!
//! py-spy is `$AORTA_PY_SPY` (tests/run-all installs it from PyPI into .cache/py-spy), else
//! found on PATH or in .cache/py-spy/bin. Without it these tests are skipped, unless
//! `AORTA_REQUIRE_PY_SPY=1` (tests/run-all sets it), which makes a missing py-spy a failure.

use aorta_exec::{run, CancelToken, HangConfig, ProcessOutcome, ProcessSpec, HANG_STACKS_FILE};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn find_py_spy() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AORTA_PY_SPY") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let repo_cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/py-spy/bin");
    std::env::split_paths(&path)
        .chain([repo_cache])
        .map(|d| d.join("py-spy"))
        .find(|p| p.is_file())
}

/// The directory holding py-spy, or `None` (test skipped) when there is none.
fn py_spy_dir() -> Option<PathBuf> {
    let Some(bin) = find_py_spy() else {
        if std::env::var_os("AORTA_REQUIRE_PY_SPY").is_some_and(|v| v == "1") {
            panic!("AORTA_REQUIRE_PY_SPY=1 but no py-spy was found ($AORTA_PY_SPY, PATH, .cache/py-spy/bin)");
        }
        eprintln!("SKIPPED: py-spy not found; python3 -m venv .cache/py-spy && .cache/py-spy/bin/pip install py-spy");
        return None;
    };
    Some(bin.parent().unwrap().to_path_buf())
}

/// A parent that spins on the CPU and prints nothing, and a child stuck in a stub collective:
/// the shape of a rank whose peer never joins an all-reduce.
const SPIN_AND_COLLECTIVE: &str = r#"
import subprocess, sys, time
def all_reduce(tensor):
    time.sleep(3600)
if sys.argv[1:] == ["rank1"]:
    all_reduce(None)
subprocess.Popen([sys.executable, __file__, "rank1"])
x = 0
while True:
    x += 1
"#;

/// Busy and quiet, but waiting on nothing: a long CPU-bound step.
const BUSY_QUIET: &str = "x = 0\nwhile True:\n    x += 1\n";

/// Runs `script` with a 1 s hang window, no grace, kill on hang and a `timeout_s` timeout.
fn trial(dir: &Path, script: &str, py_spy: Option<PathBuf>, timeout_s: u64) -> ProcessOutcome {
    let file = dir.join("job.py");
    std::fs::write(&file, script).unwrap();
    let mut s = ProcessSpec::new(
        ["python3".to_string(), file.display().to_string()],
        dir.join("stdout.log"),
        dir.join("stderr.log"),
    );
    s.hang = Some(HangConfig {
        window: Duration::from_secs(1),
        grace: Duration::ZERO,
        poll: Duration::from_millis(200),
        kill_on_hang: true,
        stack_sampling: py_spy.is_some(),
        py_spy_dirs: py_spy.into_iter().collect(),
        ..HangConfig::default()
    });
    s.timeout = Some(Duration::from_secs(timeout_s));
    s.kill_grace = Duration::from_secs(2);
    run(&s, &CancelToken::new()).unwrap()
}

#[test]
fn a_spinning_rank_beside_one_stuck_in_a_collective_is_a_hang_by_its_stacks() {
    let Some(py_spy) = py_spy_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let o = trial(dir.path(), SPIN_AND_COLLECTIVE, Some(py_spy), 15);
    assert!(o.hang_detected && !o.timed_out, "{o:?}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "killed on detection, not at the timeout: {:?}",
        start.elapsed()
    );
    let h = o.hang.as_ref().unwrap();
    assert!(
        h.evidence.starts_with("stacks: pid ") && h.evidence.ends_with("all_reduce (job.py:4)"),
        "{}",
        h.evidence
    );
    // Silent from the start: the first sample a quarter window (here one 200 ms poll) into the
    // quiet stretch, the second a window (1 s) later, when the tree also counts as suspect; so
    // detection comes about 1.25 windows after the hang began (it took 2 windows before).
    assert!(
        h.latched_after >= h.quiet_since + Duration::from_secs(1),
        "{h:?}"
    );
    assert!(
        h.latched_after < h.quiet_since + Duration::from_secs(4),
        "a window and a quarter, plus py-spy's time on a loaded machine: {h:?}"
    );
    let file = std::fs::read_to_string(dir.path().join(HANG_STACKS_FILE)).unwrap();
    assert!(file.starts_with("# hang evidence: stacks: pid "), "{file}");
    assert!(
        file.contains("=== sample 1 at ")
            && file.contains("=== sample 2 at ")
            && file.contains("all_reduce (job.py:4)"),
        "{file}"
    );
}

#[test]
fn without_stack_sampling_the_same_trial_only_times_out() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough for the stacks to have decided (about 3 s) had they been sampled.
    let o = trial(dir.path(), SPIN_AND_COLLECTIVE, None, 5);
    assert!(o.timed_out && !o.hang_detected, "the CPU veto holds: {o:?}");
    assert!(!dir.path().join(HANG_STACKS_FILE).exists());
}

#[test]
fn a_busy_quiet_job_is_not_a_hang_even_with_its_stacks_sampled() {
    let Some(py_spy) = py_spy_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let o = trial(dir.path(), BUSY_QUIET, Some(py_spy), 6);
    assert!(o.timed_out && !o.hang_detected, "{o:?}");
}

#[test]
fn a_sleeping_hang_keeps_its_stacks() {
    let Some(py_spy) = py_spy_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let o = trial(
        dir.path(),
        "import time\ndef barrier():\n    time.sleep(3600)\nbarrier()\n",
        Some(py_spy),
        15,
    );
    assert!(o.hang_detected && !o.timed_out, "{o:?}");
    let h = o.hang.unwrap();
    assert_eq!(h.evidence, "idle vote");
    assert!(
        h.stacks.as_deref().is_some_and(
            |s| s.contains("=== at detection: pid ") && s.contains("barrier (job.py:3)")
        ),
        "{h:?}"
    );
}
