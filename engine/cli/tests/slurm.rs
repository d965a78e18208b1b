//! `--executor slurm` against a real one-node Slurm cluster on loopback (Debian's slurmctld,
//! slurmd and munge, started by tests/slurm-cluster.sh with 4 fake GPUs): trials fan out as
//! job arrays, land in the store, and the failure rules hold (an interrupted task is
//! resubmitted, a failed one is a result, Ctrl-C cancels, --detach leaves them running).
//!
//! The commands come from `$AORTA_SLURM_BIN` or tests/install-slurm.sh; where neither works the
//! tests skip, unless `AORTA_REQUIRE_SLURM=1` (tests/run-all sets it: CI never skips).

mod common;

use common::{files_under, repo_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One cluster at a time: the machine has few cores, and the daemons log per cluster.
static SERIAL: Mutex<()> = Mutex::new(());

struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn up() -> Option<Cluster> {
        Cluster::up_with(&[])
    }

    /// A cluster whose `tests/slurm-cluster.sh up` saw `envs` (AORTA_TEST_SLURM_* settings).
    fn up_with(envs: &[(&str, &str)]) -> Option<Cluster> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(repo_root().join("tests/slurm-cluster.sh"))
            .arg("up")
            .arg(dir.path().join("cluster"))
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let value = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(PathBuf::from)
        };
        match (
            out.status.success(),
            value("SLURM_CONF="),
            value("PATH_PREPEND="),
        ) {
            (true, Some(conf), Some(bin)) => Some(Cluster { dir, bin, conf }),
            _ => {
                let why = String::from_utf8_lossy(&out.stderr);
                if std::env::var("AORTA_REQUIRE_SLURM").as_deref() == Ok("1") {
                    panic!("no Slurm cluster (AORTA_REQUIRE_SLURM=1): {why}");
                }
                eprintln!("skipping: no Slurm cluster here ({why})");
                None
            }
        }
    }

    fn work(&self) -> PathBuf {
        let w = self.dir.path().join("work");
        std::fs::create_dir_all(&w).unwrap();
        std::fs::write(w.join(".aorta-root"), "").unwrap();
        w
    }

    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `aorta ARGS` in the work folder, with the cluster's config and a short poll interval.
    fn aorta(&self, args: &[&str]) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
        c.current_dir(self.work())
            .env("SLURM_CONF", &self.conf)
            .env("PATH", self.path())
            .env("NO_COLOR", "1")
            .env("AORTA_SLURM_POLL_INTERVAL", "0.3")
            .env_remove("AORTA_EXECUTOR")
            .env_remove("AORTA_SLURM_AORTA")
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// squeue's `JOBID STATE` rows for every job the cluster has seen (MinJobAge is long).
    fn jobs(&self) -> Vec<(String, String)> {
        let out = Command::new(self.bin.join("squeue"))
            .env("SLURM_CONF", &self.conf)
            .args(["--states=all", "--array", "--noheader", "--format=%i %T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?.to_owned(), f.next()?.to_owned()))
            })
            .collect()
    }

    /// The jobs once none is COMPLETING (a task stays so for a moment after it ended or was
    /// cancelled, while its epilog runs), so a test reads final states.
    fn settled(&self) -> Vec<(String, String)> {
        self.wait_for("the tasks to settle", |j| {
            j.iter()
                .all(|(_, s)| s != "COMPLETING" && s != "CONFIGURING")
        });
        self.jobs()
    }

    /// Stops slurmctld (SIGTERM, as an admin's restart does) and waits until it is gone.
    fn stop_controller(&self) {
        let pid_file = self.dir.path().join("cluster/slurmctld.pid");
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_owned();
        assert!(Command::new("kill").arg(&pid).status().unwrap().success());
        let until = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{pid}")).exists() {
            assert!(Instant::now() < until, "slurmctld {pid} did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts slurmctld again from its saved state (no `-c`: the jobs are recovered).
    fn start_controller(&self) {
        let st = Command::new(self.bin.join("slurmctld"))
            .arg("-i")
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Waits until `pred` holds of the jobs (60 s at most).
    fn wait_for(&self, what: &str, pred: impl Fn(&[(String, String)]) -> bool) {
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if pred(&self.jobs()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("timed out waiting for {what}: {:?}", self.jobs());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("tests/slurm-cluster.sh"))
            .arg("down")
            .arg(self.dir.path().join("cluster"))
            .stdin(Stdio::null())
            .output();
    }
}

fn write_recipe(dir: &Path, trials: u32, mitigations: &str, gpus: u32) -> PathBuf {
    let p = dir.join("probe.yaml");
    std::fs::write(
        &p,
        format!(
            "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: {trials}\n\
             mitigation_axis: [{mitigations}]\ndiagnostic_axis: [none]\ngpus_per_trial: {gpus}\n"
        ),
    )
    .unwrap();
    p
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const BUILD: &[&str] = &[
    "build",
    "probe.yaml",
    "--executor",
    "slurm",
    "--store",
    "store",
];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a: Vec<&str> = BUILD.to_vec();
    a.extend_from_slice(extra);
    a
}

#[test]
fn two_cells_of_five_trials_run_as_arrays_with_two_gpus_each_and_a_rebuild_executes_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 5, "none, tf32_off", 2);
    let cmd = ["--", "sh", "-c", "echo \"gpus=$CUDA_VISIBLE_DEVICES\""];
    let out = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Trials: 10 executed, 0 reused"),
        "{}",
        text(&out)
    );
    // Every task saw its own two of the four fake GPUs.
    let mut seen = 0;
    for cell in ["none-none", "tf32_off-none"] {
        for t in 0..5 {
            let log = work.join(format!(
                "probe_results/SLURM-TEST/{cell}/trial_{t}/stdout.log"
            ));
            let log = std::fs::read_to_string(&log).unwrap();
            assert!(
                log.contains("gpus=0,1") || log.contains("gpus=2,3"),
                "{cell} trial {t}: {log}"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 10);
    // One array of ten tasks (one resource shape), each completed once.
    let jobs = cluster.settled();
    assert_eq!(jobs.len(), 10, "{jobs:?}");
    assert!(
        jobs.iter()
            .all(|(id, s)| id.starts_with("1_") && s == "COMPLETED"),
        "{jobs:?}"
    );

    let again = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 0 executed, 10 reused"),
        "{}",
        text(&again)
    );
    assert_eq!(cluster.jobs().len(), 10, "the rebuild submitted nothing");
    let submitted = std::fs::read_dir(work.join("store/slurm/submitted"))
        .unwrap()
        .count();
    assert_eq!(submitted, 0, "every submission was collected");
}

