//! GPU sanitizers on the diagnostic axis (docs/diagnostics.md), on a machine without a GPU:
//! without compute-sanitizer the cell is an error that says so; with a stand-in replaying the
//! reports recorded on the H100, a hazard fails the cell with its kernel and line, a clean
//! report passes, the timeout scales, keys differ from the plain cell and reruns are hits.

mod common;
use common::{files_under, repo_root, Ws};
use std::path::Path;
use std::process::{Command, Output};

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: S\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none, compute_sanitizer_memcheck]\n";

fn sweep(ws: &Ws, report: Option<&str>, command: &[&str]) -> Output {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws.path())
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.path().join("store"))
        .env_remove("AORTA_REMOTE_CACHE")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env("PATH", "/usr/bin:/bin")
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        );
    match report {
        Some(r) => c
            .env(
                "AORTA_COMPUTE_SANITIZER",
                repo_root().join("engine/cli/tests/fixtures/stand-in-compute-sanitizer"),
            )
            .env(
                "AORTA_TEST_SANITIZER_REPORT",
                repo_root().join("tests/fixtures/gpu/h100-cuda13").join(r),
            ),
        None => c.env_remove("AORTA_COMPUTE_SANITIZER"),
    };
    c.args([
        "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--",
    ])
    .args(command)
    .output()
    .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn matrix(ws: &Ws) -> String {
    std::fs::read_to_string(ws.path().join("out/S/matrix.md")).unwrap()
}

fn record(ws: &Ws, cell: &str) -> serde_json::Value {
    let dir = ws.path().join("out/S").join(cell);
    let found = files_under(&dir)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "result.json"))
        .unwrap_or_else(|| panic!("no result.json under {}", dir.display()));
    serde_json::from_str(&std::fs::read_to_string(found).unwrap()).unwrap()
}

#[test]
fn without_compute_sanitizer_the_cell_is_an_error_that_says_where_it_looked() {
    let ws = Ws::with_recipe(RECIPE);
    let out = sweep(&ws, None, &["true"]);
    let r = record(&ws, "none-compute_sanitizer_memcheck");
    assert_eq!(r["verdict"], "error", "{}", text(&out));
    assert_eq!(r["failure_type"], "sanitizer_unavailable");
    let msg = r["error_message"].as_str().unwrap();
    assert!(
        msg.starts_with("not applicable: compute-sanitizer not found (looked in")
            && msg.contains("AORTA_COMPUTE_SANITIZER"),
        "{msg}"
    );
    assert_eq!(record(&ws, "none-none")["verdict"], "pass");
}

