//! Content-addressed execution, end to end with the real binary, real child processes and a
//! real store in a temp dir (issue "Done when" list).
mod common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new(recipe: &str) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("r.yaml"), recipe).unwrap();
        std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
        Ws { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
        c.current_dir(self.path())
            .env("NO_COLOR", "1")
            .env("AORTA_STORE", self.path().join("store"))
            .args(args);
        c
    }
    fn sweep(&self, command: &[&str]) -> Output {
        let mut args = vec![
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--",
        ];
        args.extend_from_slice(command);
        self.cmd(&args).output().unwrap()
    }
    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).unwrap();
    }
    fn matrix(&self) -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.path().join("out/T/matrix.json")).unwrap(),
        )
        .unwrap()
    }
    /// Runs the workload recipe over the pyecho fixture; its one run directory under
    /// `out/<ticket>/pyecho/`.
    fn run_pyecho(&self, ticket: &str) -> PathBuf {
        let out = self
            .cmd(&["sweep", "run", "--recipe", "r.yaml", "--output", "out"])
            .env("AORTA_WORKLOAD_PATH", pyecho_dir())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::transcript(&out));
        let runs: Vec<PathBuf> =
            std::fs::read_dir(self.path().join("out").join(ticket).join("pyecho"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
        let [run] = runs.as_slice() else {
            panic!("one run directory: {runs:?}")
        };
        run.clone()
    }
}

/// (executed, reused) from the summary line.
fn counts(out: &Output) -> (usize, usize) {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("Trials: "))
        .unwrap_or_else(|| {
            panic!(
                "no Trials line in\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T\ntrials: 3\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n";

/// One cell (`none-none`), one trial, with `knobs` (recipe lines) added before `confound:`.
fn one_trial_recipe(knobs: &str) -> String {
    RECIPE
        .replace("trials: 3", "trials: 1")
        .replace(
            "mitigation_axis: [none, cuda_launch_blocking]",
            "mitigation_axis: [none]",
        )
        .replace("confound:", &format!("{knobs}confound:"))
}

fn strip_volatile(v: &mut serde_json::Value) {
    // Timestamps and the ran/reused counts are the only things a cached rerun may change.
    if let Some(o) = v.as_object_mut() {
        for k in ["run_timestamp", "executed", "reused", "cache", "resumed"] {
            o.remove(k);
        }
        for (_, x) in o.iter_mut() {
            strip_volatile(x);
        }
    } else if let Some(a) = v.as_array_mut() {
        for x in a {
            strip_volatile(x);
        }
    }
}

#[test]
fn reruns_execute_only_what_changed() {
    let ws = Ws::new(RECIPE);
    let first = ws.sweep(&["true"]);
    assert!(first.status.success(), "{}", common::transcript(&first));
    assert_eq!(counts(&first), (6, 0));
    let mut m1 = ws.matrix();

    let second = ws.sweep(&["true"]);
    assert_eq!(counts(&second), (0, 6), "a rerun executes nothing");
    let mut m2 = ws.matrix();
    strip_volatile(&mut m1);
    strip_volatile(&mut m2);
    assert_eq!(m1, m2, "a fully cached rerun writes the same matrix");

    // One cell's mitigation changes: only that cell runs.
    ws.write(
        "r.yaml",
        &RECIPE.replace("cuda_launch_blocking", "cuda_device_max_connections_1"),
    );
    assert_eq!(counts(&ws.sweep(&["true"])), (3, 3));

    // trials 3 → 5: only trials 3 and 4 of each cell.
    ws.write("r.yaml", &RECIPE.replace("trials: 3", "trials: 5"));
    assert_eq!(counts(&ws.sweep(&["true"])), (4, 6));

    // The command changes from true to false: everything re-executes and fails.
    let out = ws.sweep(&["false"]);
    assert_eq!(counts(&out), (10, 0));
    let m = ws.matrix();
    for cell in m["cells"].as_array().unwrap() {
        assert_eq!(cell["failed_count"], 5, "{cell}");
    }
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("[fail] none-none: 5 failed of 5 trial(s)")
    );
}

#[test]
fn editing_the_script_reruns_its_trials() {
    let ws = Ws::new(RECIPE);
    ws.write("job.sh", "exit 0\n");
    assert_eq!(counts(&ws.sweep(&["bash", "job.sh"])), (6, 0));
    assert_eq!(counts(&ws.sweep(&["bash", "job.sh"])), (0, 6));
    ws.write("job.sh", "exit 1\n");
    assert_eq!(counts(&ws.sweep(&["bash", "job.sh"])), (6, 0));
}

#[test]
fn a_script_edited_while_its_trials_run_stores_nothing_under_the_old_key() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 1"));
    // The first trial to run edits its own script (once): the trial ran the old content, but
    // the script now differs from what the keys hashed, so no result may be stored under them.
    ws.write(
        "run.sh",
        "[ -e edited ] || { touch edited; echo '# edited' >> run.sh; }\necho ok\n",
    );
    let first = ws.sweep(&["bash", "run.sh"]);
    assert_eq!(
        first.status.code(),
        Some(1),
        "{}",
        common::transcript(&first)
    );
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(
        err.contains("run.sh changed while trial") && err.contains("is not stored"),
        "{err}"
    );
    // Nothing of the old keys was stored: the next build (keyed by the new content) runs both.
    let second = ws.sweep(&["bash", "run.sh"]);
    assert!(second.status.success(), "{}", common::transcript(&second));
    assert_eq!(counts(&second), (2, 0));
    let third = ws.sweep(&["bash", "run.sh"]);
    assert_eq!(counts(&third), (0, 2));
}

#[test]
fn a_corrupt_stored_output_is_quarantined_and_its_trial_re_run_healing_the_store() {
    let ws = Ws::new(&one_trial_recipe(""));
    // Each trial's stdout is its own blob (random bytes after the marker line).
    let cmd = [
        "sh",
        "-c",
        "echo heal-me-please; od -An -tx1 -N8 /dev/urandom",
    ];
    let first = ws.sweep(&cmd);
    assert!(first.status.success(), "{}", common::transcript(&first));
    // Flip one byte of the stored stdout (same size), as a bad disk would.
    fn find(dir: &Path, content: &[u8]) -> Option<PathBuf> {
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                if let Some(f) = find(&p, content) {
                    return Some(f);
                }
            } else if std::fs::read(&p).is_ok_and(|b| b.starts_with(content)) {
                return Some(p);
            }
        }
        None
    }
    let blob = find(&ws.path().join("store/cas"), b"heal-me-please\n").expect("the stdout blob");
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[13] = b'E';
    std::fs::write(&blob, bytes).unwrap();
    // A build into a new directory must read it back: it notices, quarantines the blob, re-runs
    // that trial and succeeds; the store verifies clean afterwards. The recipe now has a second
    // trial, which the first pass executes: the counts cover both passes.
    ws.write(
        "r.yaml",
        &one_trial_recipe("").replace("trials: 1", "trials: 2"),
    );
    let mut args = vec![
        "sweep", "run", "--recipe", "r.yaml", "--output", "out2", "--",
    ];
    args.extend(cmd);
    let second = ws.cmd(&args).output().unwrap();
    assert!(second.status.success(), "{}", common::transcript(&second));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("corrupt blob") && err.contains("re-running the trial to heal the store"),
        "{err}"
    );
    assert_eq!(counts(&second), (2, 0), "{}", common::transcript(&second));
    let out =
        std::fs::read_to_string(ws.path().join("out2/T/none-none/trial_0/stdout.log")).unwrap();
    assert!(out.starts_with("heal-me-please\n"), "{out}");
    let verify = ws.cmd(&["cache", "verify"]).output().unwrap();
    assert!(verify.status.success(), "{}", common::transcript(&verify));
}

