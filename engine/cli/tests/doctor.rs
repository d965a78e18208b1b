//! `aorta doctor` end to end on a machine without a GPU: the vendor tools are stand-ins that
//! print the recorded fixtures (tests/fixtures/gpu/), the active checks a stand-in workload
//! answering in the workload protocol; and the `--doctor` preflight of a build.

mod common;

use common::{files_under, repo_root, Ws};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures/gpu").join(name)
}

fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A workspace with `bin/nvidia-smi` printing `xml` (and nothing for `nvlink`).
fn node(xml: &str) -> Ws {
    let ws = Ws::with_recipe(
        "schema_version: 1\nmode: probe\nticket: T\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n",
    );
    script(
        &ws.path().join("bin/nvidia-smi"),
        &format!(
            "case \"$1\" in nvlink) exit 0;; esac\ncat '{}'\n",
            fixture(xml).display()
        ),
    );
    ws
}

fn env(ws: &Ws) -> Vec<(&'static str, String)> {
    vec![
        (
            "AORTA_DOCTOR_NVIDIA_SMI",
            ws.path().join("bin/nvidia-smi").display().to_string(),
        ),
        ("AORTA_DOCTOR_AMD_SMI", "/nonexistent/amd-smi".into()),
        (
            "AORTA_DOCTOR_SYSFS_ROOT",
            ws.path().join("no-sysfs").display().to_string(),
        ),
        (
            "AORTA_DOCTOR_KMSG",
            fixture("h100-cuda13/kmsg.txt").display().to_string(),
        ),
        ("AORTA_DOCTOR_WINDOW_MS", "10".into()),
        (
            "AORTA_WORKLOAD_PATH",
            ws.path().join("workloads").display().to_string(),
        ),
    ]
}

