//! The exit code and the summary tell the truth (issue 36, part 3): a trial whose result could
//! not be recorded is never counted as passed; a full disk is infrastructure (exit 3), a trial
//! that removes its own directory leaves the result incomplete (exit 1); builds of one run
//! directory at once take turns instead of colliding (docs/exec.md).

mod common;
use common::Ws;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `aorta sweep run` of the workspace's r.yaml into `out` with `store`, then `command`.
fn sweep(ws: &Ws, out: &Path, store: &Path, command: &[&str]) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws.path())
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", store)
        .env_remove("AORTA_REMOTE_CACHE")
        .env(
            "AORTA_ENV_SNAPSHOT",
            common::repo_root().join("docs/examples/h200-env.json"),
        )
        .args(["sweep", "run", "--recipe", "r.yaml", "--output"])
        .arg(out)
        .arg("--")
        .args(command);
    c
}

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T\ntrials: 6\nmitigation_axis: [none]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n";

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A 2 MiB tmpfs, unmounted (lazily, whatever holds it) when dropped.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_during_trials_is_exit_3_and_its_trials_count_as_errors() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("skipped: mounting a 2 MiB tmpfs needs root");
        return;
    }
    let ws = Ws::with_recipe(RECIPE);
    let disk = ws.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&disk)
        .status()
        .unwrap();
    if !mounted.success() {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _guard = Tmpfs(disk.clone());
    // ~700 KB of stdout a trial: the 2 MiB disk holds two or three of the six.
    let out = sweep(
        &ws,
        &disk.join("out"),
        &disk.join("store"),
        &["bash", "-c", "head -c 700000 /dev/zero | tr '\\0' x"],
    )
    .output()
    .unwrap();
    let text = common::transcript(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(!stdout(&out).contains("passed"), "{text}");
    // Where the matrix could still be written, its summary counts the lost trials.
    if stdout(&out).contains("Sweep summary") {
        assert!(stdout(&out).contains("not recorded"), "{text}");
        assert!(stdout(&out).contains("with errors"), "{text}");
    }
}

#[test]
fn a_trial_that_removes_its_own_directory_is_not_counted_as_passed() {
    // A probe command runs where aorta was started; its staging directory is where
    // AORTA_ENV_FILE (probe.env, with `env_passthrough_mode: file`) lies.
    let ws =
        Ws::with_recipe(&RECIPE.replace("trials: 6\n", "trials: 2\nenv_passthrough_mode: file\n"));
    let script = "case \"$AORTA_ENV_FILE\" in */.aorta-staging/*/probe.env) rm -rf \"$(dirname \"$AORTA_ENV_FILE\")\";; *) exit 7;; esac";
    let out = sweep(
        &ws,
        &ws.path().join("out"),
        &ws.path().join("store"),
        &["bash", "-c", script],
    )
    .output()
    .unwrap();
    let text = common::transcript(&out);
    // The trial's own doing: the result is incomplete (1), not the infrastructure's (3).
    assert_eq!(out.status.code(), Some(1), "{text}");
    let s = stdout(&out);
    assert!(!s.contains("passed"), "{text}");
    assert!(
        s.contains("[error] none-none: 2 not recorded of 2 trial(s)"),
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("removed its own staging directory"),
        "{text}"
    );
}

#[test]
fn concurrent_builds_of_one_ticket_into_one_output_take_turns() {
    let recipe = "schema_version: 1\nmode: probe\nticket: T\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n";
    let ws = Ws::with_recipe(recipe);
    for round in 0..20 {
        // A fresh store and output each round: every round executes and places again.
        let out_dir = ws.path().join(format!("out-{round}"));
        let store = ws.path().join(format!("store-{round}"));
        let children: Vec<_> = (0..4)
            .map(|_| {
                sweep(&ws, &out_dir, &store, &["true"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "round {round}: {}",
                common::transcript(&out)
            );
        }
        let run = out_dir.join("T");
        let matrix: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("matrix.json")).unwrap())
                .unwrap();
        let cells = matrix["cells"].as_array().expect("cells");
        let names: Vec<&str> = cells.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(
            names,
            ["none-none", "cuda_launch_blocking-none"],
            "round {round}"
        );
        for cell in cells {
            assert_eq!(cell["trials"], 2, "round {round}: {cell}");
            let paths = cell["trial_paths"].as_array().expect("trial_paths");
            assert_eq!(paths.len(), 2, "round {round}: {cell}");
            for p in paths {
                let result = run.join(p.as_str().unwrap());
                assert!(result.is_file(), "round {round}: no {}", result.display());
            }
        }
        assert!(
            !run.join(".aorta-staging").exists()
                || std::fs::read_dir(run.join(".aorta-staging"))
                    .unwrap()
                    .next()
                    .is_none(),
            "round {round}: staging left behind"
        );
    }
}