#[test]
fn a_hazard_fails_the_cell_with_its_kernel_line_and_allocation() {
    let ws = Ws::with_recipe(RECIPE);
    // The program's own exit code follows from the abort memcheck caused (as on the H100):
    // the sanitizer's finding still comes first, as the cell's top failure.
    let out = sweep(&ws, Some("cs13-memcheck-oob.txt"), &["false"]);
    let r = record(&ws, "none-compute_sanitizer_memcheck");
    assert_eq!(r["verdict"], "fail", "{}", text(&out));
    assert_eq!(r["failure_detectors_fired"][0], "sanitizer:memcheck");
    assert_eq!(r["failure_detectors_fired"][1], "tier1:exit_nonzero");
    let s = &r["sanitizer"];
    assert_eq!(
        (s["tool"].as_str(), s["errors"].as_u64()),
        (Some("memcheck"), Some(129))
    );
    assert_eq!(s["hazards"][0]["location"], "oob.cu:5");
    assert_eq!(s["hazards"][0]["kernel"], "oob(float *, int)");
    // The tool ran with aorta's options; its full log is kept with the trial.
    let cell = ws.path().join("out/S/none-compute_sanitizer_memcheck");
    let files = files_under(&cell);
    let args = files
        .iter()
        .find(|p| p.ends_with("standin-args.txt"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap();
    assert!(
        args.starts_with("--tool memcheck --target-processes all --log-file "),
        "{args}"
    );
    assert!(
        args.trim_end().ends_with("sanitizer-%p.log false"),
        "{args}"
    );
    assert!(files.iter().any(|p| {
        let n = p.file_name().unwrap().to_string_lossy();
        n.starts_with("sanitizer-") && n.ends_with(".log")
    }));
    // matrix.md says what and where, the plain cell passed.
    let m = matrix(&ws);
    assert!(
        m.contains("memcheck: 129 errors; 100 × Invalid __global__ write of size 4 bytes in oob(float *, int) at oob.cu:5"),
        "{m}"
    );
    assert_eq!(record(&ws, "none-none")["verdict"], "fail");
    // A rerun is all store hits; the two cells have different keys.
    let again = sweep(&ws, Some("cs13-memcheck-oob.txt"), &["false"]);
    assert!(
        text(&again).contains("0 executed, 2 reused"),
        "{}",
        text(&again)
    );
    assert_ne!(record(&ws, "none-none")["key"], r["key"]);
}

#[test]
fn a_clean_report_passes_and_the_timeout_scales_under_the_sanitizer() {
    // 1 s per trial: the plain cell's `sleep 2` times out, the sanitized one has 20 s.
    let ws = Ws::with_recipe(&format!("{RECIPE}timeout_per_trial: 1\n"));
    let out = sweep(&ws, Some("cs13-memcheck-clean.txt"), &["sleep", "2"]);
    let r = record(&ws, "none-compute_sanitizer_memcheck");
    assert_eq!(r["verdict"], "pass", "{}", text(&out));
    assert_eq!(r["sanitizer"]["errors"], 0);
    assert_eq!(r["sanitizer"]["complete"], true);
    let plain = record(&ws, "none-none");
    assert_eq!(plain["timed_out"], true, "{}", text(&out));
}

#[test]
fn a_sanitizer_on_the_mitigation_axis_is_bad_input_with_a_hint() {
    let ws = Ws::with_recipe(
        "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none, compute_sanitizer_racecheck]\ndiagnostic_axis: [none]\n",
    );
    let out = sweep(&ws, None, &["true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("'compute_sanitizer_racecheck' is a diagnostic, not a mitigation"),
        "{t}"
    );
    assert!(t.contains("diagnostic_axis"), "{t}");
    assert!(t.contains("r.yaml:4"), "{t}");
}

/// `collect: [ncu]` wraps the command in Nsight Compute (here a stand-in replaying the H100's
/// recording; under CUDA_LAUNCH_BLOCKING a copy whose saxpy kernel is renamed): per-cell
/// kernel tables and the difference from the baseline in matrix.md; the collector is keyed.
#[test]
fn ncu_profiles_each_cell_and_matrix_md_compares_them_with_the_baseline() {
    let ws = Ws::with_recipe(
        "schema_version: 1\nmode: probe\nticket: S\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\ncollect: [ncu]\n",
    );
    let fixture = repo_root().join("tests/fixtures/gpu/h100-cuda13/ncu-clean-raw.csv");
    let blocking = ws.write(
        "blocking.csv",
        &std::fs::read_to_string(&fixture)
            .unwrap()
            .replace("\"saxpy(float,", "\"saxpy_serial(float,"),
    );
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(ws.path())
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.path().join("store"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env(
            "AORTA_NCU",
            repo_root().join("engine/cli/tests/fixtures/stand-in-ncu"),
        )
        .env("AORTA_TEST_NCU_REPORT", &fixture)
        .env("AORTA_TEST_NCU_REPORT_BLOCKING", &blocking)
        .args([
            "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--", "true",
        ])
        .output()
        .unwrap();
    let r = record(&ws, "none-none");
    assert_eq!(r["profiles"][0]["tool"], "ncu", "{}", text(&out));
    assert_eq!(
        r["profiles"][0]["kernels"][0]["name"],
        "saxpy(float, const float *, float *, int)"
    );
    assert_eq!(r["profiles"][0]["kernels"][0]["calls"], 10);
    let m = matrix(&ws);
    assert!(m.contains("## Kernel profiles"), "{m}");
    assert!(m.contains("| none-none "), "{m}");
    assert!(m.contains("`saxpy` 0.062 ms ×10"), "{m}");
    assert!(
        m.contains("new: `saxpy_serial` 0.062 ms; gone: `saxpy` 0.062 ms"),
        "{m}"
    );
    // A profiler changes what runs: its cells are keyed apart from unprofiled ones.
    let plain = Ws::with_recipe(
        "schema_version: 1\nmode: probe\nticket: S\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n",
    );
    sweep(&plain, None, &["true"]);
    assert_ne!(record(&plain, "none-none")["key"], r["key"]);
}

/// `collect: [torch_profiler]` hooks the trial's Python: where torch cannot be imported the
/// profile says why (CI has no torch; the H100 run in docs/benchmarks.md has one).
#[test]
fn torch_profiler_hooks_python_and_says_why_when_torch_is_missing() {
    let has_torch = Command::new("python3")
        .args(["-c", "import torch"])
        .status()
        .is_ok_and(|s| s.success());
    let ws = Ws::with_recipe(
        "schema_version: 1\nmode: probe\nticket: S\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\ncollect: [torch_profiler]\n",
    );
    let out = sweep(&ws, None, &["python3", "-c", "print('hello')"]);
    let r = record(&ws, "none-none");
    assert_eq!(r["verdict"], "pass", "{}", text(&out));
    let p = &r["profiles"][0];
    assert_eq!(p["tool"], "torch_profiler");
    if !has_torch {
        assert!(
            p["note"]
                .as_str()
                .unwrap()
                .contains("No module named 'torch'"),
            "{p}"
        );
    }
}

// ROCm: RocJITsu's ConSan and Waitcheck (AORTA 0.3.0's rocjitsu_sanitizers). The hook is a
// library the HSA runtime loads, so the stand-in is the instrumented process itself
// (fixtures/stand-in-rocjitsu-app): given HSA_TOOLS_LIB it prints the reconstructed hook
// output of tests/fixtures/rocm/rocjitsu/ as the hook would.

const ROCM_RECIPE: &str = "schema_version: 1\nmode: probe\nticket: S\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none, rocjitsu_consan, rocjitsu_waitcheck]\n";

/// A RocJITsu prebuilt bundle's layout (`lib/librocjitsu_dbi_hooks.so`) in the workspace.
fn bundle(ws: &Ws) -> std::path::PathBuf {
    let hook = ws.write("rocjitsu/lib/librocjitsu_dbi_hooks.so", "stand-in hook\n");
    hook.parent().unwrap().parent().unwrap().to_path_buf()
}

fn rocm_sweep(ws: &Ws, prebuilt: Option<&Path>, report: &str, command: &[&str]) -> Output {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws.path())
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.path().join("store"))
        .env_remove("AORTA_REMOTE_CACHE")
        .env_remove("ROCJITSU_BUILD")
        .env("PATH", "/usr/bin:/bin")
        // A hostile inherited setting AORTA 0.3.0 pins over (test_consan.py).
        .env("RJ_CONSAN_MODE", "inline-shadow")
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env(
            "AORTA_TEST_ROCJITSU_REPORT",
            repo_root()
                .join("tests/fixtures/rocm/rocjitsu")
                .join(report),
        );
    match prebuilt {
        Some(p) => c.env("ROCJITSU_PREBUILT", p),
        None => c.env_remove("ROCJITSU_PREBUILT"),
    };
    let app = repo_root().join("engine/cli/tests/fixtures/stand-in-rocjitsu-app");
    c.args([
        "sweep", "run", "--recipe", "r.yaml", "--output", "out", "--",
    ])
    .arg(app)
    .args(command)
    .output()
    .unwrap()
}

fn trial_file(ws: &Ws, cell: &str, name: &str) -> String {
    let found = files_under(&ws.path().join("out/S").join(cell))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("no {name} in {cell}"));
    std::fs::read_to_string(found).unwrap()
}

#[test]
fn without_rocjitsu_the_cell_is_an_error_that_says_where_it_looked() {
    let ws = Ws::with_recipe(ROCM_RECIPE);
    let out = rocm_sweep(&ws, None, "consan-race.txt", &["true"]);
    for cell in ["none-rocjitsu_consan", "none-rocjitsu_waitcheck"] {
        let r = record(&ws, cell);
        assert_eq!(r["verdict"], "error", "{}", text(&out));
        assert_eq!(r["failure_type"], "sanitizer_unavailable");
        let msg = r["error_message"].as_str().unwrap();
        assert!(
            msg.starts_with("not applicable: librocjitsu_dbi_hooks.so not found (looked in $ROCJITSU_PREBUILT/lib (unset); $ROCJITSU_BUILD/lib/rocjitsu/src/rocjitsu/hooks (unset))"),
            "{msg}"
        );
    }
    assert_eq!(record(&ws, "none-none")["verdict"], "pass");
    // A bundle without the hook: the path it tried is named.
    let ws = Ws::with_recipe(ROCM_RECIPE);
    let empty = ws.path().join("empty-bundle");
    std::fs::create_dir_all(&empty).unwrap();
    rocm_sweep(&ws, Some(&empty), "consan-race.txt", &["true"]);
    let msg = record(&ws, "none-rocjitsu_consan")["error_message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains(&format!(
            "looked in {}",
            empty.join("lib/librocjitsu_dbi_hooks.so").display()
        )) && msg.contains("set ROCJITSU_PREBUILT"),
        "{msg}"
    );
}