#[test]
fn a_task_cancelled_mid_run_as_if_preempted_is_resubmitted_once_and_completes() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 1, "none", 1);
    // The first attempt leaves a mark and hangs; the resubmitted one finds it and finishes.
    let mark = work.join("first-attempt");
    let script = format!(
        "if [ -e {m} ]; then echo second; else touch {m}; sleep 60; fi",
        m = mark.display()
    );
    let child = cluster
        .aorta(&args(&["--", "sh", "-c", &script]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    cluster.wait_for("the first attempt to run", |j| {
        j.iter().any(|(_, s)| s == "RUNNING")
    });
    let until = Instant::now() + Duration::from_secs(30);
    while !mark.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = Command::new(cluster.bin.join("scancel"))
        .env("SLURM_CONF", &cluster.conf)
        .arg("1")
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is CANCELLED; submitting it again (attempt 2 of 3)"),
        "{}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Trials: 1 executed"),
        "{}",
        text(&out)
    );
    let jobs = cluster.settled();
    assert_eq!(
        jobs.len(),
        2,
        "one cancelled task, one resubmission: {jobs:?}"
    );
    assert!(
        jobs.contains(&("1_0".into(), "CANCELLED".into())),
        "{jobs:?}"
    );
    assert!(
        jobs.contains(&("2_0".into(), "COMPLETED".into())),
        "{jobs:?}"
    );
    let log = work.join("probe_results/SLURM-TEST/none-none/trial_0/stdout.log");
    assert_eq!(std::fs::read_to_string(log).unwrap().trim(), "second");
}

#[test]
fn a_failed_task_is_a_failure_not_a_retry() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 2, "none", 1);
    // Tasks whose aorta exits 1 end FAILED in Slurm.
    let out = cluster
        .aorta(&args(&["--", "true"]))
        .env("AORTA_SLURM_AORTA", "/bin/false")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("ended FAILED without a result").count(),
        2,
        "{}",
        text(&out)
    );
    assert!(!stderr.contains("submitting it again"), "{}", text(&out));
    let jobs = cluster.settled();
    assert_eq!(jobs.len(), 2, "no resubmission: {jobs:?}");
    assert!(jobs.iter().all(|(_, s)| s == "FAILED"), "{jobs:?}");
}