#[test]
fn stored_trials_are_placed_as_read_only_links_and_an_edit_through_one_is_never_served() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let ws = Ws::new(&one_trial_recipe(""));
    let cmd = [
        "sh",
        "-c",
        "echo linked-output; od -An -tx1 -N8 /dev/urandom",
    ];
    let into = |dir: &str, place: Option<&str>| {
        let mut args = vec!["sweep", "run", "--recipe", "r.yaml", "--output", dir, "--"];
        args.extend(cmd);
        let mut c = ws.cmd(&args);
        if let Some(p) = place {
            c.env("AORTA_PLACE_OUTPUTS", p);
        }
        c.output().unwrap()
    };
    let stdout_of = |dir: &str| ws.path().join(dir).join("T/none-none/trial_0/stdout.log");
    let first = into("out", None);
    assert_eq!(counts(&first), (1, 0), "{}", common::transcript(&first));
    // Into a new run directory, the stored trial is placed from the store: a link to its blob.
    let second = into("out2", None);
    assert_eq!(counts(&second), (0, 1), "{}", common::transcript(&second));
    let placed = std::fs::metadata(stdout_of("out2")).unwrap();
    assert_eq!(placed.permissions().mode() & 0o777, 0o444);
    assert!(placed.nlink() >= 2, "a link to the store's blob");
    let first_out = std::fs::read_to_string(stdout_of("out")).unwrap();
    assert_eq!(
        std::fs::read_to_string(stdout_of("out2")).unwrap(),
        first_out
    );

    // An edit through the link (root ignores the mode; anyone may chmod it back) reaches the
    // blob. The next placement hashes what it links: the edit is never served, the trial runs
    // again and the store heals.
    std::fs::set_permissions(stdout_of("out2"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // Same size (a size change is caught by the lookup's size check already): only the hash
    // made at placement can tell.
    std::fs::write(stdout_of("out2"), first_out.replacen("linked", "LINKED", 1)).unwrap();
    let third = into("out3", None);
    assert!(third.status.success(), "{}", common::transcript(&third));
    assert_eq!(counts(&third), (1, 0), "{}", common::transcript(&third));
    let err = String::from_utf8_lossy(&third.stderr);
    assert!(err.contains("corrupt blob"), "{err}");
    let healed = std::fs::read_to_string(stdout_of("out3")).unwrap();
    assert!(healed.starts_with("linked-output\n"), "{healed}");
    let verify = ws.cmd(&["cache", "verify"]).output().unwrap();
    assert!(verify.status.success(), "{}", common::transcript(&verify));

    // AORTA_PLACE_OUTPUTS=copy: files of their own, writable; a bad value is bad input.
    let fourth = into("out4", Some("copy"));
    assert_eq!(counts(&fourth), (0, 1), "{}", common::transcript(&fourth));
    let copied = std::fs::metadata(stdout_of("out4")).unwrap();
    assert_eq!(
        (copied.nlink(), copied.permissions().mode() & 0o200),
        (1, 0o200)
    );
    assert_eq!(std::fs::read_to_string(stdout_of("out4")).unwrap(), healed);
    let bad = into("out5", Some("hardlink"));
    assert_eq!(bad.status.code(), Some(2), "{}", common::transcript(&bad));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("AORTA_PLACE_OUTPUTS") && err.contains("copy"),
        "{err}"
    );
}