#[test]
fn a_consan_race_fails_its_cell_and_the_hook_is_pinned_as_aorta_does() {
    let ws = Ws::with_recipe(ROCM_RECIPE);
    let prebuilt = bundle(&ws);
    let out = rocm_sweep(&ws, Some(&prebuilt), "consan-race.txt", &["true"]);
    let r = record(&ws, "none-rocjitsu_consan");
    assert_eq!(r["verdict"], "fail", "{}", text(&out));
    assert_eq!(r["failure_detectors_fired"][0], "sanitizer:consan");
    let s = &r["sanitizer"];
    assert_eq!(
        (s["tool"].as_str(), s["errors"].as_u64()),
        (Some("consan"), Some(3))
    );
    assert_eq!(s["complete"], true);
    assert_eq!(s["logs"][0], "stderr.log");
    assert_eq!(s["hazards"][1]["kernel"], "lds_reduce");
    // The hook, Record/Replay over the inherited inline-shadow, strict, debug log level.
    let stdout = trial_file(&ws, "none-rocjitsu_consan", "stdout.log");
    assert!(
        stdout.contains(&format!(
            "HSA_TOOLS_LIB={} HSA_TOOLS_DISABLE_REGISTER=1 RJ_CONSAN_MODE=record-replay RJ_CONSAN_POLICY=strict RJ_CONSAN_LOG=3",
            prebuilt.join("lib/librocjitsu_dbi_hooks.so").display()
        )),
        "{stdout}"
    );
    // The same run judged for its Waitcheck stage is clean; the plain cell is not hooked.
    assert_eq!(record(&ws, "none-rocjitsu_waitcheck")["verdict"], "pass");
    assert_eq!(record(&ws, "none-none")["verdict"], "pass");
    let m = matrix(&ws);
    assert!(
        m.contains("consan: 3 errors; 2 × ConSan Record/Replay conflicts reported only in a summary (reader=1); 1 more kind(s)"),
        "{m}"
    );
    // A rerun is all store hits; each entry keys apart from the plain cell and the other.
    let again = rocm_sweep(&ws, Some(&prebuilt), "consan-race.txt", &["true"]);
    assert!(
        text(&again).contains("0 executed, 3 reused"),
        "{}",
        text(&again)
    );
    let keys: std::collections::BTreeSet<String> = [
        "none-none",
        "none-rocjitsu_consan",
        "none-rocjitsu_waitcheck",
    ]
    .iter()
    .map(|c| record(&ws, c)["key"].as_str().unwrap().to_string())
    .collect();
    assert_eq!(keys.len(), 3);
}