#[test]
fn ctrl_c_cancels_the_arrays_and_forgets_the_submissions() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 3, "none", 1);
    let child = cluster
        .aorta(&args(&["--", "sleep", "60"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    cluster.wait_for("the tasks to run", |j| {
        j.iter().filter(|(_, s)| s == "RUNNING").count() == 3
    });
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    cluster.wait_for("the tasks to be cancelled", |j| {
        j.len() == 3 && j.iter().all(|(_, s)| s == "CANCELLED")
    });
    let submitted = std::fs::read_dir(work.join("store/slurm/submitted"))
        .unwrap()
        .count();
    assert_eq!(submitted, 0);
}

#[test]
fn detach_returns_at_once_and_a_later_build_collects_without_resubmitting() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 3, "none", 1);
    let cmd = ["--", "sh", "-c", "sleep 2; echo done"];
    let out = cluster
        .aorta(&args(&[&["--detach"][..], &cmd[..]].concat()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("3 trial(s) left running on Slurm"),
        "{}",
        text(&out)
    );
    assert!(!work.join("probe_results/SLURM-TEST/matrix.md").exists());
    let later = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(later.status.success(), "{}", text(&later));
    assert!(
        String::from_utf8_lossy(&later.stdout).contains("Trials: 3 executed, 0 reused"),
        "{}",
        text(&later)
    );
    assert!(work.join("probe_results/SLURM-TEST/matrix.md").exists());
    let jobs = cluster.jobs();
    assert_eq!(jobs.len(), 3, "nothing resubmitted: {jobs:?}");
}

#[test]
fn a_bad_executor_setting_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
    write_recipe(dir.path(), 1, "none", 1);
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(dir.path())
        .env("AORTA_EXECUTOR", "kubernetes")
        .args(["build", "probe.yaml", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown executor"),
        "{}",
        text(&out)
    );
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(dir.path())
        .env_remove("AORTA_EXECUTOR")
        .args(["build", "probe.yaml", "--detach", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn resources_are_in_the_plan_and_in_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
    let plan = |gpus: u32| {
        write_recipe(dir.path(), 2, "none", gpus);
        let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
            .current_dir(dir.path())
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .args(["build", "probe.yaml", "--dry-run", "--json", "--", "true"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let cell = &v["cells"][0];
        (
            cell["resources"]["gpus_per_trial"].clone(),
            cell["key_inputs"]["trial_keys"].clone(),
        )
    };
    let (one, keys_one) = plan(1);
    let (two, keys_two) = plan(2);
    assert_eq!((one, two), (1.into(), 2.into()));
    // How many GPUs a trial gets can change its verdict (docs/cache-keys.md).
    assert_ne!(keys_one, keys_two, "gpus_per_trial is a key input");
}

#[test]
fn the_local_executor_gives_each_trial_gpus_per_trial_devices() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
    write_recipe(dir.path(), 4, "none", 2);
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(dir.path())
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_EXECUTOR")
        .args([
            "build",
            "probe.yaml",
            "--store",
            "store",
            "--gpus",
            "0,1,2,3",
        ])
        .args(["--", "sh", "-c", "echo \"gpus=$CUDA_VISIBLE_DEVICES\""])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    for t in 0..4 {
        let log = dir.path().join(format!(
            "probe_results/SLURM-TEST/none-none/trial_{t}/stdout.log"
        ));
        let log = std::fs::read_to_string(log).unwrap();
        let ids = log.trim().trim_start_matches("gpus=");
        assert_eq!(ids.split(',').count(), 2, "trial {t}: {log}");
    }
}

/// The `result.json` fields that say how a trial ended.
fn ending(run_dir: &Path) -> serde_json::Value {
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("none-none/trial_0/result.json")).unwrap(),
    )
    .unwrap();
    serde_json::json!({
        "verdict": r["verdict"], "exit_status": r["exit_status"], "exit_code": r["exit_code"],
        "timed_out": r["timed_out"], "failure": r["failure_detectors_fired"],
        "error": r["error_detectors_fired"], "type": r["result"]["failure_details"][0]["type"],
    })
}

#[test]
fn a_time_or_memory_limit_kill_is_the_trials_result_recorded_as_a_local_one_and_reused() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    // Memory: the cluster enforces --mem by polling (OverMemoryKill), which ends the task
    // FAILED with slurmstepd's "exceeded memory limit" line.
    let recipe = work.join("probe.yaml");
    let hog = "python3 -c 'x = b\"x\" * (400 << 20); import time; time.sleep(30)'";
    std::fs::write(
        &recipe,
        "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: 1\nmitigation_axis: [none]\n\
         diagnostic_axis: [none]\ngpus_per_trial: 0\nmem_per_trial: 64M\n",
    )
    .unwrap();
    let out = cluster
        .aorta(&args(&["--", "sh", "-c", hog]))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Trials: 1 executed, 0 reused"),
        "{}",
        text(&out)
    );
    let run = work.join("probe_results/SLURM-TEST");
    let oom = ending(&run);
    assert_eq!(oom["exit_code"], -9, "as the OOM killer's SIGKILL: {oom}");
    assert_eq!(oom["verdict"], "fail", "{oom}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("none-none/trial_0/result.json")).unwrap())
            .unwrap();
    assert_eq!(
        r["capture"]["scheduler_state"],
        "FAILED (exceeded its memory limit)"
    );
    let log = std::fs::read_to_string(run.join("none-none/trial_0/slurm-task.log")).unwrap();
    assert!(log.contains("exceeded memory limit"), "{log}");
    let again = cluster
        .aorta(&args(&["--", "sh", "-c", hog]))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 0 executed, 1 reused"),
        "{}",
        text(&again)
    );
    assert_eq!(cluster.jobs().len(), 1, "the rebuild submitted nothing");
    // The same record as a trial the kernel's OOM killer takes (SIGKILL) on the local executor.
    std::fs::write(
        &recipe,
        "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: 1\nmitigation_axis: [none]\n\
         diagnostic_axis: [none]\n",
    )
    .unwrap();
    let local = cluster
        .aorta(&[
            "build",
            "probe.yaml",
            "--store",
            "store",
            "--",
            "sh",
            "-c",
            "kill -9 $$",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&local.stdout).contains("Trials: 1 executed"),
        "{}",
        text(&local)
    );
    assert_eq!(oom, ending(&run), "a Slurm memory kill as a local SIGKILL");

    // Time: Slurm's shortest limit is a minute, and slurmctld checks limits every 30 s.
    std::fs::write(
        &recipe,
        "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: 1\nmitigation_axis: [none]\n\
         diagnostic_axis: [none]\ngpus_per_trial: 0\ntime_limit: 1\n",
    )
    .unwrap();
    let out = cluster
        .aorta(&args(&["--", "sleep", "600"]))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Trials: 1 executed, 0 reused"),
        "{}",
        text(&out)
    );
    let slurm = ending(&run);
    let log = std::fs::read_to_string(run.join("none-none/trial_0/slurm-task.log")).unwrap();
    assert!(log.contains("DUE TO TIME LIMIT"), "{log}");
    let again = cluster
        .aorta(&args(&["--", "sleep", "600"]))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 0 executed, 1 reused"),
        "{}",
        text(&again)
    );
    assert_eq!(cluster.jobs().len(), 2, "the rebuild submitted nothing");
    // The same trial timed out by the local executor reads the same.
    std::fs::write(
        &recipe,
        "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: 1\nmitigation_axis: [none]\n\
         diagnostic_axis: [none]\ntimeout_per_trial: 1\n",
    )
    .unwrap();
    let local = cluster
        .aorta(&[
            "build",
            "probe.yaml",
            "--store",
            "store",
            "--",
            "sleep",
            "600",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&local.stdout).contains("Trials: 1 executed"),
        "{}",
        text(&local)
    );
    assert_eq!(slurm, ending(&run), "Slurm's TIMEOUT as a local timeout");
    assert_eq!(slurm["timed_out"], true);
}

#[test]
fn stop_after_cancels_the_tasks_past_the_stop_point_and_the_rebuild_reuses_the_cell() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    std::fs::write(
        work.join("probe.yaml"),
        "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: 4\nmitigation_axis: [none]\n\
         diagnostic_axis: [none]\ngpus_per_trial: 0\n\
         stop_after: {events: 1, max_trials: 4, event_verdict: fail}\n",
    )
    .unwrap();
    // All four tasks start at once; each finds its trial index in the array's manifest.
    // Trial 0 passes, trial 1 fails (the event), trials 2 and 3 would run for ten minutes.
    let script = "import glob, json, os, sys, time\n\
                  m = json.load(open(glob.glob('store/slurm/arrays/*/manifest.json')[0]))\n\
                  i = m['trials'][int(os.environ['SLURM_ARRAY_TASK_ID'])]['index']\n\
                  print('trial', i)\n\
                  sys.exit(0) if i == 0 else sys.exit(1) if i == 1 else time.sleep(600)\n";
    let cmd = ["--", "python3", "-c", script];
    let started = Instant::now();
    let out = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the sleeping tasks were cancelled: {}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Trials: 2 executed, 0 reused"),
        "{}",
        text(&out)
    );
    let run = work.join("probe_results/SLURM-TEST/none-none");
    assert!(run.join("trial_1").exists(), "{}", text(&out));
    assert!(!run.join("trial_2").exists(), "{}", text(&out));
    // A cancelled task is COMPLETING for a moment after scancel returns (the clean-clone CI
    // saw it): wait for every task to reach its final state before reading them.
    cluster.wait_for("the tasks to settle", |j| {
        j.len() == 4
            && j.iter().all(|(_, s)| {
                !matches!(
                    s.as_str(),
                    "COMPLETING" | "RUNNING" | "PENDING" | "CONFIGURING" | "SUSPENDED"
                )
            })
    });
    let mut states: Vec<String> = cluster.settled().into_iter().map(|(_, s)| s).collect();
    states.sort();
    assert_eq!(
        states,
        ["CANCELLED", "CANCELLED", "COMPLETED", "COMPLETED"],
        "{}",
        text(&out)
    );
    let submitted = std::fs::read_dir(work.join("store/slurm/submitted"))
        .unwrap()
        .count();
    assert_eq!(submitted, 0, "the cancelled submissions are forgotten");

    let again = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 0 executed, 2 reused"),
        "{}",
        text(&again)
    );
    assert_eq!(cluster.jobs().len(), 4, "the rebuild submitted nothing");
}

