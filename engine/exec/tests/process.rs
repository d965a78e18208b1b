//! Real child processes: exit codes, exec failures, whole-tree teardown, hang monitor,
//! cancellation. Timing margins are generous; no test takes more than ~10 s.

use aorta_exec::{run, CancelToken, HangConfig, ProcessOutcome, ProcessSpec, SpawnError};
use std::path::Path;
use std::time::{Duration, Instant};

fn spec(dir: &Path, argv: &[&str]) -> ProcessSpec {
    ProcessSpec::new(
        argv.iter().copied(),
        dir.join("stdout.log"),
        dir.join("stderr.log"),
    )
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn assert_all_dead(o: &ProcessOutcome) {
    let alive: Vec<_> = o.processes.iter().filter(|p| p.is_alive()).collect();
    assert!(
        alive.is_empty(),
        "still running: {alive:?} (of {:?})",
        o.processes
    );
}

fn hang_cfg(kill: bool) -> HangConfig {
    HangConfig {
        window: Duration::from_secs(1),
        grace: Duration::ZERO,
        poll: Duration::from_millis(200),
        kill_on_hang: kill,
        ..HangConfig::default()
    }
}

#[test]
fn exit_codes_logs_env_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        dir.path(),
        &[
            "sh",
            "-c",
            "printf 'out\\377'; printf err >&2; echo \"$FOO|${HOME:-unset}|$(pwd)\"; exit 3",
        ],
    );
    s.env.insert("FOO".into(), "bar baz".into());
    s.env_remove.push("HOME".into());
    s.cwd = Some(dir.path().to_path_buf());
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(o.launched && !o.timed_out && !o.cancelled && !o.hang_detected);
    assert_eq!(o.exit_code, 3);
    assert!(o.pid.is_some());
    let raw = std::fs::read(dir.path().join("stdout.log")).unwrap();
    assert!(raw.starts_with(b"out\xff"), "raw bytes, not through aorta");
    let cwd = dir.path().canonicalize().unwrap();
    assert!(String::from_utf8_lossy(&raw).contains(&format!("bar baz|unset|{}", cwd.display())));
    assert_eq!(read(dir.path(), "stderr.log"), "err");

    let o = run(
        &spec(dir.path(), &["sh", "-c", "kill -SEGV $$"]),
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(o.exit_code, -11);
    let o = run(&spec(dir.path(), &["true"]), &CancelToken::new()).unwrap();
    assert_eq!(o.exit_code, 0);
    // Started inside aorta's address space, a small short trial has no peak of its own to report
    // (its ru_maxrss may be aorta's); one that touches 300 MiB reports at least that.
    assert_eq!(o.peak_rss_kib, None);
    let o = run(
        &spec(dir.path(), &["python3", "-c", "b = b'x' * (300 << 20)"]),
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(o.exit_code, 0, "{}", read(dir.path(), "stderr.log"));
    assert!(
        o.peak_rss_kib.is_some_and(|k| k >= 300 << 10),
        "{:?}",
        o.peak_rss_kib
    );
}

#[test]
fn stdout_and_stderr_may_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sub/both.log");
    let s = ProcessSpec::new(
        ["sh", "-c", "echo one; echo two >&2; echo three"],
        &log,
        &log,
    );
    run(&s, &CancelToken::new()).unwrap();
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "one\ntwo\nthree\n");
}

#[test]
fn exec_failures_map_to_shell_codes() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        &spec(dir.path(), &["/no/such/program-aorta"]),
        &CancelToken::new(),
    )
    .unwrap();
    assert!(!o.launched);
    assert_eq!(o.exit_code, 127);
    let msg = o.exec_error.unwrap();
    assert!(read(dir.path(), "stderr.log").contains(&msg));

    let script = dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let o = run(
        &spec(dir.path(), &[script.to_str().unwrap()]),
        &CancelToken::new(),
    )
    .unwrap();
    assert!(!o.launched);
    assert_eq!(o.exit_code, 126);
}

#[test]
fn bad_env_is_an_error_before_spawning() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut s = spec(dir.path(), &["touch", marker.to_str().unwrap()]);
    s.env.insert("BAD-NAME".into(), "x".into());
    assert!(matches!(
        run(&s, &CancelToken::new()),
        Err(SpawnError::BadEnvName(_))
    ));
    s.env.clear();
    s.env.insert("OK".into(), "nul\0inside".into());
    assert!(matches!(
        run(&s, &CancelToken::new()),
        Err(SpawnError::NulInEnvValue(_))
    ));
    assert!(!marker.exists());
}

#[test]
fn timeout_kills_the_whole_tree_including_setsid_children() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        dir.path(),
        &["bash", "-c", "sleep 1000 & setsid sleep 1000 & sleep 1000"],
    );
    s.timeout = Some(Duration::from_secs(1));
    s.kill_grace = Duration::from_secs(2);
    let start = Instant::now();
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert!(o.timed_out);
    assert_eq!(o.exit_code, -1);
    assert!(
        o.processes.len() >= 4,
        "bash and three sleeps: {:?}",
        o.processes
    );
    assert_all_dead(&o);
}

