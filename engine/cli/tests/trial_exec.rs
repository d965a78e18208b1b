//! `aorta trial exec`: one trial by cell and index, what each Buck2 trial action runs
//! (rules/aorta.bzl). Same keys and store as a whole build; outputs go to `--out`.
mod common;
use std::path::Path;
use std::process::{Command, Output};

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T\ntrials: 3\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n";

fn aorta(ws: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws)
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.join("store"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            common::repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_REMOTE_CACHE");
    c.args(args).output().unwrap()
}

#[test]
fn one_trial_runs_alone_and_shares_keys_with_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join(".aorta-root"), "").unwrap();
    std::fs::write(ws.join("r.yaml"), RECIPE).unwrap();
    std::fs::write(
        ws.join("run.sh"),
        "echo \"blocking=${CUDA_LAUNCH_BLOCKING:-unset} step_time 0.1\"\n",
    )
    .unwrap();
    let exec = |out: &str| {
        aorta(
            ws,
            &[
                "trial",
                "exec",
                "--recipe",
                "r.yaml",
                "--cell",
                "cuda_launch_blocking-none",
                "--trial",
                "1",
                "--out",
                out,
                "--",
                "bash",
                "run.sh",
            ],
        )
    };

    let first = exec("buck-out/t1");
    assert!(first.status.success(), "{}", common::transcript(&first));
    let line = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(
        line.starts_with("cuda_launch_blocking-none trial 1 ") && line.contains("(executed)"),
        "{line}"
    );
    let out = ws.join("buck-out/t1");
    assert_eq!(
        std::fs::read_to_string(out.join("stdout.log")).unwrap(),
        "blocking=1 step_time 0.1\n"
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(record["cell_name"], "cuda_launch_blocking-none", "{record}");

    // Again, into a fresh directory: from the store.
    let again = exec("buck-out/t1-again");
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("(reused from the cache)"),
        "{}",
        common::transcript(&again)
    );
    assert_eq!(
        std::fs::read(out.join("stdout.log")).unwrap(),
        std::fs::read(ws.join("buck-out/t1-again/stdout.log")).unwrap()
    );

    // The whole build finds that trial under the same key.
    let build = aorta(
        ws,
        &[
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "bash", "run.sh",
        ],
    );
    assert!(
        String::from_utf8_lossy(&build.stdout).contains("Trials: 5 executed, 1 reused"),
        "{}",
        common::transcript(&build)
    );

    // --expect-key pins the key.
    let key = line
        .split_whitespace()
        .nth(3)
        .unwrap()
        .trim_end_matches(':')
        .to_owned();
    assert_eq!(key.len(), 64, "{line}");
    let pinned = aorta(
        ws,
        &[
            "trial",
            "exec",
            "--recipe",
            "r.yaml",
            "--cell",
            "cuda_launch_blocking-none",
            "--trial",
            "1",
            "--out",
            "o",
            "--expect-key",
            &key,
            "--",
            "bash",
            "run.sh",
        ],
    );
    assert!(pinned.status.success(), "{}", common::transcript(&pinned));
    let wrong = aorta(
        ws,
        &[
            "trial",
            "exec",
            "--recipe",
            "r.yaml",
            "--cell",
            "none-none",
            "--trial",
            "1",
            "--out",
            "o",
            "--expect-key",
            &key,
            "--",
            "bash",
            "run.sh",
        ],
    );
    assert_eq!(
        wrong.status.code(),
        Some(2),
        "{}",
        common::transcript(&wrong)
    );
}

/// `--gpus 0,1` (what the rule passes for `gpus = 2`): the one trial gets both devices.
#[test]
fn a_trial_gets_every_gpu_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join(".aorta-root"), "").unwrap();
    std::fs::write(ws.join("r.yaml"), RECIPE).unwrap();
    let out = aorta(
        ws,
        &[
            "trial",
            "exec",
            "--recipe",
            "r.yaml",
            "--cell",
            "none-none",
            "--trial",
            "0",
            "--out",
            "o",
            "--gpus",
            "0,1",
            "--",
            "sh",
            "-c",
            "echo devices=$CUDA_VISIBLE_DEVICES",
        ],
    );
    assert!(out.status.success(), "{}", common::transcript(&out));
    assert_eq!(
        std::fs::read_to_string(ws.join("o/stdout.log")).unwrap(),
        "devices=0,1\n"
    );
}

#[test]
fn bad_selections_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::write(ws.join(".aorta-root"), "").unwrap();
    std::fs::write(ws.join("r.yaml"), RECIPE).unwrap();
    for (args, needle) in [
        (
            &["--cell", "nope", "--trial", "0"][..],
            "cells: none-none, cuda_launch_blocking-none",
        ),
        (&["--cell", "none-none", "--trial", "3"], "use --trial 0..2"),
    ] {
        let mut all = vec!["trial", "exec", "--recipe", "r.yaml", "--out", "o"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "true"]);
        let out = aorta(ws, &all);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            common::transcript(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            common::transcript(&out)
        );
    }
    let no_command = aorta(
        ws,
        &[
            "trial",
            "exec",
            "--recipe",
            "r.yaml",
            "--cell",
            "none-none",
            "--trial",
            "0",
            "--out",
            "o",
        ],
    );
    assert_eq!(
        no_command.status.code(),
        Some(2),
        "{}",
        common::transcript(&no_command)
    );
}