/// The scheduling policy exists once (engine/engine/src/schedule.rs) and the local and Slurm
/// executors sit behind one trait: the same scenarios — a cache hit, an error run again, a
/// stop_after cell, a corrupt stored output healed, a trial killed at its time limit — give
/// the same answers (counts, verdicts, the cells' trials) on both.
#[test]
fn the_same_scheduling_scenarios_give_the_same_answers_on_both_executors() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let answers: Vec<Vec<String>> = ["local", "slurm"]
        .iter()
        .map(|executor| {
            let work = cluster.work().join(executor);
            std::fs::create_dir_all(&work).unwrap();
            std::fs::write(work.join(".aorta-root"), "").unwrap();
            scenarios(&cluster, &work, executor)
        })
        .collect();
    assert_eq!(answers[0], answers[1], "local vs slurm");
    // And the answers are the policy's, not just equal.
    let expected = [
        "hit 1: Trials: 4 executed, 0 reused from cache. (exit 0)",
        "hit 2: Trials: 0 executed, 4 reused from cache. (exit 0)",
        "hit: none-none/trial_0 pass, none-none/trial_1 pass, tf32_off-none/trial_0 pass, tf32_off-none/trial_1 pass",
        "error 1: Trials: 2 executed, 0 reused from cache. (exit 1)",
        "error 2: Trials: 2 executed, 0 reused from cache. (exit 1); re-ran 2",
        "error: none-none/trial_0 error, none-none/trial_1 error",
        "stop 1: Trials: 1 executed, 0 reused from cache. (exit 0)",
        "stop 2: Trials: 0 executed, 1 reused from cache. (exit 0)",
        "stop: none-none/trial_0 fail",
        "heal: Trials: 1 executed, 3 reused from cache. (exit 0); healed",
        "heal: none-none/trial_0 pass, none-none/trial_1 pass, tf32_off-none/trial_0 pass, tf32_off-none/trial_1 pass",
        "kill 1: Trials: 1 executed, 0 reused from cache. (exit 0)",
        "kill 2: Trials: 0 executed, 1 reused from cache. (exit 0)",
        "kill: none-none/trial_0 error timed out",
    ];
    assert_eq!(answers[0], expected);
}

/// Runs the scenarios in `work` with `--executor EXECUTOR`; one line per answer.
fn scenarios(cluster: &Cluster, work: &Path, executor: &str) -> Vec<String> {
    let recipe = |name: &str, trials: u32, mitigations: &str, extra: &str| {
        std::fs::write(
            work.join(name),
            format!(
                "schema_version: 1\nmode: probe\nticket: {}\ntrials: {trials}\n\
                 mitigation_axis: [{mitigations}]\ndiagnostic_axis: [none]\ngpus_per_trial: 0\n{extra}",
                name.trim_end_matches(".yaml")
            ),
        )
        .unwrap();
    };
    let build = |name: &str, out: &str, extra: &[&str], cmd: &[&str]| -> (String, String) {
        let mut args = vec![
            "build",
            name,
            "--executor",
            executor,
            "--store",
            "store",
            "--output",
            out,
        ];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(cmd);
        let o = cluster.aorta(&args).current_dir(work).output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        let counts = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("Trials:"))
            .unwrap_or_else(|| panic!("{executor} {name}: no counts: {}", text(&o)))
            .trim()
            .to_owned();
        let counts = format!("{counts} (exit {})", o.status.code().unwrap_or(-1));
        (counts, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    // The cells' trials in the run directory, with their verdicts.
    let trials = |run: PathBuf| -> String {
        let mut found = Vec::new();
        for cell in std::fs::read_dir(&run).unwrap().flatten() {
            for t in std::fs::read_dir(cell.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let Ok(r) = std::fs::read(t.path().join("result.json")) else {
                    continue;
                };
                let r: serde_json::Value = serde_json::from_slice(&r).unwrap();
                let timed = if r["timed_out"] == true {
                    " timed out"
                } else {
                    ""
                };
                found.push(format!(
                    "{}/{} {}{timed}",
                    cell.file_name().to_string_lossy(),
                    t.file_name().to_string_lossy(),
                    r["verdict"].as_str().unwrap()
                ));
            }
        }
        found.sort();
        found.join(", ")
    };
    let mut answers = Vec::new();

    // A cache hit: two cells of two trials, built twice.
    recipe("hit.yaml", 2, "none, tf32_off", "");
    let stamp = ["sh", "-c", "echo stamp-$$-; od -An -tx1 -N8 /dev/urandom"];
    let (first, _) = build("hit.yaml", "out", &[], &stamp);
    answers.push(format!("hit 1: {first}"));
    let (again, _) = build("hit.yaml", "out", &[], &stamp);
    answers.push(format!("hit 2: {again}"));
    answers.push(format!("hit: {}", trials(work.join("out/hit"))));

    // An error (a program that is not there) is stored for the report and run again.
    recipe("error.yaml", 2, "none", "");
    let missing = ["/nonexistent/aorta-tool"];
    let (first, _) = build("error.yaml", "out", &[], &missing);
    answers.push(format!("error 1: {first}"));
    let (again, err) = build("error.yaml", "out", &[], &missing);
    let reran = if err.contains("re-ran 2 trial(s)") {
        "; re-ran 2"
    } else {
        ""
    };
    answers.push(format!("error 2: {again}{reran}"));
    answers.push(format!("error: {}", trials(work.join("out/error"))));

    // stop_after: every trial fails, the first failure decides the cell.
    recipe(
        "stop.yaml",
        3,
        "none",
        "stop_after: {events: 1, max_trials: 3, event_verdict: fail}\n",
    );
    let fail = ["sh", "-c", "exit 1"];
    let (first, _) = build("stop.yaml", "out", &[], &fail);
    answers.push(format!("stop 1: {first}"));
    let (again, _) = build("stop.yaml", "out", &[], &fail);
    answers.push(format!("stop 2: {again}"));
    answers.push(format!("stop: {}", trials(work.join("out/stop"))));

    // Heal: one stored stdout flipped as a bad disk would; a build into a new directory reads
    // it back, quarantines it and runs that one trial again.
    let blob = find_blob(&work.join("store/cas"), b"stamp-").expect("a stored stdout");
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[1] ^= 0x20;
    std::fs::write(&blob, bytes).unwrap();
    let (healed, err) = build("hit.yaml", "out2", &[], &stamp);
    let said = if err.contains("re-running the trial to heal the store") {
        "; healed"
    } else {
        ""
    };
    answers.push(format!("heal: {healed}{said}"));
    answers.push(format!("heal: {}", trials(work.join("out2/hit"))));

    // A kill at the trial's time limit is its result (a timeout), reused by the next build.
    recipe("kill.yaml", 1, "none", "timeout_per_trial: 1\n");
    let sleep = ["sleep", "30"];
    let (first, _) = build("kill.yaml", "out", &[], &sleep);
    answers.push(format!("kill 1: {first}"));
    let (again, _) = build("kill.yaml", "out", &[], &sleep);
    answers.push(format!("kill 2: {again}"));
    answers.push(format!("kill: {}", trials(work.join("out/kill"))));
    answers
}

/// The first file under `dir` whose content starts with `prefix`.
fn find_blob(dir: &Path, prefix: &[u8]) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_blob(&p, prefix) {
                return Some(f);
            }
        } else if std::fs::read(&p).is_ok_and(|b| b.starts_with(prefix)) {
            return Some(p);
        }
    }
    None
}