#[test]
fn double_forked_daemons_are_found_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("daemon.pid");
    // The subshell exits at once, so the setsid'd daemon is re-parented before any refresh can
    // see its parent link; it is found through aorta's subreaper + trial token.
    let script = format!(
        "(setsid sh -c 'echo $$ > {}; exec sleep 1000' &); (sleep 1000 &); sleep 1000",
        pidfile.display()
    );
    let mut s = spec(dir.path(), &["bash", "-c", &script]);
    s.timeout = Some(Duration::from_millis(800));
    s.kill_grace = Duration::from_secs(2);
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(o.timed_out);
    let daemon: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        o.processes.iter().any(|p| p.pid == daemon),
        "daemon {daemon} not in {:?}",
        o.processes
    );
    assert!(o.processes.len() >= 3, "{:?}", o.processes);
    assert_all_dead(&o);
}

#[test]
fn strays_left_after_a_clean_exit_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        dir.path(),
        &["bash", "-c", "(setsid sleep 1000 &); sleep 1000 & exit 0"],
    );
    s.kill_grace = Duration::from_secs(2);
    let o = run(&s, &CancelToken::new()).unwrap();
    assert_eq!(o.exit_code, 0);
    assert!(!o.timed_out);
    assert!(o.strays_killed >= 2, "{o:?}");
    assert_all_dead(&o);
}

#[test]
fn sigterm_ignorers_get_sigkill_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        dir.path(),
        &["bash", "-c", "trap '' TERM; sleep 1000 & sleep 1000; true"],
    );
    s.timeout = Some(Duration::from_millis(500));
    s.kill_grace = Duration::from_millis(700);
    let start = Instant::now();
    let o = run(&s, &CancelToken::new()).unwrap();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1150),
        "grace was honoured: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert!(o.timed_out);
    assert_all_dead(&o);
}

#[test]
fn hang_is_detected_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), &["sleep", "30"]);
    s.hang = Some(hang_cfg(true));
    s.kill_grace = Duration::from_secs(2);
    s.timeout = Some(Duration::from_secs(20));
    let start = Instant::now();
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    assert!(o.hang_detected && !o.timed_out && !o.cancelled);
    assert_eq!(o.exit_code, -15);
    assert_all_dead(&o);
}

#[test]
fn hang_without_kill_only_flags() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), &["sleep", "30"]);
    s.hang = Some(hang_cfg(false));
    s.timeout = Some(Duration::from_secs(3));
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(o.hang_detected && o.timed_out);
    assert_all_dead(&o);
}

#[test]
fn output_on_stderr_every_100ms_is_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    // stderr only: AORTA watched stdout alone and would call this silent.
    let mut s = spec(
        dir.path(),
        &[
            "bash",
            "-c",
            "for i in $(seq 35); do echo $i >&2; sleep 0.1; done",
        ],
    );
    s.hang = Some(hang_cfg(true));
    s.timeout = Some(Duration::from_secs(20));
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(!o.hang_detected, "{o:?}");
    assert_eq!(o.exit_code, 0);
}

#[test]
fn silent_busy_grandchild_is_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    // `; true` keeps bash as an idle wrapper: only the tree-wide CPU sum sees the busy loop.
    let mut s = spec(
        dir.path(),
        &["bash", "-c", "sh -c \"while :; do :; done\"; true"],
    );
    s.hang = Some(hang_cfg(true));
    s.timeout = Some(Duration::from_secs(4));
    s.kill_grace = Duration::from_secs(2);
    let o = run(&s, &CancelToken::new()).unwrap();
    assert!(o.timed_out);
    assert!(!o.hang_detected, "{o:?}");
    assert_all_dead(&o);
}

#[test]
fn cancel_from_another_thread_stops_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), &["sleep", "100"]);
    s.kill_grace = Duration::from_secs(2);
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        t2.cancel();
        Instant::now()
    });
    let o = run(&s, &token).unwrap();
    let cancelled_at = canceller.join().unwrap();
    assert!(cancelled_at.elapsed() < s.kill_grace + Duration::from_secs(1));
    assert!(o.cancelled && !o.timed_out);
    assert_eq!(o.exit_code, -15);
    assert_all_dead(&o);
    // A cancelled token launches nothing.
    let o = run(&s, &token).unwrap();
    assert!(o.cancelled && !o.launched);
}

#[test]
fn force_cuts_the_grace_short() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), &["bash", "-c", "trap '' TERM; sleep 100; true"]);
    s.kill_grace = Duration::from_secs(30);
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        t2.cancel();
        std::thread::sleep(Duration::from_millis(700));
        t2.force();
        Instant::now()
    });
    let start = Instant::now();
    let o = run(&s, &token).unwrap();
    let forced_at = canceller.join().unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "SIGTERM alone did not stop it"
    );
    assert!(forced_at.elapsed() < Duration::from_secs(2));
    assert!(o.cancelled);
    assert_eq!(o.exit_code, -9);
    assert_all_dead(&o);
}