#[test]
fn a_hung_trial_is_killed_with_its_whole_tree() {
    let ws = Ws::new(&one_trial_recipe("timeout_per_trial: 1\n"));
    let marker = format!("aorta-hang-{}", std::process::id());
    ws.write(
        "hang.sh",
        &format!("sleep 1000 & setsid sleep 1000 & exec -a {marker} sleep 1000\n"),
    );
    let t0 = std::time::Instant::now();
    let out = ws.sweep(&["bash", "hang.sh"]);
    assert!(
        t0.elapsed().as_secs() < 30,
        "teardown took {:?}",
        t0.elapsed()
    );
    assert!(out.status.success(), "{}", common::transcript(&out));
    let m = ws.matrix();
    assert_eq!(
        m["cells"][0]["error_count"], 1,
        "a timeout alone is an error verdict: {}",
        m["cells"][0]
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ps = Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
        .unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let hang_path = ws.path().join("hang.sh");
    let left: Vec<&str> = ps
        .lines()
        .filter(|l| {
            l.contains(&marker)
                || l.contains(&*hang_path.to_string_lossy())
                || l.contains("sleep 1000")
        })
        .collect();
    assert!(
        left.iter().all(|l| !l.contains(&marker)),
        "left running: {left:?}"
    );
}

#[test]
fn kill_on_hang_makes_a_silent_sleeping_trial_a_hang_failure_whose_top_detector_is_the_hang() {
    let ws = Ws::new(&one_trial_recipe(
        "timeout_per_trial: 60\nhang_window_sec: 1\nhang_grace_period_at_start: 0\n",
    ));
    let t0 = std::time::Instant::now();
    let mut c = ws.cmd(&[
        "sweep",
        "run",
        "--recipe",
        "r.yaml",
        "--output",
        "out",
        "--kill-on-hang",
        "--",
        "sleep",
        "1000",
    ]);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", common::transcript(&out));
    assert!(
        t0.elapsed().as_secs() < 30,
        "killed on detection, not at the timeout"
    );
    let cell = &ws.matrix()["cells"][0];
    assert_eq!(cell["failed_count"], 1, "{cell}");
    assert_eq!(cell["top_failure_detector_id"], "tier2:hang", "{cell}");
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("out/T/none-none/trial_0/result.json")).unwrap(),
    )
    .unwrap();
    // The SIGTERM was aorta's: no tier1:exit_nonzero beside the hang.
    assert_eq!(
        record["failure_detectors_fired"],
        serde_json::json!(["tier2:hang"]),
        "{record}"
    );
    assert_eq!(record["verdict"], "fail");
    let md = std::fs::read_to_string(ws.path().join("out/T/matrix.md")).unwrap();
    assert!(
        md.contains("## Failure hints") && md.contains("hang (idle vote), latched "),
        "{md}"
    );
}

#[test]
fn kill_9_mid_build_keeps_completed_trials_and_the_store_verifies() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 20"));
    ws.write("slow.sh", "sleep 0.05\n");
    let mut child = ws
        .cmd(&[
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "bash", "slow.sh",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once a few trials are in the store (polling, so a slow machine does not flake).
    let ac = ws.path().join("store/ac");
    let committed = || walk_count(&ac);
    let t0 = std::time::Instant::now();
    while committed() < 3 && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let verify = ws.cmd(&["cache", "verify"]).output().unwrap();
    assert!(verify.status.success(), "{}", common::transcript(&verify));
    let out = ws.sweep(&["bash", "slow.sh"]);
    let (executed, reused) = counts(&out);
    assert_eq!(executed + reused, 40);
    assert!(
        reused > 0,
        "completed trials must be reused, got {executed} executed / {reused} reused"
    );
    assert!(executed > 0, "the kill should have left work to do");
}

fn walk_count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.filter_map(Result::ok)
            .map(|e| {
                if e.path().is_dir() {
                    walk_count(&e.path())
                } else {
                    1
                }
            })
            .sum()
    })
}

#[test]
fn two_builds_started_together_execute_each_key_once() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 4"));
    let log = ws.path().join("runs.log");
    ws.write(
        "count.sh",
        &format!(
            "echo \"$CUDA_LAUNCH_BLOCKING\" >> {}\nsleep 0.1\n",
            log.display()
        ),
    );
    let spawn = |out: &str| {
        ws.cmd(&[
            "sweep", "run", "--recipe", "r.yaml", "--output", out, "--jobs", "2", "--", "bash",
            "count.sh",
        ])
        .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn("out-a").unwrap());
        let b = s.spawn(|| spawn("out-b").unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    let (ea, ra) = counts(&a);
    let (eb, rb) = counts(&b);
    assert_eq!(
        ea + eb,
        8,
        "each of the 8 keys runs exactly once across both builds"
    );
    assert_eq!(ra + rb, 8);
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(lines, 8, "the command itself ran 8 times");
}

fn pyecho_dir() -> PathBuf {
    common::repo_root().join("tests/fixtures/workloads")
}

#[test]
fn a_python_plugin_speaks_the_workload_protocol() {
    let ws = Ws::new("");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--workload",
            "pyecho",
            "--trials",
            "2",
            "--steps",
            "3",
            "--config",
            "{\"fail_without_fix\": true}",
        ];
        args.extend_from_slice(extra);
        ws.cmd(&args)
            .env("AORTA_WORKLOAD_PATH", pyecho_dir())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    // Failing trials are results: exit 0, as the exit-code table says.
    assert_eq!(out.status.code(), Some(0), "{}", common::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2/2 trials failed"));
    let out = run(&["--extra-env", "PYECHO_FIX=1"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("All 2 trial(s) passed"));
    let again = run(&["--extra-env", "PYECHO_FIX=1"]);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("(0 executed, 2 reused from the cache)"),
        "{}",
        common::transcript(&again)
    );
}

