//! The real SIGINT path, alone in its own test binary (it signals the whole process).

use aorta_exec::{install_interrupt_handler, live_trials, run, ProcessSpec};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

fn wait_for(what: &str, limit: Duration, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn first_ctrl_c_cancels_second_kills() {
    let token = install_interrupt_handler().unwrap();
    assert!(!token.is_cancelled());
    let dir = tempfile::tempdir().unwrap();
    // Ignores SIGTERM, so only the second Ctrl-C (SIGKILL) ends it.
    let mut spec = ProcessSpec::new(
        ["bash", "-c", "trap '' TERM; sleep 100; true"],
        dir.path().join("o"),
        dir.path().join("e"),
    );
    spec.kill_grace = Duration::from_secs(30);
    let t = token.clone();
    let runner = std::thread::spawn(move || run(&spec, &t).unwrap());
    wait_for("the trial to start", Duration::from_secs(5), || {
        live_trials() == 1
    });
    std::thread::sleep(Duration::from_millis(200));

    let me = Pid::from_raw(std::process::id() as i32);
    kill(me, Signal::SIGINT).unwrap();
    wait_for("cancel", Duration::from_secs(2), || token.is_cancelled());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        live_trials(),
        1,
        "SIGTERM is ignored: still in its grace period"
    );
    assert!(!token.is_forced());

    let second = Instant::now();
    kill(me, Signal::SIGINT).unwrap();
    let o = runner.join().unwrap();
    assert!(
        second.elapsed() < Duration::from_secs(3),
        "{:?}",
        second.elapsed()
    );
    assert!(token.is_forced());
    assert!(o.cancelled);
    assert_eq!(o.exit_code, -9);
    assert!(o.processes.iter().all(|p| !p.is_alive()));
    assert_eq!(live_trials(), 0);
    // Same token on a second call.
    assert!(install_interrupt_handler().unwrap().is_forced());
}
