//! Every bad recipe, sidecar and flag gets a located, hinted report and exit code 2 — pinned
//! with insta snapshots so a regression in a message or a location shows up in review.
mod common;
use common::*;

fn rel(path: &std::path::Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn assert_bad(out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(2), "{}", transcript(out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
    assert!(
        stderr.contains("help:"),
        "every report carries a hint:\n{stderr}"
    );
}

#[test]
fn bad_recipes() {
    insta::glob!("../../../tests/fixtures", "bad-recipes/*", |path| {
        let p = rel(path);
        let out = aorta(&["build", &p, "--dry-run"]);
        assert_bad(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Every recipe diagnostic names the file and a line:column.
        assert!(
            stderr.contains(&format!("[{p}:")),
            "no file:line:col in\n{stderr}"
        );
        insta::assert_snapshot!(transcript(&out));
    });
}

#[test]
fn bad_sidecars() {
    insta::glob!("../../../tests/fixtures", "sidecars/bad-*.json", |path| {
        let p = rel(path);
        // This one collides only with the example sidecar, so pass both.
        let out = if p.ends_with("bad-collides-sidecar.json") {
            aorta(&[
                "mitigations",
                "list",
                "--file",
                "tests/fixtures/sidecars/mitigations-sidecar.json",
                "--file",
                &p,
            ])
        } else {
            aorta(&["mitigations", "list", "--file", &p])
        };
        assert_bad(&out);
        insta::assert_snapshot!(transcript(&out));
    });
}

#[test]
fn bad_flags() {
    let cases: &[(&str, &[&str])] = &[
        (
            "sweep-run-mistyped-flag",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--trails",
                "3",
                "--",
                "true",
            ],
        ),
        (
            "explain-build-only-flags",
            &[
                "explain",
                "recipes/quickstart.yaml",
                "--cell",
                "none-none",
                "--strict",
                "--slurm-partition",
                "gpu",
            ],
        ),
        (
            "trial-exec-build-only-flag",
            &[
                "trial",
                "exec",
                "--recipe",
                "recipes/quickstart.yaml",
                "--cell",
                "none-none",
                "--trial",
                "0",
                "--out",
                "/nonexistent/out",
                "--detach",
                "--",
                "true",
            ],
        ),
        (
            "run-extra-env-not-k-v",
            &["run", "--workload", "example", "--extra-env", "NCCL_DEBUG"],
        ),
        (
            "run-config-not-an-object",
            &["run", "--workload", "example", "--config", "[1, 2]"],
        ),
        (
            "run-unknown-mitigation",
            &[
                "run",
                "--workload",
                "example",
                "--mitigations",
                "no_such_knob",
            ],
        ),
        (
            "jobs-zero",
            &[
                "build",
                "recipes/quickstart.yaml",
                "--jobs",
                "0",
                "--dry-run",
                "--",
                "true",
            ],
        ),
        (
            "missing-separator",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "bash",
                "x.sh",
            ],
        ),
        (
            "nothing-after-separator",
            &["sweep", "run", "--recipe", "recipes/quickstart.yaml", "--"],
        ),
        (
            "leaked-flag-after-separator",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--",
                "-x",
            ],
        ),
        (
            "probe-recipe-without-command",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--dry-run",
            ],
        ),
        (
            "command-with-triage-recipe",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/example-fsdp-smoke.yaml",
                "--dry-run",
                "--",
                "true",
            ],
        ),
        (
            "flag-mode-missing",
            &["sweep", "run", "--workload", "training", "--dry-run"],
        ),
        (
            "flag-mode-trials-zero",
            &[
                "sweep",
                "run",
                "--workload",
                "training",
                "--mitigation-axis",
                "none",
                "--environment-axis",
                "local",
                "--trials",
                "0",
                "--steps",
                "1",
                "--dry-run",
            ],
        ),
        (
            "flag-mode-unknown-mitigation",
            &[
                "sweep",
                "run",
                "--workload",
                "training",
                "--mitigation-axis",
                "none,tf32_of",
                "--environment-axis",
                "local",
                "--trials",
                "1",
                "--steps",
                "1",
                "--dry-run",
            ],
        ),
        (
            "flag-mode-empty-image",
            &[
                "sweep",
                "run",
                "--workload",
                "training",
                "--mitigation-axis",
                "none",
                "--environment-axis",
                "image:",
                "--trials",
                "1",
                "--steps",
                "1",
                "--dry-run",
            ],
        ),
        (
            "recipe-conflicts-with-flags",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/example-fsdp-smoke.yaml",
                "--trials",
                "3",
                "--dry-run",
            ],
        ),
        (
            "passthrough-in-workload-flow",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/example-fsdp-smoke.yaml",
                "--env-passthrough-mode",
                "file",
                "--dry-run",
            ],
        ),
        (
            "stop-after-in-workload-flow",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/example-fsdp-smoke.yaml",
                "--max-trials",
                "3",
                "--dry-run",
            ],
        ),
        (
            "triage-flags-with-command",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--workload",
                "x",
                "--",
                "true",
            ],
        ),
        (
            "collect-with-command",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--collect",
                "rocprof",
                "--",
                "true",
            ],
        ),
        (
            "stop-after-without-cap",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--stop-after-events",
                "2",
                "--dry-run",
                "--",
                "true",
            ],
        ),
        (
            "disable-detector-typo",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/quickstart.yaml",
                "--disable-detector",
                "tier2:hnag",
                "--dry-run",
                "--",
                "true",
            ],
        ),
        (
            "unknown-collector-flag",
            &[
                "sweep",
                "run",
                "--recipe",
                "recipes/example-fsdp-smoke.yaml",
                "--collect",
                "nsys",
                "--dry-run",
            ],
        ),
        ("bad-label", &["build", "//recipes:a:b", "--dry-run"]),
        (
            "missing-target",
            &["build", "//recipes:quickstrat", "--dry-run"],
        ),
        (
            "missing-recipe-file",
            &[
                "sweep",
                "run",
                "--recipe",
                "no/such/recipe.yaml",
                "--dry-run",
                "--",
                "true",
            ],
        ),
        (
            "probe-version-without-list",
            &[
                "probe",
                "--version",
                "--recipe",
                "recipes/quickstart.yaml",
                "--",
                "true",
            ],
        ),
        (
            "probe-build-without-command",
            &[
                "build",
                "recipes/quickstart.yaml",
                "--store",
                "/nonexistent/never-created",
            ],
        ),
    ];
    for (name, args) in cases {
        let out = aorta(args);
        assert_bad(&out);
        insta::assert_snapshot!(*name, transcript(&out));
    }
}