#[test]
fn workload_recipes_run_through_the_protocol() {
    let recipe = "schema_version: 1\nticket: T\nworkload: pyecho\ntrials: 2\nsteps: 4\nworkload_config: {fail_without_fix: true, step_ms: 2}\ncells:\n  - {name: baseline, mitigations: [none], environment: local}\n  - {name: fixed, mitigations: [none], environment: local, extra_env: {PYECHO_FIX: '1'}}\n";
    let ws = Ws::new(recipe);
    let dir = ws.run_pyecho("T");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("matrix.json")).unwrap()).unwrap();
    assert_eq!(m["cells"][0]["failed_count"], 2);
    assert_eq!(m["cells"][1]["passed_count"], 2);
    assert_eq!(m["cells"][1]["step_time_source"], "per_step");
    assert!(dir.join("cells/fixed/trial_1/stdout.log").is_file());
}

/// AORTA 0.3.0's recipe-wide `extra_env` reaches every cell's workload (the fix set there
/// makes both cells pass), and `trial_isolation: in_process` is said, not silently ignored.
#[test]
fn a_recipe_wide_extra_env_reaches_every_cell_and_in_process_is_said() {
    let recipe = "schema_version: 1\nticket: T\nworkload: pyecho\ntrials: 1\nsteps: 2\nworkload_config: {fail_without_fix: true, step_ms: 1}\nextra_env: {PYECHO_FIX: '1'}\ntrial_isolation: in_process\ncells:\n  - {name: baseline, mitigations: [none], environment: local}\n  - {name: other, mitigations: [none], environment: local, extra_env: {OTHER: '1'}}\n";
    let ws = Ws::new(recipe);
    let out = ws
        .cmd(&["sweep", "run", "--recipe", "r.yaml", "--output", "out"])
        .env("AORTA_WORKLOAD_PATH", pyecho_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "trial_isolation: in_process: aorta runs every trial as a process of its own"
        ),
        "{}",
        common::transcript(&out)
    );
    let dir = std::fs::read_dir(ws.path().join("out/T/pyecho"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("matrix.json")).unwrap()).unwrap();
    assert_eq!(m["cells"][0]["passed_count"], 1, "{m}");
    assert_eq!(m["cells"][1]["passed_count"], 1, "{m}");
}

#[test]
fn unknown_workload_is_a_cell_error_not_a_crash() {
    let recipe = "schema_version: 1\nticket: T\nworkload: nope\ntrials: 1\nsteps: 1\ncells:\n  - {name: baseline, mitigations: [none], environment: local}\n";
    let ws = Ws::new(recipe);
    let out = ws
        .cmd(&["sweep", "run", "--recipe", "r.yaml", "--output", "out"])
        .env("AORTA_WORKLOAD_PATH", ws.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = common::transcript(&out);
    assert!(
        text.contains("cell did not run") && text.contains("aorta-workload-nope"),
        "{text}"
    );
}

/// report.html's environment half is made while trials run, against the recipe's baseline.
/// When the automatic baseline did not run (its workload's setup failed) the run moves to
/// another cell; the page then diffs against that one, as `aorta report` does from the run
/// directory.
#[test]
fn report_html_diffs_against_the_baseline_the_run_moved_to() {
    let recipe = "schema_version: 1\nticket: MOVED\nworkload: pyecho\ntrials: 1\nsteps: 1\ncells:\n  - {name: baseline-broken, mitigations: [none], environment: local, workload_config: {setup_fails: true}}\n  - {name: plain, mitigations: [none], environment: local}\n  - {name: fixed, mitigations: [none], environment: local, extra_env: {PYECHO_FIX: \"1\"}}\n";
    let ws = Ws::new(recipe);
    let run = &ws.run_pyecho("MOVED");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("matrix.json")).unwrap()).unwrap();
    assert_eq!(m["baseline_cell"], "plain", "{m}");
    let built = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        built.contains("baseline cell plain → cell fixed: 1 difference(s)"),
        "{built}"
    );
    assert!(!built.contains("baseline cell baseline-broken"), "{built}");

    let again = ws.cmd(&["report", run.to_str().unwrap()]).output().unwrap();
    assert!(again.status.success(), "{}", common::transcript(&again));
    let rendered = std::fs::read_to_string(run.join("report.html")).unwrap();
    let no_time = |s: &str| {
        let i = s.find("<td>Rendered</td><td>").unwrap() + 21;
        format!("{}{}", &s[..i], &s[i + 19..])
    };
    assert_eq!(no_time(&built), no_time(&rendered));
}

/// An executed trial's directory is in the run directory as soon as the trial is done, not
/// only when the build ends: the last trial (after a pause) lists the ones before it.
#[test]
fn each_trial_is_placed_in_the_run_dir_as_it_finishes() {
    let ws = Ws::new(&one_trial_recipe("").replace("trials: 1", "trials: 3"));
    ws.write(
        "job.sh",
        "sleep 0.3; ls out/T/none-none 2>/dev/null; true\n",
    );
    let out = ws.sweep(&["bash", "job.sh"]);
    assert!(out.status.success(), "{}", common::transcript(&out));
    let last =
        std::fs::read_to_string(ws.path().join("out/T/none-none/trial_2/stdout.log")).unwrap();
    assert!(
        last.contains("trial_0") && last.contains("trial_1"),
        "trial 2 saw: {last:?}"
    );
    assert_eq!(
        ws.matrix()["cells"][0]["passed_count"],
        3,
        "{}",
        ws.matrix()
    );
}

