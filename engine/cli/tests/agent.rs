//! `aorta agent` end to end on a planted flaky command (engine/agent/tests/fixtures/flaky.sh):
//! it fails with probability p unless FIX is set; SLOW only slows every step. The agent must
//! find `fix`, never call `slow` a fix, reuse every trial on a re-run, continue after kill -9,
//! and speak to an OpenAI-compatible endpoint (a real server on loopback).

mod common;
#[path = "../../agent/tests/server/mod.rs"]
mod server;

use common::{repo_root, transcript};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

    fn run_dir(&self) -> PathBuf {
        self.root.join("out/_no_ticket_")
    }

    /// Trials the planted command really executed, by cell env.
    fn executions(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("state/ran"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir().join("agent_log.jsonl")).unwrap()
    }

    fn report(&self) -> String {
        std::fs::read_to_string(self.run_dir().join("agent_report.md")).unwrap()
    }
}

fn fixture(name: &str) -> String {
    repo_root()
        .join("engine/agent/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// `aorta agent` with the planted command failing PERMILLE/1000 of the time.
fn agent_cmd(d: &Dirs, extra: &[&str], permille: u32, seed: u32) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(repo_root())
        .env("NO_COLOR", "1")
        .env("FLAKY_STATE", d.root.join("state"))
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .env_remove("AORTA_STORE")
        .arg("agent")
        .arg("--store")
        .arg(d.root.join("store"))
        .arg("--output")
        .arg(d.root.join("out"))
        .args(["--recipe", &fixture("template.yaml")])
        .args(["--mitigations-file", &fixture("mitigations.json")])
        .args(extra)
        .arg("--")
        .arg(fixture("flaky.sh"))
        .arg(permille.to_string())
        .arg(seed.to_string());
    c
}

fn agent(d: &Dirs, extra: &[&str], permille: u32, seed: u32) -> Output {
    agent_cmd(d, extra, permille, seed).output().unwrap()
}

const SLOW_THEN_FIX: [&str; 4] = ["--mitigation", "slow", "--mitigation", "fix"];

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn finds_the_fix_and_never_the_slow_down_at_p_1_0_5_0_2() {
    for (permille, seed) in [(1000, 1), (500, 2), (200, 3)] {
        let d = Dirs::new();
        let out = agent(&d, &SLOW_THEN_FIX, permille, seed);
        let t = transcript(&out);
        assert_eq!(out.status.code(), Some(0), "{t}");
        assert!(t.contains("Agent outcome: converged"), "p={permille}: {t}");
        let log = d.log();
        assert!(log.contains(r#""type":"converged","ts":"#), "{log}");
        assert!(log.contains(r#""mitigation":"fix""#));
        let report = d.report();
        assert!(report.contains("- Winning mitigation: fix"), "{report}");
        let slow = report.lines().find(|l| l.starts_with("| slow |")).unwrap();
        assert!(slow.ends_with("| not a fix |"), "{slow}");
        // The slow-down is called out as such by the confound column.
        assert!(slow.contains("speed (+"), "{slow}");
        // Every trial the report counts ran exactly once.
        let used: usize = report
            .lines()
            .find_map(|l| l.strip_prefix("- Trials used: "))
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(d.executions().len(), used, "p={permille}");
        // report.html carries the agent's verdict and search, not the last look's matrix.
        let html = std::fs::read_to_string(d.run_dir().join("report.html")).unwrap();
        let answer = html.split("<div id=\"answer\"").nth(1).unwrap();
        assert!(
            answer.starts_with(" class=\"answer\"><p><b>fix fixes it:"),
            "{}",
            &answer[..200.min(answer.len())]
        );
        assert!(html.contains("<table id=\"agent\">"), "p={permille}");
        assert!(html.contains("decided: fails less often (a fix)"));
        assert!(
            html.contains(&format!("<td>Trials used</td><td>{used} over ")),
            "p={permille}"
        );
        assert!(!html.contains("_subprocess"));
    }
}

/// `--json`: stdout is one line with the outcome, the winner and the agent's answer.
#[test]
fn json_states_the_outcome_and_the_answer() {
    let d = Dirs::new();
    let mut extra: Vec<&str> = SLOW_THEN_FIX.to_vec();
    extra.push("--json");
    let out = agent(&d, &extra, 1000, 1);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let stdout = stdout(&out);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(j["outcome"], "converged", "{j}");
    assert_eq!(j["winner"], "fix", "{j}");
    assert_eq!(j["answer"]["cells"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(j["search"]["candidates"][0]["mitigation"], "slow", "{j}");
}

#[test]
fn a_rerun_replays_the_log_and_executes_nothing() {
    let d = Dirs::new();
    let first = agent(&d, &SLOW_THEN_FIX, 500, 7);
    assert!(
        stdout(&first).contains("converged"),
        "{}",
        transcript(&first)
    );
    let ran = d.executions().len();
    let second = agent(&d, &SLOW_THEN_FIX, 500, 7);
    assert_eq!(stdout(&first), stdout(&second));
    assert_eq!(d.executions().len(), ran, "the re-run executed trials");
    assert!(d.log().contains(r#""type":"resume""#));
}

#[test]
fn kill_9_mid_search_then_the_same_command_continues() {
    let d = Dirs::new();
    let mut child = agent_cmd(&d, &SLOW_THEN_FIX, 500, 11)
        .env("FLAKY_SLEEP", "0.05")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the search is past the baseline and into a candidate, then SIGKILL it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let log_path = d.run_dir().join("agent_log.jsonl");
    while !std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .contains(r#""type":"candidate_look""#)
    {
        assert!(
            Instant::now() < deadline,
            "the agent never reached a candidate"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before_log = d.log();
    let ran_before = d.executions().len();
    assert!(ran_before >= 8, "the baseline ran before the kill");
    let out = agent(&d, &SLOW_THEN_FIX, 500, 11);
    assert!(
        stdout(&out).contains("Agent outcome: converged"),
        "{}",
        transcript(&out)
    );
    let after_log = d.log();
    // Append-only: the killed run's lines are still there, byte for byte (bar a torn tail).
    let complete = &before_log[..before_log.rfind('\n').map_or(0, |i| i + 1)];
    assert!(after_log.starts_with(complete));
    assert!(after_log.contains(r#""type":"resume","ts""#), "{after_log}");
    // Nothing completed before the kill ran again: at most the trial in flight did.
    let used: usize = d
        .report()
        .lines()
        .find_map(|l| l.strip_prefix("- Trials used: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        d.executions().len() <= used + 1,
        "{} > {used} + 1",
        d.executions().len()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn budgets_and_approval_stop_with_aortas_outcomes() {
    let d = Dirs::new();
    let out = agent(&d, &["--mitigation", "fix", "--max-trials", "10"], 1000, 1);
    assert!(
        stdout(&out).contains("Agent outcome: policy_stop — Stopped — policy limit hit. (the next look may need 128 trials in all; --max-trials is 10)"),
        "{}",
        transcript(&out)
    );
    let d = Dirs::new();
    let out = agent(
        &d,
        &["--mitigation", "hip_launch_blocking", "--require-approval"],
        1000,
        1,
    );
    assert!(
        stdout(&out).contains("Agent outcome: approval_required"),
        "{}",
        transcript(&out)
    );
    let d = Dirs::new();
    let out = agent(
        &d,
        &["--mitigation", "fix", "--max-baseline-trials", "8"],
        0,
        1,
    );
    assert!(
        stdout(&out).contains("Agent outcome: baseline_pass"),
        "{}",
        transcript(&out)
    );
    assert_eq!(d.executions().len(), 8);
    let d = Dirs::new();
    let out = agent(
        &d,
        &["--mitigation", "fix", "--max-walltime-sec", "0.001"],
        1000,
        1,
    );
    assert!(
        stdout(&out)
            .contains("Agent outcome: walltime_exhausted — Stopped — wall-time budget exhausted."),
        "{}",
        transcript(&out)
    );
}

#[test]
fn dry_run_plans_the_baseline_and_writes_nothing() {
    let d = Dirs::new();
    let out = agent(&d, &["--mitigation", "fix", "--dry-run"], 500, 1);
    let s = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(s.contains("none-none"), "{s}");
    assert!(
        s.ends_with("Dry-run complete: planned probe cells printed above; no artifacts written.\n")
    );
    assert!(!d.root.join("out").exists());
    assert!(d.executions().is_empty());
}

#[test]
fn bad_input_is_a_usage_error() {
    let d = Dirs::new();
    let mut c = agent_cmd(&d, &["--mitigation", "no_such_thing"], 500, 1);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    let no_cmd = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .args(["agent", "--mitigation", "xnack"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&no_cmd));
}

fn openai(d: &Dirs, url: &str, permille: u32) -> Output {
    agent_cmd(
        d,
        &[
            "--mitigation",
            "slow",
            "--mitigation",
            "fix",
            "--llm-backend",
            "openai",
            "--llm-url",
            url,
        ],
        permille,
        5,
    )
    .env("AORTA_LLM_API_KEY", "sk-loopback")
    .output()
    .unwrap()
}

#[test]
fn the_openai_proposer_drives_the_search_and_hostile_replies_stop_it() {
    use server::{serve, Reply};
    let d = Dirs::new();
    let srv = serve(vec![Reply::content(
        r#"{"category":"unknown","hypothesis":"the env var FIX fixes it","next_mitigations":["fix"],"confidence":0.9,"stop":false}"#,
    )]);
    let out = openai(&d, &srv.url, 1000);
    assert!(
        stdout(&out).contains("Agent outcome: converged"),
        "{}",
        transcript(&out)
    );
    let reqs = srv.requests.lock().unwrap();
    assert_eq!(reqs[0].authorization.as_deref(), Some("Bearer sk-loopback"));
    drop(reqs);
    for (reply, outcome) in [
        (r#"{"next_mitigations":["--rm -rf"]}"#, "policy_stop"),
        (
            r#"{"next_mitigations":["hsa_disable_cache"]}"#,
            "policy_stop",
        ),
        (r#"{"next_mitigations":["made_up_fix"]}"#, "registry_error"),
        ("I think you should try FIX=1", "agent_stop"),
    ] {
        let d = Dirs::new();
        let srv = serve(vec![Reply::content(reply)]);
        let out = openai(&d, &srv.url, 1000);
        assert!(
            stdout(&out).contains(&format!("Agent outcome: {outcome}")),
            "{reply}: {}",
            transcript(&out)
        );
        assert_eq!(out.status.code(), Some(0));
    }
}

#[test]
fn a_command_that_cannot_run_is_an_error_not_a_baseline_pass() {
    let d = Dirs::new();
    let out = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .env(
            "AORTA_ENV_SNAPSHOT",
            repo_root().join("docs/examples/h200-env.json"),
        )
        .arg("agent")
        .arg("--store")
        .arg(d.root.join("store"))
        .arg("--output")
        .arg(d.root.join("out"))
        .args(["--mitigation", "xnack", "--", "/nonexistent/command"])
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("Agent outcome: error"),
        "{}",
        transcript(&out)
    );
    assert!(d.report().contains("verdict error"));
}

#[test]
fn a_slow_down_that_hides_the_failure_is_a_speed_confound_not_a_fix() {
    let d = Dirs::new();
    let mut c = agent_cmd(&d, &["--mitigation", "slow"], 1000, 1);
    let out = c.arg("slow-hides").output().unwrap();
    assert!(
        stdout(&out).contains("Agent outcome: exhausted_candidates"),
        "{}",
        transcript(&out)
    );
    let report = d.report();
    let slow = report.lines().find(|l| l.starts_with("| slow |")).unwrap();
    assert!(slow.contains("| 0 / "), "{slow}");
    assert!(slow.contains("**speed confound**"), "{slow}");
    assert!(report.contains("- Winning mitigation: —"));
}

/// `--bundle` writes the agent's run directory (its builds' trials and report.html,
/// agent_log.jsonl, agent_report.md) as `aorta bundle` would, beside the run directory, with
/// the same redaction: a token in the symptom, logged by the agent, is not in the bundle.
/// agent_report.md links the last build's report.html, which the bundle holds.
#[test]
fn bundle_writes_the_agents_output_redacted_and_verifiable() {
    use std::io::Read;
    const TOKEN: &str = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    let d = Dirs::new();
    let symptom = format!("fails after login with {TOKEN}");
    let out = agent(
        &d,
        &["--bundle", "--symptom", &symptom, "--mitigation", "fix"],
        1000,
        5,
    );
    let t = transcript(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(!t.contains("WARNING"), "{t}");
    let bundle = d.root.join("out/_no_ticket_.bundle.tar.gz");
    assert!(
        stdout(&out).contains(&format!("Wrote {}", bundle.display())),
        "{t}"
    );
    assert!(d.log().contains(TOKEN), "the run directory keeps the token");
    let report = d.report();
    assert!(
        report.contains("- Report: [report.html](report.html)"),
        "{report}"
    );

    let f = std::fs::File::open(&bundle).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut members = std::collections::BTreeMap::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let mut s = String::new();
        e.read_to_string(&mut s).unwrap();
        members.insert(e.path().unwrap().to_string_lossy().into_owned(), s);
    }
    for m in [
        "agent_log.jsonl",
        "agent_report.md",
        "report.html",
        "matrix.json",
        "none-none/trial_0/result.json",
        "fix-none/trial_0/stdout.log",
        "manifest.json",
    ] {
        assert!(
            members.contains_key(&format!("_no_ticket_/{m}")),
            "{m} missing: {:?}",
            members.keys()
        );
    }
    assert!(members.values().all(|text| !text.contains(TOKEN)), "leak");
    let log = &members["_no_ticket_/agent_log.jsonl"];
    assert!(log.contains("fails after login with"), "{log}");
    let manifest: serde_json::Value =
        serde_json::from_str(&members["_no_ticket_/manifest.json"]).unwrap();
    assert!(
        manifest["redaction"]["counts"]["github_token"].as_u64() >= Some(1),
        "{manifest}"
    );

    let verify = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .args(["bundle", "--verify"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", transcript(&verify));
}

/// A bundle that cannot be written (a directory where the archive goes) is AORTA's warning on
/// stderr; the search's outcome and exit status stand.
#[test]
fn a_bundle_that_cannot_be_written_is_a_warning() {
    let d = Dirs::new();
    std::fs::create_dir_all(d.root.join("out/_no_ticket_.bundle.tar.gz/x")).unwrap();
    let out = agent(&d, &["--bundle", "--mitigation", "fix"], 1000, 5);
    let t = transcript(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("Agent outcome: converged"), "{t}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("WARNING: --bundle requested but bundling failed: ")
            && err.contains("No bundle was written."),
        "{t}"
    );
}