/// A Slurm result is keyed by the environment of the node that ran it: the plan by the
/// partition's (a probe job's snapshot, kept), each task by its own node's. A TaskProlog that
/// exports `NCCL_ALGO` into every task makes the cluster's results another environment's than
/// the submitter's, so a local build does not reuse them; once the partition changes under a
/// kept snapshot, the nodes say so, store under their own key, and the next build re-probes and
/// reuses exactly those results.
#[test]
fn a_slurm_result_is_keyed_by_the_environment_of_the_node_that_ran_it() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 2, "none", 0);
    let prolog = cluster.conf.parent().unwrap().join("task-prolog.env");
    std::fs::write(&prolog, "export NCCL_ALGO=Tree\n").unwrap();
    let cmd = ["--", "sh", "-c", "echo algo=$NCCL_ALGO"];
    let run = |executor: &str| {
        let mut a = vec![
            "build",
            "probe.yaml",
            "--executor",
            executor,
            "--store",
            "store",
        ];
        a.extend_from_slice(&cmd);
        let o = cluster
            .aorta(&a)
            .env_remove("AORTA_ENV_SNAPSHOT")
            .env_remove("NCCL_ALGO")
            .output()
            .unwrap();
        let t = text(&o);
        (o, t)
    };
    let counts = |t: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with("Trials:"))
            .unwrap_or("")
            .trim()
            .to_owned()
    };

    let (o, t) = run("slurm");
    assert!(o.status.success(), "{t}");
    assert!(t.contains("probing the environment of partition"), "{t}");
    assert_eq!(
        counts(&t),
        "Trials: 2 executed, 0 reused from cache.",
        "{t}"
    );
    let log =
        std::fs::read_to_string(work.join("probe_results/SLURM-TEST/none-none/trial_0/stdout.log"))
            .unwrap();
    assert!(log.contains("algo=Tree"), "{log}");
    let partitions: Vec<PathBuf> = std::fs::read_dir(work.join("store/slurm/partitions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    let snap: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&partitions[0]).unwrap()).unwrap();
    assert_eq!(
        snap["env_vars"]["NCCL_ALGO"], "Tree",
        "the probe job ran under the prolog"
    );

    // The cluster's results again: no new probe, no new task.
    let jobs = cluster.settled().len();
    let (o, t) = run("slurm");
    assert!(o.status.success(), "{t}");
    assert!(!t.contains("probing the environment"), "{t}");
    assert_eq!(
        counts(&t),
        "Trials: 0 executed, 2 reused from cache.",
        "{t}"
    );
    assert_eq!(cluster.jobs().len(), jobs, "{t}");

    // The submitter has no NCCL_ALGO: its own build is another environment's.
    let (o, t) = run("local");
    assert!(o.status.success(), "{t}");
    assert_eq!(
        counts(&t),
        "Trials: 2 executed, 0 reused from cache.",
        "{t}"
    );

    // The partition changes under the kept snapshot: the trials it keys stay reused until one
    // runs; the node that runs it finds out (a third trial added).
    std::fs::write(&prolog, "export NCCL_ALGO=Ring\n").unwrap();
    write_recipe(&work, 3, "none", 0);
    let (o, t) = run("slurm");
    assert!(!o.status.success(), "{t}");
    assert_eq!(
        counts(&t),
        "Trials: 0 executed, 2 reused from cache.",
        "{t}"
    );
    assert!(
        t.contains("whose environment differs from the partition's snapshot")
            && t.contains(r#"env_vars.NCCL_ALGO: "Tree" -> "Ring""#),
        "{t}"
    );
    // The next build probes the partition again: the two trials run under the new
    // environment, the third is the node's own result.
    let (o, t) = run("slurm");
    assert!(o.status.success(), "{t}");
    assert!(t.contains("probing the environment of partition"), "{t}");
    assert_eq!(
        counts(&t),
        "Trials: 2 executed, 1 reused from cache.",
        "{t}"
    );
    for trial in 0..3 {
        let log = std::fs::read_to_string(work.join(format!(
            "probe_results/SLURM-TEST/none-none/trial_{trial}/stdout.log"
        )))
        .unwrap();
        assert!(log.contains("algo=Ring"), "trial {trial}: {log}");
    }
}

/// A recipe file with command-line overlays (`sweep run --recipe … --ticket …`) is a file origin
/// of the compile database, so it runs on Slurm too: the tasks get the overlays in their
/// manifest and compile the same recipe (same keys) on the node.
#[test]
fn an_overlaid_recipe_file_runs_on_slurm_with_its_overlays() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 2, "none", 0);
    let run = || {
        cluster
            .aorta(&[
                "sweep",
                "run",
                "--recipe",
                "probe.yaml",
                "--ticket",
                "OVERLAID",
                "--executor",
                "slurm",
                "--store",
                "store",
                "--",
                "true",
            ])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Trials: 2 executed, 0 reused"),
        "{}",
        text(&out)
    );
    assert!(work
        .join("probe_results/OVERLAID/none-none/trial_1/result.json")
        .is_file());
    let again = run();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 0 executed, 2 reused"),
        "{}",
        text(&again)
    );
}