#[test]
fn retention_trims_passing_trials_in_the_run_dir_only() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 1").replace(
        "confound:",
        "retain: {on_pass: none, on_fail: full}\nconfound:",
    ));
    ws.write("job.sh", "echo out; [ \"$CUDA_LAUNCH_BLOCKING\" = 1 ]\n");
    let out = ws.sweep(&["bash", "job.sh"]);
    assert!(out.status.success(), "{}", common::transcript(&out));
    let pass_dir = ws.path().join("out/T/cuda_launch_blocking-none/trial_0");
    let fail_dir = ws.path().join("out/T/none-none/trial_0");
    assert!(
        !pass_dir.join("stdout.log").exists(),
        "on_pass: none drops the logs"
    );
    assert!(pass_dir.join("result.json").is_file(), "the record stays");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pass_dir.join("result.json")).unwrap())
            .unwrap();
    assert_eq!(rec["capture"]["retention"]["level"], "none", "{rec}");
    assert!(
        fail_dir.join("stdout.log").is_file(),
        "on_fail: full keeps everything"
    );
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fail_dir.join("result.json")).unwrap())
            .unwrap();
    assert_eq!(
        rec["capture"]["retention"],
        serde_json::json!({"level": "full", "deleted": [], "freed_bytes": 0}),
        "recorded even when nothing was deleted, as AORTA does"
    );
    assert_eq!(rec["env_passthrough_mode"], "inherit", "{rec}");
    // The store still has every output: verify stays clean and a rerun reuses both trials.
    assert!(ws
        .cmd(&["cache", "verify"])
        .output()
        .unwrap()
        .status
        .success());
    assert_eq!(counts(&ws.sweep(&["bash", "job.sh"])), (0, 2));
}

/// A cell env that probe.env cannot hold (a value with a newline) is an error trial without a
/// process, recorded as AORTA records it (tests/compat/exec_parity.py compares it with AORTA).
#[test]
fn a_cell_env_that_probe_env_cannot_hold_is_an_error_trial_recorded_as_aorta_does() {
    let ws = Ws::new(
        &RECIPE
            .replace("trials: 3", "trials: 1\nenv_passthrough_mode: file")
            .replace("cuda_launch_blocking", "two_lines"),
    );
    ws.write(
        "aorta-registry.json",
        r#"{"version": 1, "mitigations": {"two_lines": {"NOTE": "a\nb"}}}"#,
    );
    ws.write("job.sh", "[ -z \"$NOTE\" ] || touch ran\n");
    let out = ws.sweep(&["bash", "job.sh"]);
    assert!(out.status.success(), "{}", common::transcript(&out));
    let dir = ws.path().join("out/T/two_lines-none/trial_0");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    assert_eq!(rec["verdict"], "error", "{rec}");
    assert_eq!(
        rec["error_detectors_fired"],
        serde_json::json!(["meta:env_file_validation_failed"])
    );
    assert_eq!(rec["failure_type"], "env_file_validation_failed");
    assert!(
        rec["error_message"].as_str().unwrap().contains("NOTE"),
        "{rec}"
    );
    assert!(dir.join("stderr.log").is_file() && !dir.join("stdout.log").exists());
    assert!(
        !ws.path().join("ran").exists(),
        "the command never ran for that cell"
    );
}

