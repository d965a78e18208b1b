//! Issue 18, item 4: `kill -9` of aorta mid-trial leaves no process of the trial behind, whatever
//! the trial did to escape (setsid, double fork, `env -i setsid`, a daemonising child), and a
//! build that finds the leftovers of a dead aorta (its keeper killed too) ends them first.
//! Needs cgroup containment (`aorta env containment`); where the machine gives none the tests
//! say so and check only that the fallback is reported.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

/// Each way of escaping, marked by the argument of the `sleep` it leaves running.
const ESCAPES: &str = include_str!("fixtures/escape.sh");

fn containment() -> String {
    let out = common::aorta(&["env", "containment"]);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Running `sleep M.n` processes (not zombies).
fn survivors(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let Ok(cmd) = std::fs::read(format!("/proc/{name}/cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{name}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'));
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if !zombie && cmd.starts_with(&format!("sleep {marker}.")) {
            found.push(format!("{name}: {cmd}"));
        }
    }
    found
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `aorta build` of a one-trial probe recipe wrapping the escape script.
fn start_build(dir: &Path, marker: &str) -> Child {
    std::fs::write(dir.join(".aorta-root"), "").unwrap();
    std::fs::write(dir.join("escape.sh"), ESCAPES).unwrap();
    std::fs::write(
        dir.join("r.yaml"),
        "schema_version: 1\nmode: probe\nticket: CONTAIN-1\ntrials: 1\n\
         mitigation_axis: [none]\ndiagnostic_axis: [none]\n",
    )
    .unwrap();
    Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(dir)
        .env(
            "AORTA_ENV_SNAPSHOT",
            common::repo_root().join("docs/examples/h200-env.json"),
        )
        .args([
            "build",
            "r.yaml",
            "--store",
            "store",
            "--",
            "bash",
            "escape.sh",
            marker,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The running `aorta build`; killed if a failed assertion leaves it running.
struct Build(Child);

impl Drop for Build {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A build mid-trial with its five escapees running (dropping the TempDir ends the workspace).
fn build_with_escapees(marker: &str) -> (tempfile::TempDir, Build) {
    let dir = tempfile::tempdir().unwrap();
    let aorta = Build(start_build(dir.path(), marker));
    wait_for("the five escapees", Duration::from_secs(30), || {
        survivors(marker).len() == 5
    });
    (dir, aorta)
}

/// The keeper: aorta's child named `aorta-keeper`.
fn keeper_of(aorta: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_string_lossy().parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (comm, rest) = stat.split_once(") ")?;
        let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == aorta && comm.ends_with("(aorta-keeper")).then_some(pid)
    })
}

fn kill9(pid: u32) {
    let ok = Command::new("kill").args(["-9", &pid.to_string()]).status();
    assert!(ok.unwrap().success());
}

#[test]
fn kill_9_of_aorta_mid_trial_leaves_no_survivor() {
    let mode = containment();
    if !mode.contains("cgroup v2 per trial") {
        assert!(mode.contains("process tree only ("), "{mode}");
        eprintln!("note: {mode}: the kill -9 guarantee does not hold here; not exercised");
        return;
    }
    let marker = format!("5001{}", std::process::id());
    let (_dir, mut aorta) = build_with_escapees(&marker);
    let pid = aorta.0.id();
    kill9(pid);
    aorta.0.wait().unwrap();
    wait_for("no survivor", Duration::from_secs(5), || {
        survivors(&marker).is_empty()
    });
    // The keeper also removed the dead aorta's cgroups.
    let parent = cgroup_parent(&mode);
    wait_for("the cgroup removed", Duration::from_secs(5), || {
        std::fs::read_dir(&parent).unwrap().flatten().all(|e| {
            !e.file_name()
                .to_string_lossy()
                .starts_with(&format!("aorta.{pid}."))
        })
    });
}

/// The directory holding `aorta.*` cgroups, from `aorta env containment`'s line.
fn cgroup_parent(mode: &str) -> std::path::PathBuf {
    let dir = mode
        .split_once(" under ")
        .and_then(|(_, r)| r.split_once(" (keeper"))
        .map(|(d, _)| std::path::PathBuf::from(d))
        .expect("the cgroup directory");
    dir.parent().unwrap().to_path_buf()
}

#[test]
fn the_next_aorta_ends_what_a_dead_aorta_and_its_keeper_left() {
    let mode = containment();
    if !mode.contains("cgroup v2 per trial") {
        eprintln!("note: {mode}: not exercised");
        return;
    }
    let marker = format!("6001{}", std::process::id());
    let (_dir, mut aorta) = build_with_escapees(&marker);
    let keeper = keeper_of(aorta.0.id()).expect("aorta's keeper");
    kill9(keeper);
    kill9(aorta.0.id());
    aorta.0.wait().unwrap();
    // Nothing ends them now but a sweep: any aorta that sets up containment (another test's
    // included) ends a dead aorta's cgroup first.
    let _ = containment();
    wait_for("no survivor", Duration::from_secs(5), || {
        survivors(&marker).is_empty()
    });
}