/// A recipe the command line describes (flag mode: `sweep run --workload … --mitigation-axis
/// …`) is a request origin of the compile database: its tasks get the request in their
/// manifest and build the same recipe on the node, so the keys are the local executor's.
#[test]
fn a_flag_mode_sweep_runs_on_slurm_with_the_local_keys() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let run = |executor: &str| {
        cluster
            .aorta(&[
                "sweep",
                "run",
                "--workload",
                "example",
                "--mitigation-axis",
                "none",
                "--environment-axis",
                "local",
                "--trials",
                "2",
                "--steps",
                "1",
                "--ticket",
                "FLAGS",
                "--executor",
                executor,
                "--store",
                "store",
            ])
            .output()
            .unwrap()
    };
    let out = run("slurm");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Trials: 2 executed, 0 reused"),
        "{}",
        text(&out)
    );
    let local = run("local");
    assert!(local.status.success(), "{}", text(&local));
    assert!(
        String::from_utf8_lossy(&local.stdout).contains("Trials: 0 executed, 2 reused"),
        "{}",
        text(&local)
    );
}

/// More trials of one shape than the cluster's MaxArraySize: split into arrays that each fit
/// (25 trials, MaxArraySize=11: 11 + 11 + 3), all run, and a rebuild executes nothing.
#[test]
fn arrays_are_split_to_the_clusters_max_array_size() {
    trials_run_in_arrays_of_at_most(25, 11, 3);
}

/// Issue 37's scale case: 2,500 trials of one shape under Slurm's default `MaxArraySize=1001`
/// → three arrays (1001 + 1001 + 498), every trial run once (about five minutes here).
#[test]
fn twenty_five_hundred_trials_run_in_three_arrays_of_at_most_1001() {
    trials_run_in_arrays_of_at_most(2500, 1001, 3);
}

/// `trials` trials of `true` on a cluster whose MaxArraySize is `max`: `arrays` arrays, every
/// task COMPLETED once, and a rebuild executes nothing.
fn trials_run_in_arrays_of_at_most(trials: u32, max: u32, arrays: usize) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let max = max.to_string();
    let Some(cluster) = Cluster::up_with(&[("AORTA_TEST_SLURM_MAX_ARRAY_SIZE", &max)]) else {
        return;
    };
    let work = cluster.work();
    write_recipe(&work, trials, "none", 0);
    let out = cluster.aorta(&args(&["--", "true"])).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("Trials: {trials} executed, 0 reused")),
        "{}",
        text(&out)
    );
    let jobs = cluster.settled();
    assert_eq!(jobs.len(), trials as usize);
    assert_eq!(array_ids(&jobs).len(), arrays, "{:?}", array_ids(&jobs));
    assert!(jobs.iter().all(|(_, s)| s == "COMPLETED"));
    let again = cluster.aorta(&args(&["--", "true"])).output().unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout)
            .contains(&format!("Trials: 0 executed, {trials} reused")),
        "{}",
        text(&again)
    );
}

/// `trials: auto` under Slurm: each look is a wave of arrays, the answer is the local one.
#[test]
fn trials_auto_runs_in_waves_and_answers_as_locally() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    std::fs::write(
        work.join("probe.yaml"),
        "schema_version: 1\nmode: probe\nticket: SLURM-TEST\ntrials: auto\nmax_trials_per_cell: 16\n\
         mitigation_axis: [none, cuda_launch_blocking, cuda_device_max_connections_1]\n\
         diagnostic_axis: [none]\nconfound: {baseline_cell: none-none, threshold: 100}\n",
    )
    .unwrap();
    // Fails unless CUDA_LAUNCH_BLOCKING=1: the fix is decided at 8, the dud futile at 4.
    let cmd = ["--", "sh", "-c", "[ \"$CUDA_LAUNCH_BLOCKING\" = 1 ]"];
    let out = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Trials: 20 executed, 0 reused"),
        "{}",
        text(&out)
    );
    assert!(
        stdout.contains("cuda_launch_blocking (cell cuda_launch_blocking-none) fixes it"),
        "{}",
        text(&out)
    );
    // Looks at 4 and 8: more than one wave of arrays, never more tasks than the looks need.
    let jobs = cluster.settled();
    assert_eq!(jobs.len(), 20, "{jobs:?}");
    let arrays = array_ids(&jobs);
    assert!(arrays.len() >= 2, "{jobs:?}");
}

/// The distinct array job ids of squeue's `JOBID_TASK` rows.
fn array_ids(jobs: &[(String, String)]) -> Vec<&str> {
    let mut ids: Vec<&str> = jobs
        .iter()
        .map(|(id, _)| id.split('_').next().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// slurmctld stopped for a minute while the tasks run (squeue and sacct fail meanwhile:
/// "Unable to contact slurm controller"): the build says so, waits, and finishes once the
/// controller is back, exit 0, every trial run once.
#[test]
fn a_controller_outage_of_a_minute_is_waited_out() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 4, "none", 0);
    let child = cluster
        .aorta(&args(&["--", "sleep", "5"]))
        .env("AORTA_SLURM_MAX_BACKOFF", "4")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    cluster.wait_for("the tasks to run", |j| {
        j.iter().filter(|(_, s)| s == "RUNNING").count() == 4
    });
    cluster.stop_controller();
    std::thread::sleep(Duration::from_secs(60));
    cluster.start_controller();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.contains("Trials: 4 executed, 0 reused"),
        "{}",
        text(&out)
    );
    assert!(
        stderr.contains("aorta: Slurm does not answer (squeue: "),
        "{}",
        text(&out)
    );
    assert!(
        stderr.contains("aorta: Slurm answers again, after "),
        "{}",
        text(&out)
    );
    let jobs = cluster.settled();
    assert_eq!(jobs.len(), 4, "nothing resubmitted: {jobs:?}");
}