/// The environment snapshot is part of every key: a tracked variable aorta runs under re-runs
/// everything, an unrelated one re-runs nothing (real probe of this machine).
#[test]
fn a_tracked_env_var_changes_the_env_key_and_an_unrelated_one_does_not() {
    let ws = Ws::new(RECIPE);
    let run = |extra: &[(&str, &str)]| {
        let mut c = ws.cmd(&[
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "true",
        ]);
        c.env_remove("CUDA_DEVICE_MAX_CONNECTIONS")
            .env_remove("AORTA_ENV_SNAPSHOT");
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    assert_eq!(counts(&run(&[])), (6, 0));
    assert_eq!(
        counts(&run(&[])),
        (0, 6),
        "two probes in a row give the same key"
    );
    assert_eq!(
        counts(&run(&[("CUDA_DEVICE_MAX_CONNECTIONS", "1")])),
        (6, 0)
    );
    assert_eq!(
        counts(&run(&[
            ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
            ("AORTA_TEST_UNRELATED", "x")
        ])),
        (0, 6)
    );
    let env: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("out/T/environments/local/env.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(env["env_vars"]["CUDA_DEVICE_MAX_CONNECTIONS"], "1");
    assert_eq!(
        env["keyed_fields"]["env_vars.CUDA_DEVICE_MAX_CONNECTIONS"],
        "1"
    );
    assert_eq!(env["key"].as_str().map(str::len), Some(64));
}

/// The default probe never imports torch; a recipe whose `env_key` names an import-only field
/// (`pytorch.build.flags`) gets a deep probe, and the default key is the same either way. The
/// interpreter is the probe fixture's fake venv python (no torch needed on this machine).
#[test]
fn a_recipe_keying_import_only_fields_gets_a_deep_probe() {
    let ws = Ws::new(RECIPE);
    let py = common::repo_root().join("engine/probe/tests/fixtures/cuda/root/opt/venv/bin/python3");
    let log = ws.path().join("python-runs.log");
    let run = |out: &str| {
        let mut c = ws.cmd(&[
            "sweep",
            "run",
            "--recipe",
            "r.yaml",
            "--output",
            out,
            "--python",
            py.to_str().unwrap(),
            "--",
            "true",
        ]);
        c.env_remove("AORTA_ENV_SNAPSHOT")
            .env("AORTA_PROBE_CACHE", ws.path().join("probe-cache"))
            .env("AORTA_FAKE_PY_LOG", &log);
        c.output().unwrap()
    };
    let env = |out: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(ws.path().join(out).join("T/environments/local/env.json"))
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(counts(&run("plain")), (6, 0));
    let plain = env("plain");
    assert_eq!(plain["schema_version"], "aorta.env/2");
    assert_eq!(plain["pytorch"]["collected"], "files");
    assert_eq!(plain["pytorch"]["version"], "2.11.0+cu130");
    assert_eq!(plain["pytorch"]["build"]["flags"], serde_json::json!({}));
    assert!(plain["keyed_fields"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with("pytorch.build")));

    ws.write(
        "r.yaml",
        &format!("{RECIPE}env_key: {{include: [pytorch.build.flags]}}\n"),
    );
    let out = run("deep");
    assert_eq!(counts(&out), (6, 0), "the key now has the build flags");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning: the recipe's env_key"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deep = env("deep");
    assert_eq!(deep["pytorch"]["collected"], "files+import");
    assert_eq!(deep["keyed_fields"]["pytorch.build.flags.USE_CUDA"], true);
    assert_eq!(
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect::<Vec<_>>(),
        ["files", "deep"]
    );
    // The default-keyed fields are the same in both snapshots.
    let default_keyed = |v: &serde_json::Value| {
        aorta_probe::Snapshot::from_json(&v.to_string())
            .unwrap()
            .key(&Default::default())
    };
    assert_eq!(default_keyed(&plain), default_keyed(&deep));
}

/// Recorded snapshots (`--env-snapshot`): a new driver re-runs, another hostname does not,
/// and a recipe's `env_key` decides.
#[test]
fn recorded_snapshots_and_recipe_env_key_rules() {
    let ws = Ws::new(RECIPE);
    let base: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join("docs/examples/h200-env.json")).unwrap(),
    )
    .unwrap();
    let variant = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = base.clone();
        edit(&mut v);
        ws.write(name, &serde_json::to_string(&v).unwrap());
    };
    variant("a.json", &|_| {});
    variant("host.json", &|v| {
        v["host"]["hostname"] = "another-box".into()
    });
    variant("driver.json", &|v| {
        v["gpu"]["driver_version"] = "590.1".into()
    });
    let run = |snap: &str| {
        ws.cmd(&[
            "sweep",
            "run",
            "--recipe",
            "r.yaml",
            "--output",
            "out",
            "--env-snapshot",
            snap,
            "--",
            "true",
        ])
        .output()
        .unwrap()
    };
    assert_eq!(counts(&run("a.json")), (6, 0));
    assert_eq!(
        counts(&run("host.json")),
        (0, 6),
        "hostnames are never keyed by default"
    );
    assert_eq!(counts(&run("driver.json")), (6, 0), "a new driver re-runs");
    ws.write(
        "r.yaml",
        &format!("{RECIPE}env_key: {{include: [host.hostname], exclude: [gpu.driver_version]}}\n"),
    );
    assert_eq!(counts(&run("a.json")), (6, 0), "the rules changed the key");
    assert_eq!(counts(&run("driver.json")), (0, 6), "driver excluded");
    assert_eq!(counts(&run("host.json")), (6, 0), "hostname included");
    let bad = ws
        .cmd(&[
            "sweep",
            "run",
            "--recipe",
            "r.yaml",
            "--output",
            "out",
            "--env-snapshot",
            "missing.json",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    // The snapshot keys every trial: without it nothing can run, an infrastructure error.
    assert_eq!(
        bad.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.json"));
}

#[test]
fn step_time_regex_reads_step_times_from_the_logs() {
    let recipe = format!("{RECIPE}step_time_regex: 'step \\d+ took ([0-9.]+) ms'\n");
    let ws = Ws::new(&recipe);
    ws.write(
        "steps.sh",
        "echo 'step 1 took 10.5 ms'\necho 'noise'\necho 'step 2 took 11.5 ms' >&2\n",
    );
    let out = ws.sweep(&["sh", "steps.sh"]);
    assert_eq!(
        counts(&out),
        (6, 0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = ws.matrix();
    let cell = &m["cells"][0];
    assert_eq!(cell["step_time_source"], "per_step");
    assert_eq!(
        cell["step_times_ms"],
        serde_json::json!([10.5, 11.5, 10.5, 11.5, 10.5, 11.5])
    );
    assert_eq!(cell["mean_step_time_ms"], serde_json::json!(11.0));
    // Without the regex the same command is timed by its wall clock.
    let ws = Ws::new(RECIPE);
    ws.write("steps.sh", "echo 'step 1 took 10.5 ms'\n");
    ws.sweep(&["sh", "steps.sh"]);
    assert_eq!(
        ws.matrix()["cells"][0]["step_time_source"],
        "wall_clock_total"
    );
}

#[test]
fn gpu_snapshots_give_peak_vram_and_the_vram_growth_warning() {
    let ws = Ws::new("schema_version: 1\nmode: probe\nticket: T\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n");
    let smi = ws.path().join("smi.txt");
    std::fs::write(&smi, "vram=1000,throttle=0").unwrap();
    // The trial "allocates" 700 MiB: the post-exit snapshot reads the file it rewrote.
    ws.write(
        "grow.sh",
        &format!("echo vram=1700,throttle=0 > {}\n", smi.display()),
    );
    let rec = one_trial_under_fake_gpu(&ws, "grow.sh", &format!("@{}", smi.display()));
    assert_eq!(rec["peak_vram_mib"], 1700);
    assert_eq!(
        rec["warn_detectors_fired"],
        serde_json::json!(["tier3:vram_growth"]),
        "{rec:#}"
    );
    assert_eq!(rec["verdict"], "pass", "VRAM growth is advisory");
}

/// Tier 3 off means no GPU readings at all, as in AORTA (the tier "skips its probes"): no
/// `peak_vram_mib`, and no metrics source is loaded for the build.
#[test]
fn tier3_off_takes_no_gpu_readings() {
    let ws = Ws::new("schema_version: 1\nmode: probe\nticket: T\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\ndisable_detector_tiers: [tier3]\n");
    ws.write("slow.sh", "sleep 0.3\n");
    let rec = one_trial_under_fake_gpu(&ws, "slow.sh", "vram=1000,throttle=0");
    assert_eq!(rec["peak_vram_mib"], serde_json::Value::Null, "{rec:#}");
}

/// Runs `sh SCRIPT` as the one trial of `r.yaml` (ticket T) with the amd-smi fake set to `fake`
/// and returns its result.json.
fn one_trial_under_fake_gpu(ws: &Ws, script: &str, fake: &str) -> serde_json::Value {
    let out = ws
        .cmd(&[
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "sh", script,
        ])
        .env("AORTA_PROBE_AMDSMI_FAKE", fake)
        .output()
        .unwrap();
    assert_eq!(
        counts(&out),
        (1, 0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("out/T/none-none/trial_0/result.json")).unwrap(),
    )
    .unwrap()
}

/// Issue 18, item 6: a store this process cannot write is refused, as an infrastructure error
/// (exit 3) that says so, before any trial runs. As root (permission bits do not bind) the store
/// is made read-only by a read-only bind mount in a private mount namespace.
#[test]
fn a_read_only_store_is_refused_before_any_trial_runs() {
    let ws = Ws::new(&one_trial_recipe(""));
    assert!(ws.sweep(&["true"]).status.success());
    let store = ws.path().join("store");
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let mut args: Vec<String> = Vec::new();
    if root {
        args.extend(
            [
                "unshare",
                "-m",
                "sh",
                "-c",
                "mount --bind -o ro \"$0\" \"$0\" && exec \"$@\"",
            ]
            .map(String::from),
        );
        args.push(store.display().to_string());
    } else {
        let ok = Command::new("chmod")
            .args(["-R", "a-w"])
            .arg(&store)
            .status();
        assert!(ok.unwrap().success());
    }
    args.push(assert_cmd::cargo::cargo_bin("aorta").display().to_string());
    args.extend(
        [
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "touch", "ran",
        ]
        .map(String::from),
    );
    let out = Command::new(&args[0])
        .args(&args[1..])
        .current_dir(ws.path())
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", &store)
        .output()
        .unwrap();
    if !root {
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(&store)
            .status();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("is not writable"), "{err}");
    assert!(!ws.path().join("ran").exists(), "a trial ran");
}

/// A command whose program exists nowhere is said once, before any trial runs (each trial then
/// ends in error, as it would anywhere); one that exists is not.
#[test]
fn a_missing_program_is_said_once_before_the_trials() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 2"));
    let out = ws.sweep(&["/nonexistent/prog", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("aorta: warning: the command's program \"/nonexistent/prog\" is not an executable file here nor on PATH").count(),
        1,
        "{}",
        common::transcript(&out)
    );
    let ok = ws.sweep(&["true"]);
    assert!(!String::from_utf8_lossy(&ok.stderr).contains("aorta: warning"));
}

/// `-q` prints nothing on stdout (the exit code says how it went); without `-v` the summary
/// ends with AORTA's tip, with `-v` it does not (each trial's line was streamed), and `-vv`
/// adds each trial's key. `-q -v` is a usage error.
#[test]
fn quiet_verbose_and_the_tip() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 1"));
    let run = |flags: &[&str]| {
        let mut args = vec!["sweep", "run", "--recipe", "r.yaml", "--output", "out"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--rerun", "all", "--", "true"]);
        ws.cmd(&args).output().unwrap()
    };
    let tip = "Tip: re-run with -v to stream per-cell progress live.";
    let plain = run(&[]);
    assert_eq!(
        plain.status.code(),
        Some(0),
        "{}",
        common::transcript(&plain)
    );
    assert!(String::from_utf8_lossy(&plain.stdout).contains(tip));
    let quiet = run(&["-q"]);
    assert_eq!(
        quiet.status.code(),
        Some(0),
        "{}",
        common::transcript(&quiet)
    );
    assert_eq!(String::from_utf8_lossy(&quiet.stdout), "");
    let v = run(&["-v"]);
    let (out, err) = (
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr),
    );
    assert!(!out.contains("Tip:"), "{out}");
    assert!(err.contains("[ran]    none-none trial 0: pass"), "{err}");
    assert!(!err.contains("  key "), "{err}");
    let vv = run(&["-vv"]);
    let err = String::from_utf8_lossy(&vv.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("[ran]    none-none trial 0: pass") && l.contains("  key ")),
        "{err}"
    );
    let both = run(&["-q", "-v"]);
    assert_eq!(both.status.code(), Some(2), "{}", common::transcript(&both));
}

/// A run directory rebuilt from an edited recipe holds the new matrix only: the cell and the
/// trials the recipe no longer has are removed (so a bundle of it has none of them), files
/// aorta did not write are left alone, and the build says what it removed.
#[test]
fn an_edited_recipe_leaves_no_cells_or_trials_of_the_earlier_matrix() {
    let ws = Ws::new(RECIPE);
    let first = ws.sweep(&["true"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        common::transcript(&first)
    );
    let run = ws.path().join("out/T");
    assert!(run
        .join("cuda_launch_blocking-none/trial_2/result.json")
        .is_file());
    ws.write("out/T/notes.txt", "mine");
    ws.write(
        "r.yaml",
        &RECIPE
            .replace("trials: 3", "trials: 1")
            .replace("[none, cuda_launch_blocking]", "[none]"),
    );
    let second = ws.sweep(&["true"]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        common::transcript(&second)
    );
    assert!(!run.join("cuda_launch_blocking-none").exists());
    assert!(run.join("none-none/trial_0/result.json").is_file());
    assert!(!run.join("none-none/trial_1").exists());
    assert!(!run.join("none-none/trial_2").exists());
    assert!(run.join("notes.txt").is_file());
    assert!(
        err.contains("aorta: removed 5 path(s) an earlier matrix left in"),
        "{err}"
    );
    // Nothing stale the next time.
    let third = ws.sweep(&["true"]);
    assert!(!String::from_utf8_lossy(&third.stderr).contains("removed"));
}

/// `--json` without `--dry-run`: stdout is one JSON line per target with the counts, each
/// cell's outcome and the run's answer (what CI reads), and nothing else; on a fully cached
/// rebuild the answer is the same.
#[test]
fn build_json_states_the_answer() {
    let ws = Ws::new(&RECIPE.replace("trials: 3", "trials: 4"));
    let cmd = ["sh", "-c", "test \"$CUDA_LAUNCH_BLOCKING\" = 1"];
    let run = || {
        let mut args = vec![
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--json", "--",
        ];
        args.extend_from_slice(&cmd);
        ws.cmd(&args).output().unwrap()
    };
    for (round, executed) in [(0, 8), (1, 0)] {
        let out = run();
        assert_eq!(out.status.code(), Some(0), "{}", common::transcript(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "round {round}: {stdout}");
        let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(j["exit_code"], 0);
        assert_eq!(j["executed"], executed, "round {round}");
        assert_eq!(j["cells"].as_array().unwrap().len(), 2);
        let answer = &j["answer"];
        assert_eq!(answer["baseline"]["cell"], "none-none");
        assert_eq!(answer["cells"][0]["cell"], "cuda_launch_blocking-none");
        assert_eq!(
            answer["cells"][0]["call"], "fixes",
            "round {round}: {answer}"
        );
        assert!(
            answer["headline"]
                .as_str()
                .unwrap()
                .contains("cuda_launch_blocking"),
            "{answer}"
        );
    }
    // `cache stats --json`: the store's counts as one object (8 trials, the artifacts).
    let stats = ws.cmd(&["cache", "stats", "--json"]).output().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert!(j["ac_entries"].as_u64().unwrap() >= 8, "{j}");
    assert!(j["blob_bytes"].as_u64().unwrap() > 0, "{j}");
    assert!(j["store"].as_str().unwrap().ends_with("store"), "{j}");
    // `explain --json`: a built trial is cached, and its key's inputs are JSON, not text.
    let mut args = vec![
        "explain",
        "r.yaml",
        "--cell",
        "none-none",
        "--trial",
        "0",
        "--json",
        "--",
    ];
    args.extend_from_slice(&cmd);
    let out = ws.cmd(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::transcript(&out));
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["status"]["store"], "cached", "{e}");
    assert_eq!(e["key"].as_str().unwrap().len(), 64, "{e}");
    assert!(e["key_inputs"]["key_schema"].is_number(), "{e}");
}

/// A failing workload trial is classified like a command trial: the HIP illegal-memory-access
/// line in its stderr is its top detector in matrix.json (the verdict stays the workload's).
#[test]
fn a_failing_workload_trial_names_its_detector() {
    let recipe = "schema_version: 1\nticket: W\nworkload: pyecho\ntrials: 1\nsteps: 2\nworkload_config: {fail_without_fix: true, step_ms: 1, stderr_line: 'HIP error: an illegal memory access was encountered'}\ncells:\n  - {name: baseline, mitigations: [none], environment: local}\n";
    let ws = Ws::new(recipe);
    let dir = ws.run_pyecho("W");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("matrix.json")).unwrap()).unwrap();
    let cell = &m["cells"][0];
    assert_eq!(cell["failed_count"], 1, "{cell}");
    let top = cell["top_failure_detector_id"].as_str().unwrap_or("");
    assert!(top.starts_with("tier4:"), "{cell}");
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("cells/baseline/trial_0/result.json")).unwrap(),
    )
    .unwrap();
    let fired = record["failure_detectors_fired"].to_string();
    assert!(fired.contains("illegal_memory_access"), "{fired}");
    assert_eq!(record["verdict"], "fail");
}

