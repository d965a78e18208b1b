//! Containment that needs no cooperation from the trial (contain.rs): a process that leaves its
//! session *and* clears its environment is still the trial's, found through the trial's cgroup.
//! Where this machine gives aorta no cgroup (`aorta env containment` says why) the tests check
//! the fallback says so; on the development and CI machines the cgroup path runs.

use aorta_exec::{containment, run, spawns_into_cgroup, CancelToken, Containment, ProcessSpec};
use std::time::Duration;

/// Pids of running processes whose command line is exactly `sleep MARKER`.
fn sleepers(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'));
        if !zombie && cmd == format!("sleep\0{marker}\0").as_bytes() {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_grandchild_that_clears_its_environment_and_leaves_its_session_is_torn_down() {
    let mode = containment();
    let Containment::Cgroup { dir, .. } = &mode else {
        eprintln!("note: no cgroup containment here ({mode}); the cgroup rule is not exercised");
        return;
    };
    assert!(dir.join("cgroup.procs").exists(), "{}", dir.display());
    let tmp = tempfile::tempdir().unwrap();
    let marker = format!("4001.{}", std::process::id());
    // The subshell exits at once: the escapee is an orphan with no token and its own session
    // before any refresh can see it.
    let script = format!("(env -i setsid sleep {marker} &); sleep 0.3; exit 0");
    let mut s = ProcessSpec::new(
        ["bash", "-c", script.as_str()],
        tmp.path().join("out"),
        tmp.path().join("err"),
    );
    s.kill_grace = Duration::from_secs(2);
    let o = run(&s, &CancelToken::new()).unwrap();
    assert_eq!(o.exit_code, 0);
    assert!(o.strays_killed >= 1, "the escapee is a stray: {o:?}");
    assert!(sleepers(&marker).is_empty(), "escapee survived");
    // The trial's cgroup went back to the pool empty.
    let t0 = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with('t'));
    let t0 = t0.expect("a trial cgroup").path();
    let procs = std::fs::read_to_string(t0.join("cgroup.procs")).unwrap();
    assert!(procs.trim().is_empty(), "{procs}");
}

#[test]
fn without_containment_the_fallback_says_why() {
    let text = containment().to_string();
    match containment() {
        Containment::Cgroup { .. } => assert!(text.contains("even on kill -9"), "{text}"),
        Containment::ProcessTree { why } => assert!(!why.is_empty() && text.contains(&why)),
    }
}

/// The root is in its trial cgroup from its first instruction (created there with
/// `CLONE_INTO_CGROUP`, or written in by the child before it executes the command).
#[test]
fn the_root_starts_inside_its_trial_cgroup() {
    let mode = containment();
    let Containment::Cgroup { dir, .. } = &mode else {
        eprintln!("note: no cgroup containment here ({mode}); nothing to check");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let s = ProcessSpec::new(
        ["cat", "/proc/self/cgroup"],
        tmp.path().join("out"),
        tmp.path().join("err"),
    );
    let o = run(&s, &CancelToken::new()).unwrap();
    assert_eq!(o.exit_code, 0, "{o:?}");
    let text = std::fs::read_to_string(tmp.path().join("out")).unwrap();
    let own = dir.file_name().unwrap().to_string_lossy().into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("0::"))
        .unwrap_or_default();
    let (parent, trial) = line.rsplit_once('/').unwrap_or_default();
    assert!(
        parent.ends_with(&own) && trial.starts_with('t'),
        "{text} (expected …/{own}/t<N>)"
    );
}

/// A trial cgroup that got `cgroup.kill` (a forced teardown) is not handed to the next trial:
/// Linux 6.18 kills every child cloned into such a cgroup before it runs.
#[test]
fn a_trial_after_a_forced_kill_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = ProcessSpec::new(
        ["bash", "-c", "trap '' TERM; sleep 100"],
        tmp.path().join("out1"),
        tmp.path().join("err1"),
    );
    s.kill_grace = Duration::from_secs(30);
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        t2.cancel();
        t2.force();
    });
    let into_before = spawns_into_cgroup();
    let o = run(&s, &token).unwrap();
    canceller.join().unwrap();
    assert_eq!(o.exit_code, -9, "{o:?}");
    for i in 0..3 {
        let out = tmp.path().join(format!("out-{i}"));
        let s = ProcessSpec::new(["echo", "ran"], &out, tmp.path().join("err"));
        let o = run(&s, &CancelToken::new()).unwrap();
        assert_eq!(o.exit_code, 0, "trial {i} after the kill: {o:?}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "ran\n");
    }
    // Not by giving up `clone3`: the killed cgroup was not reused.
    assert_eq!(spawns_into_cgroup(), into_before);
}