#[test]
fn a_waitcheck_hazard_fails_its_cell_and_incomplete_coverage_is_an_error() {
    let ws = Ws::with_recipe(ROCM_RECIPE);
    let prebuilt = bundle(&ws);
    let out = rocm_sweep(&ws, Some(&prebuilt), "waitcheck-hazard.txt", &["true"]);
    let r = record(&ws, "none-rocjitsu_waitcheck");
    assert_eq!(r["verdict"], "fail", "{}", text(&out));
    assert_eq!(r["failure_detectors_fired"][0], "sanitizer:waitcheck");
    assert_eq!(record(&ws, "none-rocjitsu_consan")["verdict"], "pass");
    assert!(
        matrix(&ws).contains(
            "waitcheck: 1 error; 1 × missing s_wait_loadcnt <= 0 (at .text+0x40; consumer: v_mov_b32)"
        ),
        "{}",
        matrix(&ws)
    );
    // No race, but ConSan did not see the whole run: never a pass (AORTA fails it closed).
    let ws = Ws::with_recipe(ROCM_RECIPE);
    let prebuilt = bundle(&ws);
    let out = rocm_sweep(
        &ws,
        Some(&prebuilt),
        "consan-dynamic-incomplete.txt",
        &["true"],
    );
    let r = record(&ws, "none-rocjitsu_consan");
    assert_eq!(r["verdict"], "error", "{}", text(&out));
    assert!(
        r["error_detectors_fired"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "sanitizer:incomplete"),
        "{r}"
    );
    assert_eq!(
        r["sanitizer"]["gaps"][1],
        "coverage: verdict dynamic_complete=false"
    );
    assert!(
        matrix(&ws)
            .contains("consan: 0 errors (incomplete: coverage: verdict analysis_complete=false"),
        "{}",
        matrix(&ws)
    );
}

