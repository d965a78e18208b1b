//! `aorta bisect env|range` and `aorta reduce` end to end on planted failures
//! (fixtures/bisect/planted.sh, deterministic flaky draws): the culprits are named, a rerun
//! executes nothing, and bad input is exit 2 with the file and line.

mod common;

use common::{repo_root, transcript};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Dirs {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir(root.join("state")).unwrap();
        Dirs { _tmp: tmp, root }
    }

    /// Trials the planted command really executed.
    fn executions(&self) -> usize {
        std::fs::read_to_string(self.root.join("state/ran"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

fn fixture(name: &str) -> String {
    repo_root()
        .join("engine/cli/tests/fixtures/bisect")
        .join(name)
        .display()
        .to_string()
}

/// `aorta ARGS -- planted.sh MODE PERMILLE 1` with this test's store, output and state.
fn aorta(d: &Dirs, args: &[&str], mode: &str, permille: u32) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .env("BISECT_STATE", d.root.join("state"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_STORE")
        .args(args)
        .arg("--store")
        .arg(d.root.join("store"))
        .arg("--output")
        .arg(d.root.join("out"))
        .args(["-j", "2", "--"])
        .arg(fixture("planted.sh"))
        .args([mode, &permille.to_string(), "1"])
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    let t = transcript(out);
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {t}"))
}

fn env_args() -> Vec<String> {
    vec![
        "bisect".into(),
        "env".into(),
        "--good".into(),
        fixture("good.env"),
        "--bad".into(),
        fixture("bad.env"),
    ]
}

#[test]
fn bisect_env_finds_a_and_b_among_40_differences_at_p_1_and_0_3() {
    for permille in [1000, 300] {
        let d = Dirs::new();
        let args = env_args();
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.push("--json");
        let out = aorta(&d, &a, "env", permille);
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        let j = json(&out);
        assert_eq!(j["status"], "found", "{j}");
        assert_eq!(j["result"], serde_json::json!(["A=1", "B=2"]), "{j}");
        assert_eq!(j["size"], 40);
        assert!(j["search_probes"].as_u64().unwrap() <= j["bound"].as_u64().unwrap());
        assert!(j["confidence"].as_f64().unwrap() >= 0.95, "{j}");
        // Every trial the search counts as executed ran exactly once.
        assert_eq!(
            j["work"]["executed"].as_u64().unwrap() as usize,
            d.executions()
        );
        let report = Path::new(j["report"].as_str().unwrap());
        let md = std::fs::read_to_string(report).unwrap();
        assert!(md.contains("| minimality | GOOD + {A=1} (1 of 40)"), "{md}");
        if permille == 1000 {
            // A second identical run: every probe is a store hit, nothing executes.
            let before = d.executions();
            let again = aorta(&d, &a, "env", permille);
            let j2 = json(&again);
            assert_eq!(j2["work"]["executed"], 0, "{j2}");
            assert_eq!(j2["result"], j["result"]);
            assert_eq!(d.executions(), before);
        }
    }
}

#[test]
fn bisect_env_prints_the_answer_first_and_lists_what_cannot_be_tested() {
    let d = Dirs::new();
    // Two snapshots of one machine: NCCL_ALGO and the driver differ.
    let snap = std::fs::read_to_string(repo_root().join("docs/examples/h200-env.json")).unwrap();
    let mut bad: serde_json::Value = serde_json::from_str(&snap).unwrap();
    bad["env_vars"]["A"] = "1".into();
    bad["env_vars"]["B"] = "2".into();
    bad["env_vars"]["NCCL_ALGO"] = "Ring".into();
    bad["gpu"]["driver_version"] = "999.1".into();
    let (g, b) = (d.root.join("good.json"), d.root.join("bad.json"));
    std::fs::write(&g, &snap).unwrap();
    std::fs::write(&b, bad.to_string()).unwrap();
    let out = aorta(
        &d,
        &[
            "bisect",
            "env",
            "--good",
            g.to_str().unwrap(),
            "--bad",
            b.to_str().unwrap(),
        ],
        "env",
        1000,
    );
    let t = transcript(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let first = t.lines().nth(2).unwrap();
    assert!(
        first.starts_with("Answer: the failure needs {A=1, B=2} (2 of 3 difference(s)"),
        "{t}"
    );
    assert!(
        t.contains("Cannot be tested here: gpu.driver_version (good 580.159.04, bad 999.1)"),
        "{t}"
    );
}

/// AORTA 0.3.0's env.json as GOOD against aorta's snapshot of the same machine as BAD (issue
/// #41): read by the importer `aorta env diff` uses, the variables are the differences, every
/// field both record agrees, and AORTA's fields with no counterpart are said as not compared.
/// A malformed AORTA file is exit 2 naming the file and the field.
#[test]
fn bisect_env_takes_aortas_env_json_through_the_importer() {
    let d = Dirs::new();
    let fixtures = repo_root().join("engine/probe/tests/fixtures/aorta");
    let good = fixtures.join("aorta-0.3.0-cpu.json");
    let ours = std::fs::read_to_string(fixtures.join("aorta-cpu.json")).unwrap();
    let mut bad: serde_json::Value = serde_json::from_str(&ours).unwrap();
    bad["env_vars"]["A"] = "1".into();
    bad["env_vars"]["B"] = "2".into();
    bad["env_vars"]["NCCL_ALGO"] = "Ring".into();
    let b = d.root.join("bad.json");
    std::fs::write(&b, bad.to_string()).unwrap();
    let args = |good: &Path| {
        vec![
            "bisect".to_string(),
            "env".into(),
            "--good".into(),
            good.display().to_string(),
            "--bad".into(),
            b.display().to_string(),
        ]
    };
    let mut a = args(&good);
    a.push("--json".into());
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = aorta(&d, &a, "env", 1000);
    let j = json(&out);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert_eq!(j["status"], "found", "{j}");
    assert_eq!(j["result"], serde_json::json!(["A=1", "B=2"]), "{j}");
    assert_eq!(j["size"], 3, "{j}");
    assert_eq!(j["untestable"], serde_json::json!([]), "{j}");
    let not_compared: Vec<&str> = j["not_compared"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["field"].as_str().unwrap())
        .collect();
    assert!(not_compared.contains(&"therock"), "{j}");
    assert!(not_compared.contains(&"host.cpu"), "{j}");
    let md = std::fs::read_to_string(j["report"].as_str().unwrap()).unwrap();
    assert!(
        md.contains("## Not compared") && md.contains("| `therock` | AORTA 0.3.0's field (GOOD)"),
        "{md}"
    );

    let mut broken: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    broken["host"]["machine"] = 7.into();
    let g = d.root.join("aorta-broken.json");
    std::fs::write(&g, broken.to_string()).unwrap();
    let a = args(&g);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = aorta(&d, &a, "env", 1000);
    let t = transcript(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("aorta-broken.json")
            && t.contains("field host.machine: expected")
            && t.contains("help: an AORTA env.json is read as"),
        "{t}"
    );
}

#[test]
fn bisect_range_names_37_of_64_at_a_flaky_rate_of_0_4() {
    let d = Dirs::new();
    let mut list = String::from("# versions 0..63, one per line\n");
    for i in 0..64 {
        let v = d.root.join(format!("v{i}"));
        std::fs::write(&v, format!("{i}\n")).unwrap();
        list.push_str(&format!("VERSION_FILE={}\n", v.display()));
    }
    let l = d.root.join("list.txt");
    std::fs::write(&l, list).unwrap();
    let out = aorta(
        &d,
        &["bisect", "range", "--list", l.to_str().unwrap(), "--json"],
        "range",
        400,
    );
    let j = json(&out);
    assert_eq!(out.status.code(), Some(0), "{j}");
    assert_eq!(j["status"], "found");
    assert!(
        j["answer"]
            .as_str()
            .unwrap()
            .starts_with("Answer: the first bad point is #37 "),
        "{j}"
    );
    // ⌈log2 64⌉ + 3 points at most, the two ends included.
    assert!(j["search_probes"].as_u64().unwrap() <= 9, "{j}");
    assert!(j["confidence"].as_f64().unwrap() >= 0.95, "{j}");
}

#[test]
fn reduce_names_the_two_needed_mitigations_of_six() {
    let d = Dirs::new();
    let sidecar = fixture("mitigations.json");
    let out = aorta(
        &d,
        &[
            "reduce",
            "--mitigations",
            "m1,m2,m3,m4,m5,m6",
            "--mitigations-file",
            &sidecar,
            "--json",
        ],
        "reduce",
        500,
    );
    let j = json(&out);
    assert_eq!(out.status.code(), Some(0), "{j}");
    assert_eq!(j["result"], serde_json::json!(["m2", "m5"]), "{j}");
    assert!(j["search_probes"].as_u64().unwrap() <= j["bound"].as_u64().unwrap());
}

#[test]
fn bad_input_is_exit_2_with_the_file_and_line() {
    let d = Dirs::new();
    let broken = d.root.join("broken.env");
    std::fs::write(&broken, "# fine\nA=1\nthis is not an assignment\n").unwrap();
    let good = fixture("good.env");
    let twice = d.root.join("twice.txt");
    std::fs::write(&twice, "V=1\nV=2\n# again\nV=1\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "bisect",
                "env",
                "--good",
                &good,
                "--bad",
                broken.to_str().unwrap(),
            ],
            "broken.env:3: 'this is not an assignment' is not KEY=VALUE",
        ),
        (
            vec![
                "bisect",
                "env",
                "--good",
                &good,
                "--bad",
                "/nonexistent/bad.env",
            ],
            "cannot read /nonexistent/bad.env",
        ),
        (
            vec!["bisect", "env", "--good", &good, "--bad", &good],
            "set the same variables",
        ),
        (
            vec!["bisect", "range", "--list", twice.to_str().unwrap()],
            "twice.txt:4: 'V=1' repeats an earlier point",
        ),
        (
            vec!["reduce", "--mitigations", "no_such_thing"],
            "unknown mitigation 'no_such_thing'",
        ),
        (vec!["reduce", "--mitigations", "m1,m1"], "names m1 twice"),
        (
            vec![
                "reduce",
                "--mitigations",
                "m1",
                "--executor",
                "slurm",
                "--detach",
            ],
            "--detach cannot be used",
        ),
    ];
    for (args, expect) in cases {
        let out = aorta(&d, &args, "env", 1000);
        let t = transcript(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(expect), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{t}");
    }
    assert_eq!(d.executions(), 0);
}

#[test]
fn bisect_env_reverse_finds_one_difference_to_revert() {
    let d = Dirs::new();
    let args = env_args();
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.extend(["--reverse", "--json"]);
    let out = aorta(&d, &a, "env", 1000);
    let j = json(&out);
    assert_eq!(out.status.code(), Some(0), "{j}");
    // Reverting either A or B makes BAD pass: a 1-minimal answer is one of them.
    let r = j["result"].clone();
    assert!(
        r == serde_json::json!(["A=0"]) || r == serde_json::json!(["B=0"]),
        "{j}"
    );
}

#[test]
fn bisect_range_over_commits_with_a_template() {
    let d = Dirs::new();
    let repo = d.root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&repo)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    let mut shas = Vec::new();
    for i in 0..20 {
        std::fs::write(repo.join("version"), format!("{i}\n")).unwrap();
        git(&["add", "version"]);
        git(&["commit", "-q", "-m", &format!("v{i}")]);
        shas.push(git(&["rev-parse", "HEAD"]));
    }
    // Commit 13 ("v13") brings the failure.
    let template = format!(
        "echo {{point}} >> {state}/ran; test \"$(git -C {repo} show {{point}}:version)\" -lt 13",
        state = d.root.join("state").display(),
        repo = repo.display()
    );
    let range = format!("{}..{}", shas[0], shas[19]);
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(&repo)
        .env("NO_COLOR", "1")
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_STORE")
        .args([
            "bisect",
            "range",
            "--rev",
            &range,
            "--template",
            &template,
            "--json",
            "-j",
            "2",
        ])
        .arg("--store")
        .arg(d.root.join("store"))
        .arg("--output")
        .arg(d.root.join("out"))
        .output()
        .unwrap();
    let j = json(&out);
    assert_eq!(out.status.code(), Some(0), "{j}");
    assert_eq!(j["result"], serde_json::json!([shas[13]]), "{j}");
    let bad = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(&repo)
        .args([
            "bisect",
            "range",
            "--rev",
            "nope..HEAD",
            "--template",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", transcript(&bad));
    assert!(
        transcript(&bad).contains("git rev-parse"),
        "{}",
        transcript(&bad)
    );
}

#[test]
fn a_search_killed_mid_run_resumes_without_running_finished_trials_again() {
    let d = Dirs::new();
    let args = env_args();
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.push("--json");
    // The full search alone executes 340 trials (p = 1.0, deterministic); kill it part way.
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    cmd.current_dir(repo_root())
        .env("BISECT_STATE", d.root.join("state"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_STORE")
        .args(&a)
        .arg("--store")
        .arg(d.root.join("store"))
        .arg("--output")
        .arg(d.root.join("out"))
        .args(["-j", "2", "--"])
        .arg(fixture("planted.sh"))
        .args(["env", "1000", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while d.executions() < 60 && start.elapsed() < std::time::Duration::from_secs(300) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = d.executions();
    assert!(
        (60..340).contains(&before),
        "{before} executed before the kill"
    );
    let out = aorta(&d, &a, "env", 1000);
    let j = json(&out);
    assert_eq!(j["result"], serde_json::json!(["A=1", "B=2"]), "{j}");
    let resumed = j["work"]["executed"].as_u64().unwrap() as usize;
    // Only what the killed run had not finished runs again: per slot at most a trial killed
    // while running and one that ended but was not yet stored.
    assert!(resumed + before <= 340 + 4, "{before} + {resumed}");
    assert!(resumed < 340 - 50, "{resumed}");
}

#[test]
fn a_command_that_cannot_run_is_said_and_not_searched() {
    let d = Dirs::new();
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(repo_root())
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_STORE")
        .args([
            "bisect",
            "env",
            "--good",
            &fixture("good.env"),
            "--bad",
            &fixture("bad.env"),
            "--json",
        ])
        .arg("--store")
        .arg(d.root.join("store"))
        .arg("--output")
        .arg(d.root.join("out"))
        .args(["--", "/nonexistent/command"])
        .output()
        .unwrap();
    let j = json(&out);
    assert_eq!(out.status.code(), Some(1), "{j}");
    assert_eq!(j["status"], "ends_do_not_differ", "{j}");
    assert!(
        j["answer"]
            .as_str()
            .unwrap()
            .contains("every trial of BAD errored"),
        "{j}"
    );
    // One look of each end, not the cap's worth of errors.
    assert!(j["work"]["executed"].as_u64().unwrap() <= 8, "{j}");
}

#[test]
fn a_second_machine_reads_every_probe_from_the_remote_cache() {
    let d = Dirs::new();
    std::fs::create_dir(d.root.join("remote")).unwrap();
    let remote = format!("file://{}", d.root.join("remote").display());
    let sidecar = fixture("mitigations.json");
    let run = |store: &str| {
        Command::new(assert_cmd::cargo::cargo_bin("aorta"))
            .current_dir(repo_root())
            .env("BISECT_STATE", d.root.join("state"))
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .env_remove("AORTA_STORE")
            .args([
                "reduce",
                "--mitigations",
                "m1,m2,m3,m4,m5,m6",
                "--mitigations-file",
                &sidecar,
            ])
            .args(["--json", "-j", "2", "--remote-cache", &remote])
            .args(["--remote-cache-mode", "readwrite"])
            .arg("--store")
            .arg(d.root.join(store))
            .arg("--output")
            .arg(d.root.join(format!("out-{store}")))
            .arg("--")
            .arg(fixture("planted.sh"))
            .args(["reduce", "1000", "1"])
            .output()
            .unwrap()
    };
    let first = json(&run("store-a"));
    assert!(first["work"]["executed"].as_u64().unwrap() > 0, "{first}");
    let ran = d.executions();
    // Another store (another machine) with the same remote: the same answer, nothing run.
    let second = json(&run("store-b"));
    assert_eq!(second["result"], first["result"], "{second}");
    assert_eq!(second["work"]["executed"], 0, "{second}");
    assert_eq!(d.executions(), ran);
}
