//! "Never a wrong cache hit": the cases where a stored verdict used to be reused although what
//! decides it had changed (docs/cache-keys.md). Each builds for real, in a temporary directory,
//! with the real `aorta` binary.

mod common;

use common::{counts, text, Ws};

const TWO_CELLS: &str = "schema_version: 1\nmode: probe\nticket: truth\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n";

#[test]
fn an_errored_trial_is_never_reused() {
    let ws = Ws::new();
    ws.write("r.yaml", TWO_CELLS);
    // `mytool` is not installed: every trial errors (the program cannot be found).
    let first = ws.build(&[], &["mytool"]);
    assert_eq!(counts(&first), (4, 0), "{}", text(&first));
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("errored"),
        "{}",
        text(&first)
    );
    ws.write("bin/mytool", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(
        ws.path().join("bin/mytool"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let second = ws.build(&[], &["mytool"]);
    assert_eq!(counts(&second), (4, 0), "{}", text(&second));
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("all 2 cell(s) passed"),
        "{}",
        text(&second)
    );
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("errors are never reused"),
        "{}",
        text(&second)
    );
    // Results (passes) are reused.
    let third = ws.build(&[], &["mytool"]);
    assert_eq!(counts(&third), (0, 4), "{}", text(&third));
    // explain says an errored trial will run.
    std::fs::remove_file(ws.path().join("bin/mytool")).unwrap();
    let again = ws.build(&["--rerun", "all"], &["mytool"]);
    assert_eq!(counts(&again), (4, 0), "{}", text(&again));
    let explain = ws.explain("none-none", "0", &["mytool"]);
    let said = String::from_utf8_lossy(&explain.stdout);
    assert!(
        said.contains("errors are never reused") && said.contains("the next build executes it"),
        "{}",
        text(&explain)
    );
}

#[test]
fn rerun_flags_force_execution_and_replace_the_results() {
    let ws = Ws::new();
    ws.write("r.yaml", TWO_CELLS);
    // Passes only where the mitigation sets CUDA_LAUNCH_BLOCKING.
    let cmd = ["sh", "-c", "test -n \"$CUDA_LAUNCH_BLOCKING\""];
    let first = ws.build(&[], &cmd);
    assert_eq!(counts(&first), (4, 0), "{}", text(&first));
    assert_eq!(counts(&ws.build(&[], &cmd)), (0, 4));
    let all = ws.build(&["--rerun", "all"], &cmd);
    assert_eq!(counts(&all), (4, 0), "{}", text(&all));
    let failed = ws.build(&["--rerun", "failed"], &cmd);
    assert_eq!(counts(&failed), (2, 2), "{}", text(&failed));
    let cell = ws.build(&["--rerun-cell", "cuda_launch_blocking-none"], &cmd);
    assert_eq!(counts(&cell), (2, 2), "{}", text(&cell));
    let none_failed = ws.build(
        &[
            "--rerun",
            "failed",
            "--rerun-cell",
            "cuda_launch_blocking-none",
        ],
        &cmd,
    );
    assert_eq!(counts(&none_failed), (0, 4), "{}", text(&none_failed));
    // After a forced build the next one reuses the new results.
    assert_eq!(counts(&ws.build(&[], &cmd)), (0, 4));
    let bad = ws.build(&["--rerun-cell", "no-such-cell"], &cmd);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no cell named"));
}

/// `(cell, index) → key` of a dry run.
fn dry_keys(ws: &Ws, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["build", "r.yaml", "--dry-run", "--json"];
    args.extend(extra);
    args.extend(["--", "true"]);
    let o = ws.aorta(&args);
    assert!(o.status.success(), "{}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    plan["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["key_inputs"]["trial_keys"].as_array().unwrap().clone())
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn limits_and_hang_policy_are_in_the_key_and_placement_is_not() {
    let ws = Ws::new();
    let recipe = |extra: &str| ws.write("r.yaml", &format!("{TWO_CELLS}{extra}"));
    recipe("time_limit: 1\n");
    let short = dry_keys(&ws, &[]);
    recipe("time_limit: 10\n");
    let long = dry_keys(&ws, &[]);
    assert!(short.iter().zip(&long).all(|(a, b)| a != b));
    // --kill-on-hang changes what a hang does to the verdict.
    let killing = dry_keys(&ws, &["--kill-on-hang"]);
    assert!(long.iter().zip(&killing).all(|(a, b)| a != b));
    // How many run at once, and where results go, change nothing.
    assert_eq!(
        dry_keys(&ws, &["--jobs", "2", "--output", "elsewhere"]),
        long
    );
    recipe("time_limit: 10\naccount: somebody\n");
    assert_eq!(dry_keys(&ws, &[]), long);
    recipe("time_limit: 10\ngpus_per_trial: 2\n");
    assert_ne!(dry_keys(&ws, &[]), long);
}