#[test]
fn a_hook_that_prints_nothing_is_no_report_and_timeouts_scale() {
    // 1 s per trial: the plain `sleep 2` times out, the hooked one has 20 s.
    let ws = Ws::with_recipe(&format!("{ROCM_RECIPE}timeout_per_trial: 1\n"));
    let prebuilt = bundle(&ws);
    let out = rocm_sweep(&ws, Some(&prebuilt), "consan-clean.txt", &["sleep", "2"]);
    let r = record(&ws, "none-rocjitsu_consan");
    assert_eq!(r["verdict"], "pass", "{}", text(&out));
    assert_eq!(r["sanitizer"]["complete"], true);
    assert_eq!(record(&ws, "none-none")["timed_out"], true);
    // The hook never spoke (the runtime did not load it): an error, never a pass.
    let ws = Ws::with_recipe(ROCM_RECIPE);
    let prebuilt = bundle(&ws);
    let out = rocm_sweep(&ws, Some(&prebuilt), "/dev/null", &["true"]);
    let r = record(&ws, "none-rocjitsu_consan");
    assert_eq!(r["verdict"], "error", "{}", text(&out));
    assert!(
        r["error_detectors_fired"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "sanitizer:no_report"),
        "{r}"
    );
    assert!(
        matrix(&ws).contains("consan: RocJITsu's hook printed nothing"),
        "{}",
        matrix(&ws)
    );
}

#[test]
fn rocjitsu_entries_leave_the_other_cells_keys_alone() {
    let base = "schema_version: 1\nmode: probe\nticket: S\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none, compute_sanitizer_memcheck";
    let before = Ws::with_recipe(&format!("{base}]\n"));
    let after = Ws::with_recipe(&format!("{base}, rocjitsu_consan, rocjitsu_waitcheck]\n"));
    sweep(&before, Some("cs13-memcheck-clean.txt"), &["true"]);
    sweep(&after, Some("cs13-memcheck-clean.txt"), &["true"]);
    for cell in ["none-none", "none-compute_sanitizer_memcheck"] {
        assert_eq!(
            record(&before, cell)["key"],
            record(&after, cell)["key"],
            "{cell}"
        );
    }
    assert_ne!(
        record(&after, "none-rocjitsu_consan")["key"],
        record(&after, "none-rocjitsu_waitcheck")["key"]
    );
}

#[test]
fn a_rocjitsu_entry_on_the_mitigation_axis_is_bad_input() {
    let ws = Ws::with_recipe(
        "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none, rocjitsu_consan]\ndiagnostic_axis: [none]\n",
    );
    let out = sweep(&ws, None, &["true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("'rocjitsu_consan' is a diagnostic, not a mitigation")
            && t.contains("RocJITsu's hook"),
        "{t}"
    );
    assert!(t.contains("r.yaml:4"), "{t}");
}