/// A folder of Slurm's commands whose `sbatch` kills the aorta that called it, before
/// (`before`) or after (else) handing the job to the real sbatch: a client killed at the worst
/// moment. The others are the real ones. aorta is pointed at it both ways it finds the commands
/// (`AORTA_SLURM_BIN`, which CI sets, and PATH).
fn sbatch_that_kills_its_caller(work: &Path, cluster: &Cluster, before: bool) -> PathBuf {
    let wrap = work.join("wrap");
    std::fs::create_dir_all(&wrap).unwrap();
    for cmd in ["squeue", "sacct", "scancel", "scontrol", "sinfo"] {
        std::os::unix::fs::symlink(cluster.bin.join(cmd), wrap.join(cmd)).unwrap();
    }
    let real = cluster.bin.join("sbatch");
    let body = match before {
        true => "kill -9 $PPID\nexit 1\n".to_owned(),
        false => format!("{} \"$@\"\nkill -9 $PPID\n", real.display()),
    };
    let script = wrap.join("sbatch");
    std::fs::write(&script, format!("#!/bin/sh\n{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrap
}

/// `aorta ARGS` with the commands of `wrap` instead of the cluster's.
fn with_commands_of(cluster: &Cluster, wrap: &Path, args: &[&str]) -> Command {
    let mut c = cluster.aorta(args);
    c.env("AORTA_SLURM_BIN", wrap)
        .env("PATH", format!("{}:{}", wrap.display(), cluster.path()));
    c
}

/// The client killed right after sbatch submitted its array, before it learnt the job id:
/// the rebuild finds the job by its name, follows it instead of submitting again, and leaves
/// nothing in the queue; every trial ran once.
#[test]
fn a_client_killed_right_after_sbatch_leaves_no_orphan_and_runs_nothing_twice() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 6, "none", 0);
    let cmd = ["--", "sleep", "2"];
    let wrap = sbatch_that_kills_its_caller(&work, &cluster, false);
    let killed = with_commands_of(&cluster, &wrap, &args(&cmd))
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), None, "killed: {}", text(&killed));
    assert_eq!(cluster.jobs().len(), 6, "the array reached Slurm");
    let again = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("submitted by a build that stopped before recording it; following it"),
        "{}",
        text(&again)
    );
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 6 executed, 0 reused"),
        "{}",
        text(&again)
    );
    let jobs = cluster.settled();
    assert_eq!(jobs.len(), 6, "nothing submitted twice: {jobs:?}");
    assert!(jobs.iter().all(|(_, s)| s == "COMPLETED"), "{jobs:?}");
    assert_eq!(
        std::fs::read_dir(work.join("store/slurm/submitted"))
            .unwrap()
            .count(),
        0,
        "no record left"
    );
}

/// The client killed after recording its intent, before sbatch ran: nothing reached Slurm,
/// and the rebuild (once an orphaned sbatch could no longer be on its way) submits it all.
#[test]
fn a_client_killed_before_sbatch_leaves_an_intent_the_rebuild_drops() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 3, "none", 0);
    let cmd = ["--", "true"];
    let wrap = sbatch_that_kills_its_caller(&work, &cluster, true);
    let killed = with_commands_of(&cluster, &wrap, &args(&cmd))
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), None, "killed: {}", text(&killed));
    assert!(cluster.jobs().is_empty());
    assert_eq!(
        std::fs::read_dir(work.join("store/slurm/submitted"))
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json"))
            .count(),
        1,
        "the intent is recorded"
    );
    let again = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Trials: 3 executed, 0 reused"),
        "{}",
        text(&again)
    );
    assert_eq!(cluster.settled().len(), 3);
}

/// `--detach`, the tasks end, the results are evicted (`cache gc --max-bytes 0`) or forced
/// to run again (`--rerun all`): the next build runs them again; no stale submission makes a
/// false failure, and no record is left behind.
#[test]
fn detached_tasks_whose_results_are_gone_run_again_instead_of_failing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 3, "none,cuda_launch_blocking", 0);
    let cmd = ["--", "true"];
    let detached = cluster
        .aorta(&args(&[&["--detach"][..], &cmd[..]].concat()))
        .output()
        .unwrap();
    assert!(detached.status.success(), "{}", text(&detached));
    cluster.wait_for("the tasks to end", |j| {
        j.len() == 6 && j.iter().all(|(_, s)| s == "COMPLETED")
    });
    // The results are there: collected by this build, as executed.
    let collected = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(collected.status.success(), "{}", text(&collected));
    assert!(
        String::from_utf8_lossy(&collected.stdout).contains("Trials: 6 executed, 0 reused"),
        "{}",
        text(&collected)
    );
    let records = || {
        std::fs::read_dir(work.join("store/slurm/submitted"))
            .unwrap()
            .count()
    };
    assert_eq!(records(), 0, "collected: no record left");
    let gc = cluster
        .aorta(&["cache", "gc", "--store", "store", "--max-bytes", "0"])
        .output()
        .unwrap();
    assert!(gc.status.success(), "{}", text(&gc));
    let rebuilt = cluster.aorta(&args(&cmd)).output().unwrap();
    assert!(rebuilt.status.success(), "{}", text(&rebuilt));
    assert!(
        String::from_utf8_lossy(&rebuilt.stdout).contains("Trials: 6 executed, 0 reused"),
        "{}",
        text(&rebuilt)
    );
    // Detached again, ended, then forced: the earlier build's tasks left no result this
    // build may use, so it runs them again (the records of a build that did not wait).
    let detached = cluster
        .aorta(&args(
            &[&["--detach", "--rerun", "all"][..], &cmd[..]].concat(),
        ))
        .output()
        .unwrap();
    assert!(detached.status.success(), "{}", text(&detached));
    cluster.wait_for("the tasks to end", |j| {
        j.len() == 18 && j.iter().all(|(_, s)| s == "COMPLETED")
    });
    let forced = cluster
        .aorta(&args(&[&["--rerun", "all"][..], &cmd[..]].concat()))
        .output()
        .unwrap();
    assert!(forced.status.success(), "{}", text(&forced));
    assert!(
        String::from_utf8_lossy(&forced.stderr)
            .contains("of an earlier build ended COMPLETED and left no result"),
        "{}",
        text(&forced)
    );
    assert!(
        String::from_utf8_lossy(&forced.stdout).contains("Trials: 6 executed, 0 reused"),
        "{}",
        text(&forced)
    );
    assert_eq!(records(), 0, "no record left");
}

