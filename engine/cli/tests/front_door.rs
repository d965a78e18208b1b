//! AORTA §11.12 routing parity, list commands, deprecated aliases, version and completions.
mod common;
use common::*;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn probe_recipe_with_command_takes_the_subprocess_flow() {
    let out = aorta(&[
        "sweep",
        "run",
        "--recipe",
        "recipes/quickstart.yaml",
        "--dry-run",
        "--",
        "echo",
        "hi",
    ]);
    assert!(out.status.success(), "{}", transcript(&out));
    let s = stdout(&out);
    assert!(
        s.starts_with("Dry run (probe): ticket=QUICKSTART-1 cells=6 trials/cell=5"),
        "{s}"
    );
    assert!(
        s.contains("Argv (forwarded byte-for-byte): ['echo', 'hi']"),
        "{s}"
    );
}

#[test]
fn empty_collect_is_ignored_in_the_probe_flow() {
    let out = aorta(&[
        "sweep",
        "run",
        "--recipe",
        "recipes/quickstart.yaml",
        "--collect",
        "",
        "--dry-run",
        "--",
        "true",
    ]);
    assert!(out.status.success(), "{}", transcript(&out));
}

#[test]
fn triage_recipe_takes_the_workload_flow() {
    let out = aorta(&[
        "sweep",
        "run",
        "--recipe",
        "recipes/example-fsdp-smoke.yaml",
        "--dry-run",
    ]);
    assert!(out.status.success(), "{}", transcript(&out));
    let s = stdout(&out);
    assert!(s.starts_with("Dry run: race / ticket=EXAMPLE-151"), "{s}");
    assert!(
        s.contains(
            "  - tf32_off-local: mitigations=['tf32_off'] environment=local trials=2 steps=1"
        ),
        "{s}"
    );
    assert!(s.contains("      env: DISABLE_TF32=1  [tf32_off]"), "{s}");
}

#[test]
fn flag_mode_takes_the_workload_flow() {
    let out = aorta(&[
        "sweep",
        "run",
        "--workload",
        "training",
        "--mitigation-axis",
        "none,cuda_launch_blocking",
        "--environment-axis",
        "local,image:rocm/pytorch:latest",
        "--trials",
        "2",
        "--steps",
        "5",
        "--dry-run",
    ]);
    assert!(out.status.success(), "{}", transcript(&out));
    let s = stdout(&out);
    assert!(
        s.contains("  - cuda_launch_blocking-_inline_982a8846:"),
        "{s}"
    );
    assert!(
        s.contains("  - _inline_982a8846 -> rocm/pytorch:latest"),
        "{s}"
    );
    assert!(s.contains("Baseline rule: none-local (auto)"), "{s}");
}