fn run(ws: &Ws, args: &[&str], extra: &[(&'static str, String)]) -> std::process::Output {
    let mut e = env(ws);
    e.extend(extra.iter().cloned());
    let pairs: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ws.aorta_env(args, &pairs)
}

fn out(o: &std::process::Output) -> (Option<i32>, String, String) {
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// No GPU at all: every check says why it does not apply, and the exit is 0.
#[test]
fn without_a_gpu_every_check_is_not_applicable_and_exit_is_0() {
    let ws = Ws::new();
    let o = ws.aorta_env(
        &["doctor"],
        &[
            ("AORTA_DOCTOR_NVIDIA_SMI", "/nonexistent/nvidia-smi"),
            ("AORTA_DOCTOR_AMD_SMI", "/nonexistent/amd-smi"),
            ("AORTA_DOCTOR_SYSFS_ROOT", ws.path().to_str().unwrap()),
        ],
    );
    let (code, stdout, stderr) = out(&o);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("n/a   gpu.present  node\n      why: no NVIDIA or AMD GPU found"),
        "{stdout}"
    );
}

#[test]
fn the_recorded_h100_passes_quick() {
    let ws = node("h100-cuda13/nvidia-smi-q.xml");
    let o = run(&ws, &["doctor", "--json"], &[]);
    let (code, stdout, stderr) = out(&o);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["status"], "pass");
    assert_eq!(v["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
}

/// Each edited fixture fails its check with its remedy, exit 1.
#[test]
fn every_passive_fail_path_exits_1_with_its_remedy() {
    for (xml, id, remedy) in [
        (
            "doctor/nvidia-smi-q-remap-pending.xml",
            "rows.remap_pending",
            "a row remap is pending",
        ),
        (
            "doctor/nvidia-smi-q-gen3x8.xml",
            "pcie.link",
            "link trained at Gen3 x8, expected Gen5 x16",
        ),
        (
            "doctor/nvidia-smi-q-thermal.xml",
            "clocks.hw_thermal_slowdown",
            "check cooling",
        ),
        (
            "doctor/nvidia-smi-q-ecc-dbe.xml",
            "ecc.volatile_uncorrectable",
            "uncorrectable ECC errors",
        ),
    ] {
        let ws = node(xml);
        let (code, stdout, stderr) = out(&run(&ws, &["doctor"], &[]));
        assert_eq!(code, Some(1), "{xml}: {stdout}{stderr}");
        let line = stdout
            .lines()
            .position(|l| l.starts_with("fail") && l.contains(id))
            .unwrap_or_else(|| panic!("{xml}: no failing {id}:\n{stdout}"));
        let next = stdout.lines().nth(line + 1).unwrap();
        assert!(next.contains(remedy), "{xml}: {next}");
    }
    let ws = node("h100-cuda13/nvidia-smi-q.xml");
    let kmsg = (
        "AORTA_DOCTOR_KMSG",
        fixture("doctor/kmsg-xid79.txt").display().to_string(),
    );
    let (code, stdout, _) = out(&run(&ws, &["doctor"], &[kmsg]));
    assert_eq!(code, Some(1));
    assert!(stdout.contains("fail  kernel.xid"), "{stdout}");
    assert!(stdout.contains("Xid 79 ×1"), "{stdout}");
}

/// A healthy one-rank answer of the all-reduce trial.
const ONE_RANK_ALLREDUCE: &str = r#"{"allreduce": {"ranks": 1, "bytes": 268435456, "nccl_version": 22803, "algbw_gbs": 900.0, "busbw_gbs": 0.0, "mismatches": 0, "first_bad": null}}"#;

/// A stand-in gpu_doctor workload answering in the protocol with `metrics` for a GPU's trial
/// and `allreduce` for the collective trial (CONFIG.json names `allreduce`).
fn stand_in_workload_with(ws: &Ws, metrics: &str, allreduce: &str) {
    script(
        &ws.path().join("workloads/aorta-workload-gpu_doctor"),
        &format!(
            "case \"$1\" in describe) echo '{{\"protocol\": 1, \"name\": \"gpu_doctor\", \"version\": \"stand-in\"}}'; exit 0;; esac\n\
             if grep -q '\"allreduce\"' \"$3\"; then\n\
             cat > \"$5\" <<'EOF'\n{{\"passed\": true, \"main_work_started\": true, \"failure_details\": [], \"metrics\": {allreduce}}}\nEOF\n\
             else\n\
             cat > \"$5\" <<'EOF'\n{{\"passed\": false, \"main_work_started\": true, \"failure_details\": [], \"metrics\": {metrics}}}\nEOF\n\
             fi\n"
        ),
    );
}

/// [`stand_in_workload_with`] a healthy all-reduce.
fn stand_in_workload(ws: &Ws, metrics: &str) {
    stand_in_workload_with(ws, metrics, ONE_RANK_ALLREDUCE)
}

/// GEMM and memory-test mismatches reach doctor through the workload protocol and fail it; a
/// healthy answer passes.
#[test]
fn medium_judges_the_workloads_answer() {
    let healthy = r#"{"gemm": {"n": 8192, "tflops": 700.0, "checked": 16384, "mismatches": 0}, "copy": {"bytes": 268435456, "h2d_gbs": 53.0, "d2h_gbs": 54.0}, "memtest": {"bytes": 42949672960, "patterns": ["zeros","ones","checker","checker_inv","address","address_inv"], "mismatches": 0}}"#;
    let ws = node("h100-cuda13/nvidia-smi-q.xml");
    stand_in_workload(&ws, healthy);
    let (code, stdout, stderr) = out(&run(&ws, &["doctor", "--level", "medium"], &[]));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("pass  gemm.correctness"), "{stdout}");
    assert!(
        stdout.contains("700.0 TFLOP/s (71% of H100 SXM5 dense bf16 peak 989)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("53.0 GB/s (84% of Gen5 x16's 63.0)"),
        "{stdout}"
    );

    let sick = healthy
        .replace(
            r#""checked": 16384, "mismatches": 0"#,
            r#""checked": 16384, "mismatches": 1, "first_mismatch": {"row": 0, "col": 0}"#,
        )
        .replace(
            r#""address_inv"], "mismatches": 0"#,
            r#""address_inv"], "mismatches": 1, "first_bad_offset": 4000"#,
        );
    let ws = node("h100-cuda13/nvidia-smi-q.xml");
    stand_in_workload(&ws, &sick);
    let (code, stdout, stderr) = out(&run(&ws, &["doctor", "--level", "medium", "--json"], &[]));
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let status = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("gemm.correctness"), "fail");
    assert_eq!(status("memtest.patterns"), "fail");
    assert_eq!(status("copy.h2d"), "pass");
}

/// `--doctor quick` before a build: a failing node is refused (exit 3, no trial ran) unless
/// `--doctor-mark`, which builds and records doctor.json with `marked: true`.
#[test]
fn a_build_on_a_failing_node_is_refused_or_marked() {
    let ws = node("doctor/nvidia-smi-q-gen3x8.xml");
    let build = |extra: &[&str]| {
        let mut args = vec![
            "build", "r.yaml", "--store", "s", "--output", "o", "--doctor", "quick",
        ];
        args.extend(extra);
        args.extend(["--", "true"]);
        out(&run(&ws, &args, &[]))
    };
    let (code, _, stderr) = build(&[]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("this node failed aorta doctor --level quick"),
        "{stderr}"
    );
    assert!(
        stderr.contains("link trained at Gen3 x8, expected Gen5 x16"),
        "{stderr}"
    );
    assert!(!ws.path().join("o").exists(), "no trial ran");

    let (code, _, stderr) = build(&["--doctor-mark"]);
    assert_eq!(code, Some(0), "{stderr}");
    let found: Vec<PathBuf> = files_under(&ws.path().join("o"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "doctor.json"))
        .collect();
    assert_eq!(found.len(), 1, "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&found[0]).unwrap()).unwrap();
    assert_eq!(v["marked"], true);
    assert_eq!(v["status"], "fail");
    // --json carries the verdict, on the full build and on a fully cached rebuild alike.
    for _ in 0..2 {
        let (code, stdout, stderr) = build(&["--doctor-mark", "--json"]);
        assert_eq!(code, Some(0), "{stderr}");
        let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(line["doctor"]["status"], "fail", "{stdout}");
        assert_eq!(line["doctor"]["marked"], true, "{stdout}");
        assert_eq!(line["doctor"]["flagged"][0]["id"], "pcie.link", "{stdout}");
    }

    // A healthy node builds and records an unmarked report.
    let ws = node("h100-cuda13/nvidia-smi-q.xml");
    let (code, _, stderr) = out(&run(
        &ws,
        &[
            "build", "r.yaml", "--store", "s", "--output", "o", "--doctor", "quick", "--", "true",
        ],
        &[],
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("aorta: doctor quick: pass"), "{stderr}");
}

/// The one environment record of run directory `run`.
fn env_json(run: &Path) -> serde_json::Value {
    let found: Vec<PathBuf> = files_under(&run.join("environments"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "env.json"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    serde_json::from_str(&std::fs::read_to_string(&found[0]).unwrap()).unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Each page's inode: a page rendered again is a new file (renamed into place).
fn inodes(run: &Path) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    ["matrix.md", "report.html", "matrix.json"]
        .iter()
        .map(|f| std::fs::metadata(run.join(f)).unwrap().ino())
        .chain(
            files_under(&run.join("environments"))
                .iter()
                .map(|p| std::fs::metadata(p).unwrap().ino()),
        )
        .collect()
}

const BANNER: &str = "This run's node failed aorta doctor --level quick and was built anyway (--doctor-mark): do not credit or blame a mitigation for these results.";

/// A marked build on a failing node says so in env.json (a typed `doctor` section), matrix.md
/// (a caution before the answer) and report.html (the banner and the failing check with its
/// figure, threshold and remedy). A rebuild without `--doctor` shows the recorded verdict and
/// renders nothing; the same verdict again renders nothing; a healed node's verdict re-renders
/// the pages with the pass line and executes no trial: the verdict is an input of the pages,
/// never of a trial key.
#[test]
fn the_verdict_is_in_the_pages_and_never_in_a_trial_key() {
    let ws = node("doctor/nvidia-smi-q-gen3x8.xml");
    let build = |ws: &Ws, extra: &[&str]| {
        let mut args = vec!["build", "r.yaml", "--store", "s", "--output", "o"];
        args.extend(extra);
        args.extend(["--", "true"]);
        run(ws, &args, &[])
    };
    let o = build(&ws, &["--doctor", "quick", "--doctor-mark"]);
    let (code, _, stderr) = out(&o);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(common::counts(&o), (1, 0));
    let run_dir = ws.path().join("o/T");

    let env = env_json(&run_dir);
    let d = &env["doctor"];
    assert_eq!(d["level"], "quick", "{d}");
    assert_eq!(d["status"], "fail");
    assert_eq!(d["marked"], true);
    assert!(d["counts"]["pass"].as_u64().unwrap() > 10, "{d}");
    let link = d["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "pcie.link")
        .unwrap_or_else(|| panic!("{d}"));
    assert_eq!(link["status"], "fail");
    assert_eq!(link["measured"], "Gen3 x8");
    assert!(
        link["threshold"].as_str().unwrap().contains("Gen5 x16"),
        "{link}"
    );
    assert!(
        link["remedy"].as_str().unwrap().contains("reseat"),
        "{link}"
    );
    assert!(
        d["flagged"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] != "pass"),
        "{d}"
    );
    // The snapshot's fields are where they were: env.json still reads as a snapshot.
    assert_eq!(
        env["schema_version"]
            .as_str()
            .map(|s| s.starts_with("aorta.env/")),
        Some(true)
    );

    let md = read(&run_dir.join("matrix.md"));
    assert!(md.contains("**Node health**: doctor quick: fail ("), "{md}");
    let caution = md.find("> [!CAUTION]").unwrap_or_else(|| panic!("{md}"));
    assert!(caution < md.find("## Answer").unwrap());
    assert!(md.contains(&format!("> **{BANNER}**")), "{md}");
    assert!(md.contains("> - fail pcie.link [GPU 0 "), "{md}");
    let html = read(&run_dir.join("report.html"));
    let escaped = BANNER.replace('\'', "&#39;");
    assert!(html.contains(&escaped), "no banner");
    assert!(html.contains("<h2 id=\"doctor\">Node health</h2>"));
    assert!(html.contains("<td><code>pcie.link</code></td>"));
    let keyed: Vec<String> = files_under(&run_dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "result.json"))
        .map(|p| serde_json::from_str::<serde_json::Value>(&read(&p)).unwrap()["key"].to_string())
        .collect();
    assert_eq!(keyed.len(), 1);

    // A cached rebuild without a preflight: doctor.json is the record, nothing is rendered.
    let before = inodes(&run_dir);
    let o = build(&ws, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    assert_eq!(common::counts(&o), (0, 1));
    assert_eq!(inodes(&run_dir), before, "a cached rebuild renders nothing");
    assert!(read(&run_dir.join("report.html")).contains(&escaped));
    assert_eq!(env_json(&run_dir)["doctor"], *d);
    // The same verdict from a new preflight: nothing to render either.
    let o = build(&ws, &["--doctor", "quick", "--doctor-mark"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    assert_eq!(inodes(&run_dir), before, "the same verdict renders nothing");

    // The node is healed: the pages say so, and no trial runs again (no trial key changed).
    script(
        &ws.path().join("bin/nvidia-smi"),
        &format!(
            "case \"$1\" in nvlink) exit 0;; esac\ncat '{}'\n",
            fixture("h100-cuda13/nvidia-smi-q.xml").display()
        ),
    );
    let o = build(&ws, &["--doctor", "quick"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    assert_eq!(common::counts(&o), (0, 1), "a new verdict runs no trial");
    let after = inodes(&run_dir);
    assert_eq!(after[2], before[2], "matrix.json does not show the verdict");
    assert_ne!(after[1], before[1], "report.html shows the new verdict");
    let env = env_json(&run_dir);
    assert_eq!(env["doctor"]["status"], "pass");
    assert_eq!(env["doctor"]["marked"], false);
    assert_eq!(env["doctor"]["flagged"], serde_json::json!([]));
    let md = read(&run_dir.join("matrix.md"));
    assert!(
        md.contains("**Node health**: doctor quick: pass (0 fail, 0 warn, "),
        "{md}"
    );
    assert!(!md.contains("[!CAUTION]"), "{md}");
    let html = read(&run_dir.join("report.html"));
    assert!(
        html.contains("class=\"doctor pass\">Node health: doctor quick: pass (0 fail, 0 warn, ")
    );
    assert!(!html.contains("do not credit"));
    let again: Vec<String> = files_under(&run_dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "result.json"))
        .map(|p| serde_json::from_str::<serde_json::Value>(&read(&p)).unwrap()["key"].to_string())
        .collect();
    assert_eq!(again, keyed);

    // A build without any preflight: env.json has no doctor section, report.html says so.
    let plain = node("doctor/nvidia-smi-q-gen3x8.xml");
    let o = build(&plain, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let run_dir = plain.path().join("o/T");
    assert!(env_json(&run_dir).get("doctor").is_none());
    assert!(!read(&run_dir.join("matrix.md")).contains("Node health"));
    assert!(read(&run_dir.join("report.html")).contains("Node health: not checked"));
    assert!(!run_dir.join("doctor.json").exists());
}

/// report.html links a trial's Xid (the classifier's Tier 3 capture) to the preflight's
/// verdict on the GPU at its PCI address, as `aorta classify --doctor` does; `aorta report`
/// renders the page again from the run directory, doctor.json included.
#[test]
fn the_report_links_a_trials_xid_to_the_doctors_verdict() {
    let ws = node("doctor/nvidia-smi-q-remap-pending.xml");
    let o = run(
        &ws,
        &[
            "build",
            "r.yaml",
            "--store",
            "s",
            "--output",
            "o",
            "--doctor",
            "quick",
            "--doctor-mark",
            "--",
            "false",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let run_dir = ws.path().join("o/T");
    let result = files_under(&run_dir)
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "result.json"))
        .unwrap();
    // What Tier 3 records when the trial's kernel log names an Xid (no GPU here to raise one).
    let mut rec: serde_json::Value = serde_json::from_str(&read(&result)).unwrap();
    rec["capture"]["xid"] = "94".into();
    rec["capture"]["xid_pci"] = "PCI:0000:00:06".into();
    std::fs::write(&result, rec.to_string()).unwrap();
    let o = run(&ws, &["report", "o/T"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let html = read(&run_dir.join("report.html"));
    assert!(
        html.contains("trial 0: Xid 94 (PCI:0000:00:06): doctor quick said GPU 0 00000000:00:06.0 was fail (fail rows.remap_pending); Xid 94: contained uncorrectable ECC error"),
        "no Xid link in {html}"
    );
    assert!(html.contains(&BANNER.replace('\'', "&#39;")));
}

/// `aorta classify --doctor REPORT`: a trial's Xid is linked to the doctor's verdict on its GPU.
#[test]
fn classify_links_an_xid_to_the_doctors_verdict() {
    let ws = node("doctor/nvidia-smi-q-remap-pending.xml");
    let (code, stdout, _) = out(&run(&ws, &["doctor", "--out", "doctor.json"], &[]));
    assert_eq!(code, Some(1));
    assert!(stdout.contains("fail  rows.remap_pending"));
    let dmesg = ws.write(
        "dmesg.txt",
        "[ 10.0] NVRM: Xid (PCI:0000:00:06): 94, pid=1, name=python, Ch 00000008\n",
    );
    let (code, stdout, stderr) = out(&run(
        &ws,
        &[
            "classify",
            "--dmesg",
            dmesg.to_str().unwrap(),
            "--doctor",
            "doctor.json",
        ],
        &[],
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stdout.contains("doctor quick said GPU 0 00000000:00:06.0 was fail (fail rows.remap_pending); Xid 94: contained uncorrectable ECC error"),
        "{stdout}"
    );
    let (code, _, stderr) = out(&run(
        &ws,
        &[
            "classify",
            "--dmesg",
            dmesg.to_str().unwrap(),
            "--doctor",
            "dmesg.txt",
        ],
        &[],
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not an aorta doctor report"), "{stderr}");
}

/// `aorta build --watch` runs the preflight before its first build: a failing node is refused
/// (exit 3 once the watch ends, no trial ran) or, with `--doctor-mark`, built and marked.
#[test]
fn watch_checks_the_node_before_its_first_build() {
    let ws = node("doctor/nvidia-smi-q-gen3x8.xml");
    let watch = |extra: &[&str]| {
        let mut args = vec![
            "build",
            "--watch",
            "--watch-max-rebuilds",
            "0",
            "r.yaml",
            "--store",
            "s",
            "--output",
            "o",
            "--doctor",
            "quick",
        ];
        args.extend(extra);
        args.extend(["--", "true"]);
        out(&run(&ws, &args, &[]))
    };
    let (code, _, stderr) = watch(&[]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("this node failed aorta doctor --level quick"),
        "{stderr}"
    );
    assert!(!ws.path().join("o").exists(), "no trial ran");
    let (code, _, stderr) = watch(&["--doctor-mark"]);
    assert_eq!(code, Some(0), "{stderr}");
    let records: Vec<PathBuf> = files_under(&ws.path().join("o"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "doctor.json"))
        .collect();
    assert_eq!(records.len(), 1, "{stderr}");
}

/// A recipe's `doctor: quick` runs the preflight as `--doctor quick` does, and leaves every
/// trial key as it was without it.
#[test]
fn a_recipes_doctor_field_runs_the_preflight_and_keys_nothing() {
    let ws = node("doctor/nvidia-smi-q-gen3x8.xml");
    let plain = std::fs::read_to_string(ws.path().join("r.yaml")).unwrap();
    let keys = |ws: &Ws| {
        let (code, stdout, stderr) = out(&run(
            ws,
            &["build", "r.yaml", "--dry-run", "--json", "--", "true"],
            &[],
        ));
        assert_eq!(code, Some(0), "{stderr}");
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let mut keys = Vec::new();
        for c in v["cells"].as_array().unwrap() {
            keys.push(c["key_inputs"]["trial_keys"].to_string());
        }
        keys
    };
    let before = keys(&ws);
    ws.write("r.yaml", &format!("{plain}doctor: quick\n"));
    assert_eq!(keys(&ws), before, "doctor: changes no trial key");
    let (code, _, stderr) = out(&run(
        &ws,
        &[
            "build", "r.yaml", "--store", "s", "--output", "o", "--", "true",
        ],
        &[],
    ));
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("this node failed aorta doctor --level quick"),
        "{stderr}"
    );
    // --doctor-mark marks a run the recipe's doctor: checked, without repeating --doctor.
    let (code, _, stderr) = out(&run(
        &ws,
        &[
            "build",
            "r.yaml",
            "--store",
            "s",
            "--output",
            "o",
            "--doctor-mark",
            "--",
            "true",
        ],
        &[],
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("building anyway (--doctor-mark)"),
        "{stderr}"
    );
    // With nothing asking for the checks, --doctor-mark is a mistake worth naming.
    ws.write("r.yaml", &plain);
    let (code, _, stderr) = out(&run(
        &ws,
        &[
            "build",
            "r.yaml",
            "--store",
            "s",
            "--output",
            "o2",
            "--doctor-mark",
            "--",
            "true",
        ],
        &[],
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("nothing asks for the"), "{stderr}");
    assert!(!ws.path().join("o2").exists(), "no trial ran");
    ws.write("r.yaml", &format!("{plain}doctor: slow\n"));
    let (code, _, stderr) = out(&run(
        &ws,
        &["build", "r.yaml", "--dry-run", "--", "true"],
        &[],
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("must be quick, medium or long"), "{stderr}");
}

/// Two GPUs: the per-GPU trials run on each, then one peer-copy trial and one all-reduce trial
/// over both; a pair whose copy came back wrong fails `p2p.bandwidth`, a wrong sum
/// `nccl.allreduce`.
#[test]
fn two_gpus_get_the_peer_copy_and_all_reduce_checks() {
    let ws = node("doctor/nvidia-smi-q-2gpu.xml");
    let per_gpu = r#"{"gemm": {"n": 8192, "tflops": 700.0, "checked": 16384, "mismatches": 0}, "copy": {"h2d_gbs": 53.0, "d2h_gbs": 54.0}, "memtest": {"bytes": 42949672960, "patterns": ["zeros"], "mismatches": 0}}"#;
    let p2p = r#"{"p2p": {"bytes": 268435456, "mismatches": 1, "pairs": [{"from": 0, "to": 1, "gbs": 350.0, "mismatches": 1, "peer_access": true}, {"from": 1, "to": 0, "gbs": 349.0, "mismatches": 0, "peer_access": true}]}}"#;
    let allreduce = r#"{"allreduce": {"ranks": 2, "bytes": 268435456, "nccl_version": 22803, "algbw_gbs": 300.0, "busbw_gbs": 300.0, "mismatches": 1, "first_bad": {"rank": 1, "index": 5}}}"#;
    script(
        &ws.path().join("workloads/aorta-workload-gpu_doctor"),
        &format!(
            "case \"$1\" in describe) echo '{{}}'; exit 0;; esac\n\
             if grep -q '\"peers\"' \"$3\"; then m='{p2p}'; elif grep -q '\"allreduce\"' \"$3\"; then m='{allreduce}'; else m='{per_gpu}'; fi\n\
             echo \"{{\\\"passed\\\": true, \\\"main_work_started\\\": true, \\\"metrics\\\": $m}}\" > \"$5\"\n"
        ),
    );
    let (code, stdout, stderr) = out(&run(&ws, &["doctor", "--level", "medium"], &[]));
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(
        stdout.matches("pass  gemm.correctness").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("fail  p2p.bandwidth")
            && l.contains("node  2 pairs, slowest 1→0 349.0 GB/s")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("fail  nccl.allreduce")
            && l.contains("2 ranks, bus 300.0 GB/s")),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 wrong element(s) (first: rank 1, index 5)"),
        "{stdout}"
    );
}