/// Two recipes in one `aorta build`: the second's array is queued before the first's tasks
/// end, not after the first drained.
#[test]
fn the_recipes_of_one_build_are_all_queued_at_once() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 4, "none", 0);
    std::fs::write(
        work.join("second.yaml"),
        "schema_version: 1\nmode: probe\nticket: SLURM-TWO\ntrials: 4\n\
         mitigation_axis: [cuda_launch_blocking]\ndiagnostic_axis: [none]\n",
    )
    .unwrap();
    let out = cluster
        .aorta(&[
            "build",
            "probe.yaml",
            "second.yaml",
            "--executor",
            "slurm",
            "--store",
            "store",
            "--",
            "sleep",
            "4",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("Trials: 4 executed, 0 reused").count(),
        2,
        "{}",
        text(&out)
    );
    // Per array: the submit time and the first end time (squeue's %V, %e).
    let rows = Command::new(cluster.bin.join("squeue"))
        .env("SLURM_CONF", &cluster.conf)
        .args(["--states=all", "--array", "--noheader", "--format=%F %V %e"])
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&rows.stdout).into_owned();
    let mut arrays: std::collections::BTreeMap<String, (String, String)> = Default::default();
    for l in rows.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let e = arrays
            .entry(f[0].to_owned())
            .or_insert((f[1].to_owned(), f[2].to_owned()));
        e.1 = e.1.clone().min(f[2].to_owned());
    }
    assert_eq!(arrays.len(), 2, "{rows}");
    let first_end = arrays.values().map(|(_, end)| end.clone()).min().unwrap();
    let last_submit = arrays.values().map(|(sub, _)| sub.clone()).max().unwrap();
    assert!(
        last_submit < first_end,
        "the second array went in after the first's tasks ended: {rows}"
    );
}

/// `aorta bisect range` under `--executor slurm`: each step's trials are job arrays whose tasks
/// compile the step's `BisectProbe` request, the first bad point is found, and the same search
/// run locally afterwards finds every trial in the store (the keys are the local ones).
#[test]
fn a_bisect_runs_on_slurm_with_the_local_keys() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    let mut list = String::new();
    for i in 0..8 {
        list.push_str(&format!("VERSION={i}\n"));
    }
    std::fs::write(work.join("points.txt"), list).unwrap();
    let run = |executor: &str| {
        cluster
            .aorta(&[
                "bisect",
                "range",
                "--list",
                "points.txt",
                "--template",
                "test \"$VERSION\" -lt 5",
                "--max-trials-per-probe",
                "8",
                "--json",
                "--executor",
                executor,
                "--store",
                "store",
            ])
            .output()
            .unwrap()
    };
    let out = run("slurm");
    assert!(out.status.success(), "{}", text(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["result"], serde_json::json!(["VERSION=5"]), "{j}");
    assert!(j["work"]["executed"].as_u64().unwrap() > 0, "{j}");
    assert!(!cluster.jobs().is_empty(), "no job reached the cluster");
    let local = run("local");
    assert!(local.status.success(), "{}", text(&local));
    let l: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(l["result"], j["result"]);
    assert_eq!(l["work"]["executed"], 0, "{l}");
}

/// `--doctor quick` under `--executor slurm` checks a node of the partition, not the submitter:
/// the checks run in a one-task job of the trials' shape (the stand-in nvidia-smi records the
/// Slurm job it ran in); a failing node is refused before any trial is submitted (exit 3), and
/// a healthy one builds with its doctor.json naming the node.
#[test]
fn the_doctor_checks_a_node_of_the_partition_not_the_submitter() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::up() else { return };
    let work = cluster.work();
    write_recipe(&work, 2, "none", 0);
    let gpu = repo_root().join("tests/fixtures/gpu");
    let smi = work.join("nvidia-smi");
    let seen = work.join("seen-in-jobs");
    let stand_in = |xml: &str| {
        std::fs::write(
            &smi,
            format!(
                "#!/bin/sh\necho \"${{SLURM_JOB_ID:-none}}\" >> '{}'\ncase \"$1\" in nvlink) exit 0;; esac\ncat '{}'\n",
                seen.display(),
                gpu.join(xml).display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let build_of = |targets: &[&str]| {
        let mut a = vec!["build"];
        a.extend(targets);
        a.extend(["--executor", "slurm", "--store", "store"]);
        a.extend(["--doctor", "quick", "--", "true"]);
        let o = cluster
            .aorta(&a)
            .env("AORTA_DOCTOR_NVIDIA_SMI", &smi)
            .env("AORTA_DOCTOR_AMD_SMI", "/nonexistent/amd-smi")
            .env("AORTA_DOCTOR_SYSFS_ROOT", work.join("no-sysfs"))
            .env("AORTA_DOCTOR_KMSG", gpu.join("h100-cuda13/kmsg.txt"))
            .env("AORTA_DOCTOR_WINDOW_MS", "10")
            .output()
            .unwrap();
        let t = text(&o);
        (o, t)
    };
    let build = || build_of(&["probe.yaml"]);

    stand_in("doctor/nvidia-smi-q-gen3x8.xml");
    let (o, t) = build();
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("checking a node of partition"), "{t}");
    assert!(t.contains("failed aorta doctor --level quick"), "{t}");
    assert!(t.contains("link trained at Gen3 x8"), "{t}");
    let jobs = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !jobs.is_empty() && jobs.lines().all(|l| l != "none"),
        "every nvidia-smi call ran inside a Slurm job: {jobs:?}"
    );
    assert!(!work.join("probe_results").exists(), "no trial ran: {t}");
    // Several recipes (whose arrays are queued ahead): the node is checked before any is.
    std::fs::write(
        work.join("second.yaml"),
        "schema_version: 1\nmode: probe\nticket: SLURM-TWO\ntrials: 2\n\
         mitigation_axis: [none]\ndiagnostic_axis: [none]\n",
    )
    .unwrap();
    let (o, t) = build_of(&["probe.yaml", "second.yaml"]);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("link trained at Gen3 x8"), "{t}");
    let queued = files_under(&work.join("store/slurm/submitted"));
    assert!(queued.is_empty(), "nothing submitted: {queued:?}\n{t}");

    stand_in("h100-cuda13/nvidia-smi-q.xml");
    let (o, t) = build();
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("doctor quick: pass"), "{t}");
    assert!(t.contains(" on node "), "{t}");
    let record = files_under(&work.join("probe_results"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "doctor.json"))
        .expect("a doctor.json in the run directory");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(v["status"], "pass", "{v}");
    assert_eq!(v["marked"], false, "{v}");
    assert!(v["host"].is_string(), "{v}");
}