/// A corrupt blob that several stored trials share (the same stdout): the first trial that
/// reads it quarantines it, the others then find their entries unusable too, and all of them
/// are re-run in the same build, which exits 0 and leaves a store that verifies.
#[test]
fn a_corrupt_blob_shared_by_several_trials_heals_in_one_build() {
    let ws = Ws::new(&one_trial_recipe("").replace("trials: 1", "trials: 4"));
    let cmd = ["sh", "-c", "echo shared-output-line"];
    let first = ws.sweep(&cmd);
    assert!(first.status.success(), "{}", common::transcript(&first));
    let mut blob = None;
    for shard in std::fs::read_dir(ws.path().join("store/cas"))
        .unwrap()
        .flatten()
    {
        for f in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if std::fs::read(f.path()).is_ok_and(|b| b == b"shared-output-line\n") {
                blob = Some(f.path());
            }
        }
    }
    let blob = blob.expect("the shared stdout blob");
    std::fs::write(&blob, b"shared-output-linE\n").unwrap();
    let mut args = vec![
        "sweep", "run", "--recipe", "r.yaml", "--output", "out2", "--",
    ];
    args.extend(cmd);
    let second = ws.cmd(&args).output().unwrap();
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        common::transcript(&second)
    );
    for i in 0..4 {
        let out = std::fs::read_to_string(
            ws.path()
                .join(format!("out2/T/none-none/trial_{i}/stdout.log")),
        )
        .unwrap();
        assert_eq!(out, "shared-output-line\n");
    }
    let verify = ws.cmd(&["cache", "verify"]).output().unwrap();
    assert!(verify.status.success(), "{}", common::transcript(&verify));
}