#[test]
fn collect_flag_overrides_recipe_collectors() {
    let out = aorta(&[
        "sweep",
        "run",
        "--recipe",
        "recipes/example-fsdp-smoke.yaml",
        "--collect",
        "numerics,rocprof",
        "--dry-run",
        "--json",
    ]);
    assert!(out.status.success(), "{}", transcript(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["cells"][0]["collect"],
        serde_json::json!(["numerics", "rocprof"])
    );
}

#[test]
fn deprecated_probe_reaches_the_same_plan_with_one_notice() {
    let new = aorta(&[
        "sweep",
        "run",
        "--recipe",
        "recipes/quickstart.yaml",
        "--stop-after-events",
        "1",
        "--max-trials",
        "4",
        "--disable-detector",
        "tier3",
        "--dry-run",
        "--",
        "true",
    ]);
    let old = aorta(&[
        "probe",
        "--recipe",
        "recipes/quickstart.yaml",
        "--stop-after-events",
        "1",
        "--max-trials",
        "4",
        "--disable-detector",
        "tier3",
        "--dry-run",
        "--",
        "true",
    ]);
    assert!(
        new.status.success() && old.status.success(),
        "{}\n{}",
        transcript(&new),
        transcript(&old)
    );
    assert_eq!(stdout(&new), stdout(&old));
    assert!(stdout(&new).contains("Stop after: 1 fail trial(s), up to 4 per cell"));
    assert!(stdout(&new).contains("Disabled detectors: tier3"));
    assert_eq!(
        stderr(&old).trim(),
        "warning: 'aorta probe' is deprecated and will be removed in a future release; use 'aorta sweep run' instead."
    );
}

#[test]
fn deprecated_triage_commands_work_with_a_notice() {
    let new = aorta(&[
        "sweep",
        "run",
        "--recipe",
        "recipes/example-fsdp-smoke.yaml",
        "--dry-run",
    ]);
    let old = aorta(&[
        "triage",
        "run",
        "--recipe",
        "recipes/example-fsdp-smoke.yaml",
        "--dry-run",
    ]);
    assert_eq!(stdout(&new), stdout(&old));
    assert!(stderr(&old).contains("'aorta triage run' is deprecated"));
    let old = aorta(&["triage", "list-mitigations"]);
    assert!(old.status.success());
    assert_eq!(stdout(&old), stdout(&aorta(&["sweep", "list-mitigations"])));
    assert!(stderr(&old).contains("use 'aorta sweep list-mitigations'"));
    let old = aorta(&["probe", "--list-patterns"]);
    assert!(
        old.status.success() && stdout(&old).starts_with("aorta probe built-in pattern library")
    );
}

#[test]
fn list_commands_as_tables_and_json() {
    let out = aorta(&["mitigations", "list"]);
    assert!(out.status.success());
    let s = stdout(&out);
    assert!(s.starts_with("NAME "), "{s}");
    assert!(
        s.lines()
            .any(|l| l.starts_with("tf32_off ") && l.contains("DISABLE_TF32=1")),
        "{s}"
    );
    assert!(
        s.lines()
            .any(|l| l.starts_with("nccl_nvls_disable ") && l.contains("NCCL_NVLS_ENABLE=0")),
        "{s}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&aorta(&["mitigations", "list", "--json"]).stdout).unwrap();
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 22 + 13, "{names:?}");
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted by name");
    for m in json.as_array().unwrap() {
        assert!(!m["description"].as_str().unwrap().is_empty(), "{m}");
    }
    let out = aorta(&[
        "environments",
        "list",
        "--file",
        "tests/fixtures/sidecars/mitigations-sidecar.json",
    ]);
    let s = stdout(&out);
    assert!(
        s.lines()
            .any(|l| l.starts_with("my_local_image ")
                && l.contains("sidecar:mitigations-sidecar.json")),
        "{s}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&aorta(&["sweep", "list-environments", "--json"]).stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
}

#[test]
fn list_patterns_catalogue_and_version() {
    let out = aorta(&["sweep", "list-patterns"]);
    let s = stdout(&out);
    assert!(s.starts_with("aorta sweep built-in pattern library (v4)\n\n  tier4:python_traceback\n      description: Python traceback header"), "{s}");
    assert!(s.contains("      negative  : note: Traceback (most recent call last): is printed by the handler below\n"), "{s}");
    assert!(s.contains("  tier3:nvidia_xid"));
    let v = stdout(&aorta(&["sweep", "list-patterns", "--version"]));
    assert_eq!(
        v,
        format!(
            "aorta sweep pattern library v4 (aorta {})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let json: serde_json::Value =
        serde_json::from_slice(&aorta(&["sweep", "list-patterns", "--json"]).stdout).unwrap();
    assert!(json["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| !p["sample"].as_str().unwrap().is_empty()));
    assert!(json["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| !p["negative"].as_str().unwrap().is_empty()));
}

#[test]
fn version_and_completions() {
    let out = aorta(&["--version"]);
    assert_eq!(
        stdout(&out),
        format!("aorta {}\n", env!("CARGO_PKG_VERSION"))
    );
    // The registration script of each shell calls this binary back at every <TAB>.
    let exe = assert_cmd::cargo::cargo_bin("aorta");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = aorta(&["completions", shell]);
        assert!(
            out.status.success() && stdout(&out).contains(&exe.display().to_string()),
            "{shell}: {}",
            stdout(&out)
        );
    }
    let out = aorta(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// What the shell offers at <TAB> (fish's protocol: one `value<TAB>help` per line).
fn complete(words: &[&str]) -> Vec<String> {
    let mut args = vec!["--", "aorta"];
    args.extend(words);
    let out = assert_cmd::Command::cargo_bin("aorta")
        .unwrap()
        .current_dir(repo_root())
        .env("COMPLETE", "fish")
        .env(
            "AORTA_WORKLOAD_PATH",
            repo_root().join("engine/cli/tests/fixtures/stand-in-workloads"),
        )
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn completions_offer_labels_mitigations_environments_and_workloads() {
    // Labels from the workspace's BUCK files, and the package patterns.
    assert_eq!(
        complete(&["build", "//recipes:quick"]),
        ["//recipes:quickstart"]
    );
    let all = complete(&["build", "//recipes"]);
    assert!(all.contains(&"//recipes:gpu-smoke".to_string()), "{all:?}");
    assert!(all.contains(&"//recipes/...".to_string()), "{all:?}");
    assert_eq!(
        complete(&["explain", "//recipes:quick"]),
        ["//recipes:quickstart"]
    );
    // Recipe files beside labels.
    assert!(complete(&["build", "recipes/quick"]).contains(&"recipes/quickstart.yaml".to_string()));
    // Mitigation names, also after a comma (the names typed are not offered again).
    assert_eq!(
        complete(&["sweep", "run", "--mitigation-axis", "none,cuda_launch_b"]),
        ["none,cuda_launch_blocking"]
    );
    assert_eq!(
        complete(&["agent", "--mitigation", "cuda_launch_b"]),
        ["cuda_launch_blocking"]
    );
    assert_eq!(
        complete(&["run", "--mitigations", "none,no"]),
        Vec::<String>::new()
    );
    assert!(complete(&["run", "--environment", ""]).contains(&"local".to_string()));
    // Workloads `aorta run` would find.
    let w = complete(&["run", "--workload", ""]);
    assert!(
        w.contains(&"pyecho".to_string()) && w.contains(&"gpu_smoke".to_string()),
        "{w:?}"
    );
    // Subcommands and flags as before.
    assert!(complete(&["bu"]).contains(&"build".to_string()));
    assert!(complete(&["build", "--dry"]).contains(&"--dry-run".to_string()));
}

#[test]
fn help_in_the_option_zone_bypasses_the_separator_guard() {
    let out = aorta(&["sweep", "run", "--help"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("--recipe"));
    // A user switching from AORTA finds the differences from the help.
    assert!(
        stdout(&out).contains("docs/compatibility.md"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&aorta(&["--help"])).contains("docs/compatibility.md"));
}

#[test]
fn every_recipe_dry_runs_through_labels() {
    let out = aorta(&["build", "//recipes/...", "--dry-run", "--json"]);
    assert!(out.status.success(), "{}", transcript(&out));
    let plans: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let plans = plans.as_array().unwrap();
    assert!(plans.len() >= 18, "{}", plans.len());
    let quick = plans
        .iter()
        .find(|p| p["label"] == "//recipes:quickstart")
        .unwrap();
    assert_eq!(
        quick["argv"],
        serde_json::json!(["bash", "recipes/quickstart.sh"])
    );
    assert_eq!(quick["cells"].as_array().unwrap().len(), 6);
}

#[test]
fn env_key_and_diff_of_snapshots() {
    let out = aorta(&["env", "key", "docs/examples/h200-env.json"]);
    assert!(out.status.success(), "{}", transcript(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().next().unwrap().len(), 64, "{text}");
    let dir = tempfile::tempdir().unwrap();
    let original =
        std::fs::read_to_string(common::repo_root().join("docs/examples/h200-env.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
    v["env_vars"]["CUDA_DEVICE_MAX_CONNECTIONS"] = serde_json::json!("1");
    let changed = dir.path().join("changed.json");
    std::fs::write(&changed, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let out = aorta(&[
        "env",
        "diff",
        "docs/examples/h200-env.json",
        changed.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        stdout(&out).contains("CUDA_DEVICE_MAX_CONNECTIONS"),
        "{}",
        transcript(&out)
    );
    let mut v2: serde_json::Value = serde_json::from_str(&original).unwrap();
    v2["host"]["hostname"] = serde_json::json!("elsewhere");
    let host = dir.path().join("host.json");
    std::fs::write(&host, serde_json::to_string_pretty(&v2).unwrap()).unwrap();
    let out = aorta(&[
        "env",
        "diff",
        "docs/examples/h200-env.json",
        host.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a hostname never changes the key: {}",
        transcript(&out)
    );
}

#[test]
fn an_argument_that_is_not_utf8_is_an_input_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"\xff.yaml");
    let run = |args: &[&std::ffi::OsStr]| {
        assert_cmd::Command::cargo_bin("aorta")
            .unwrap()
            .current_dir(repo_root())
            .env("NO_COLOR", "1")
            .env_remove("RUST_BACKTRACE")
            .args(args)
            .output()
            .unwrap()
    };
    // A path may be any bytes: the recipe is looked for, and is missing.
    let out = run(&[
        "sweep".as_ref(),
        "run".as_ref(),
        "--recipe".as_ref(),
        bad,
        "--".as_ref(),
        "true".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read"),
        "{}",
        transcript(&out)
    );
    // A bare word before `--` is still a forgotten separator; a command word must be UTF-8.
    for args in [
        vec![
            "sweep".as_ref(),
            "run".as_ref(),
            "--recipe".as_ref(),
            "r.yaml".as_ref(),
            bad,
        ],
        vec![
            "sweep".as_ref(),
            "run".as_ref(),
            "--recipe".as_ref(),
            "r.yaml".as_ref(),
            "--".as_ref(),
            bad,
        ],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("panicked"),
            "{}",
            transcript(&out)
        );
    }
}

/// An aorta without the example workload beside it (as `cargo run --bin aorta` leaves it) says
/// how the example is built, not a circular "run the one shipped next to aorta".
#[test]
fn a_missing_example_workload_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("aorta");
    std::fs::copy(assert_cmd::cargo::cargo_bin("aorta"), &alone).unwrap();
    let out = std::process::Command::new(&alone)
        .args(["run", "--workload", "example", "--trials", "1"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("PATH", "/usr/bin:/bin")
        .env_remove("AORTA_WORKLOAD_PATH")
        .env("AORTA_STORE", dir.path().join("store"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("cargo build --release -p aorta-cli"), "{err}");
}

/// `aorta build //recipes/...` with a target that cannot build (a probe recipe with no command):
/// without `--keep-going` it stops there and says how to go on; with it, the other targets
/// build, the bad one is reported and listed at the end, and the exit code is its.
#[test]
fn keep_going_builds_the_other_targets_and_lists_the_skipped() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    std::fs::write(root.join(".aorta-root"), "").unwrap();
    std::fs::create_dir_all(root.join("rules")).unwrap();
    std::fs::copy(
        repo_root().join("rules/aorta.bzl"),
        root.join("rules/aorta.bzl"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("recipes")).unwrap();
    let recipe = |ticket: &str| {
        format!("schema_version: 1\nmode: probe\nticket: {ticket}\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n")
    };
    std::fs::write(root.join("recipes/a_nocmd.yaml"), recipe("A")).unwrap();
    std::fs::write(root.join("recipes/b_good.yaml"), recipe("B")).unwrap();
    std::fs::write(
        root.join("recipes/BUCK"),
        "load(\"//rules:aorta.bzl\", \"aorta_recipe\")\naorta_recipe(name = \"a_nocmd\", recipe = \"a_nocmd.yaml\")\naorta_recipe(name = \"b_good\", recipe = \"b_good.yaml\", command = [\"true\"])\n",
    )
    .unwrap();
    let build = |extra: &[&str]| {
        let mut args = vec!["build", "//recipes/..."];
        args.extend_from_slice(extra);
        std::process::Command::new(assert_cmd::cargo::cargo_bin("aorta"))
            .args(&args)
            .current_dir(root)
            .env("NO_COLOR", "1")
            .env("AORTA_STORE", root.join("store"))
            .output()
            .unwrap()
    };
    let stop = build(&[]);
    let err = String::from_utf8_lossy(&stop.stderr);
    assert_eq!(stop.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--keep-going builds the other targets"),
        "{err}"
    );
    assert!(!root.join("probe_results/B/matrix.json").exists());

    let go = build(&["--keep-going"]);
    let err = String::from_utf8_lossy(&go.stderr);
    assert_eq!(go.status.code(), Some(2), "{err}");
    assert!(root.join("probe_results/B/matrix.json").is_file(), "{err}");
    assert!(
        err.contains("aorta: 1 of 2 target(s) skipped: //recipes:a_nocmd (exit 2)"),
        "{err}"
    );
}

/// `aorta run` names where results go once: `--results-dir` (AORTA's) and `--output` together
/// are a usage error, not one silently winning.
#[test]
fn run_takes_one_results_directory() {
    let out = aorta(&[
        "run",
        "--workload",
        "example",
        "--results-dir",
        "a",
        "--output",
        "b",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

/// `aorta bench hw-queue --help` is the tool's own help, its usage naming the command the user
/// typed (not `aorta-hw-queue`), and the tool's exit code; with no tool beside aorta or on
/// PATH it is a usage error that says how to build it.
#[test]
fn bench_hw_queue_help_is_the_tools_under_the_typed_name() {
    let aorta_bin = assert_cmd::cargo::cargo_bin("aorta");
    let tool = aorta_bin.with_file_name("aorta-hw-queue");
    if !tool.is_file() {
        // `cargo test -p aorta-cli` alone does not build the workspace's other binaries.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = std::process::Command::new(cargo)
            .args(["build", "--quiet", "-p", "aorta-hw-queue"])
            .current_dir(repo_root())
            .status()
            .unwrap();
        assert!(built.success(), "cannot build aorta-hw-queue");
    }
    let out = aorta(&["bench", "hw-queue", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Usage: aorta bench hw-queue <COMMAND>"),
        "{text}"
    );
    assert!(text.contains("compare"), "{text}");
    // Without the tool: found neither beside aorta nor on PATH.
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("aorta");
    std::fs::copy(&aorta_bin, &lone).unwrap();
    // The copy's write descriptor may live on for a moment in a child another test thread
    // forked meanwhile: running it is "text file busy" until that child execs.
    let mut tries = 0;
    let out = loop {
        match std::process::Command::new(&lone)
            .args(["bench", "hw-queue", "--help"])
            .env("PATH", dir.path())
            .env("NO_COLOR", "1")
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        stderr(&out).contains("aorta-hw-queue was not found next to aorta or on PATH"),
        "{}",
        transcript(&out)
    );
}

/// `aorta build --trails 3 …` is a mistyped flag, not a command to pass after `--` (clap's
/// own tip): said with the flags that do take trials.
#[test]
fn build_names_a_mistyped_flag_and_where_trials_are_set() {
    let out = aorta(&["build", "--trails", "3", "//recipes:quickstart"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("unknown flag '--trails'"), "{err}");
    assert!(
        err.contains("`trials:`") && !err.contains("'-- --trails'"),
        "{err}"
    );
    let out = aorta(&["build", "--dry-rn", "//recipes:quickstart"]);
    assert!(
        stderr(&out).contains("did you mean '--dry-run'?"),
        "{}",
        stderr(&out)
    );
    // Labels stay bare words; flags with values and `--` still parse.
    let out = aorta(&["build", "//recipes:quickstart", "--jobs", "2", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// AORTA 0.3.0's `env probe` flags: `--extended` is accepted (aorta keeps no kernel catalogs),
/// `--execution-context` is recorded as `probe.invocation` (never keyed), the Buck cquery
/// flags are refused with what to do instead.
#[test]
fn env_probe_takes_aorta_0_3_0_flags() {
    let out = aorta(&["env", "probe", "--extended", "--summary", "--no-cache"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = aorta(&["env", "probe", "--buck-option", "mode=opt", "--summary"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--buck-option is AORTA 0.3.0's Buck cquery")
            && stderr(&out).contains("buck2_action"),
        "{}",
        stderr(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("env.json");
    let out = aorta(&[
        "env",
        "probe",
        "--no-cache",
        "--execution-context",
        "buck2_action",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["probe"]["invocation"], "buck2_action");
    // Warned exactly where no isolation was seen (AORTA 0.3.0's container_detected).
    assert_eq!(
        stderr(&out).contains("may be the wrong place to probe"),
        v["host"]["runtime"]["container_detected"] == false,
        "{}",
        stderr(&out)
    );
    let out = aorta(&["env", "probe", "--execution-context", "remote"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `aorta env diff` reads AORTA's own env.json (0.2.1's schema 1.7, 0.3.0's 1.17), in either
/// place and against another AORTA file, and says at the top what it imported and did not
/// compare (engine/probe/tests/fixtures/aorta: real snapshots of one machine).
#[test]
fn env_diff_reads_aorta_snapshots() {
    let fx = "engine/probe/tests/fixtures/aorta";
    let (old, new, ours) = (
        format!("{fx}/aorta-0.2.1-cpu.json"),
        format!("{fx}/aorta-0.3.0-cpu.json"),
        format!("{fx}/aorta-cpu.json"),
    );
    let out = aorta(&["env", "diff", &new, &ours]);
    // Exit 1: trials keyed by one would not be reused under the other.
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    insta::assert_snapshot!("env_diff_aorta_0_3_0_vs_aorta", transcript(&out));
    let out = aorta(&["env", "diff", &ours, &new]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "A: {ours}\nB: {new}\n   imported from AORTA 0.3.0's env.json (schema 1.17); "
        )),
        "{text}"
    );
    let out = aorta(&["env", "diff", &old, &new]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    insta::assert_snapshot!("env_diff_aorta_0_2_1_vs_0_3_0", transcript(&out));
    let out = aorta(&["env", "diff", "--json", &new, &ours]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["imported_a"]["from"], "AORTA 0.3.0");
    assert!(v.get("imported_b").is_none());
    assert_eq!(v["unlisted"]["partial_reasons"], true);
}

/// Where a snapshot keys trials, AORTA's env.json is bad input (exit 2) that names `env diff`;
/// a file that is neither tool's is the same error as before.
#[test]
fn aorta_snapshots_key_no_trials_and_the_error_says_to_diff_them() {
    let aorta_json = "engine/probe/tests/fixtures/aorta/aorta-0.3.0-cpu.json";
    let out = aorta(&["env", "key", aorta_json]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    insta::assert_snapshot!("env_key_of_aorta_json", transcript(&out));
    let ws = Ws::with_recipe(
        "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n",
    );
    let abs = repo_root().join(aorta_json);
    let out = ws.build(&["--env-snapshot", abs.to_str().unwrap()], &["true"]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    let err = stderr(&out)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        err.contains("this is AORTA 0.3.0's env.json (schema 1.17), which cannot key trials")
            && err.contains("aorta env diff AORTA.json env.json"),
        "{err}"
    );
    let other = ws.write("other.json", r#"{"schema_version": "2.0"}"#);
    let out = aorta(&["env", "diff", other.to_str().unwrap(), aorta_json]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    // miette wraps the message at the terminal's width, continuing lines with a bar.
    let err = stderr(&out)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        err.contains("schema_version '2.0' is neither an aorta env snapshot")
            && err.contains("nor AORTA's env.json (1.N)"),
        "{err}"
    );
}

/// A libtorch workload built on another machine (its RUNPATH names that machine's libtorch)
/// cannot start until libtorch's lib folder is on the loader's path: `describe` is asked again
/// with it (as its trials run), instead of the cell failing with "describe exited 127".
#[test]
fn a_libtorch_workload_built_elsewhere_is_described_with_libtorchs_path() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("torch/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libtorch_cpu.so"), "").unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("aorta-workload-movedtorch");
    std::fs::write(
        &exe,
        format!(
            "#!/bin/sh\n\
             case \":$LD_LIBRARY_PATH:\" in *\":{lib}:\"*) ;; *) echo 'error while loading shared libraries: libtorch_cpu.so' >&2; exit 127;; esac\n\
             case \"$1\" in describe) echo '{{\"protocol\": 1, \"name\": \"movedtorch\", \"version\": \"1\", \"requires\": [\"libtorch\"]}}'; exit 0;; esac\n\
             echo '{{\"passed\": true, \"main_work_started\": true, \"failure_details\": [], \"total_iterations\": 1, \"executed_iterations\": 1}}' > \"$5\"\n",
            lib = lib.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |libtorch: &std::path::Path| {
        assert_cmd::Command::cargo_bin("aorta")
            .unwrap()
            .args(["run", "--workload", "movedtorch", "--trials", "1"])
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .env("AORTA_WORKLOAD_PATH", &bin)
            .env("AORTA_LIBTORCH", libtorch)
            .env_remove("LD_LIBRARY_PATH")
            .env("AORTA_STORE", dir.path().join("store"))
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .output()
            .unwrap()
    };
    let out = run(&lib);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // Without a libtorch it can load, the cell still says why it could not run.
    let elsewhere = dir.path().join("other/lib");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("libtorch_cpu.so"), "").unwrap();
    let out = run(&elsewhere);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exit status: 127"),
        "{}",
        transcript(&out)
    );
}
