//! Tiers 4 and 5 over real log files (AORTA §11.8), including the streaming guarantees that
//! AORTA lacked: the whole log is scanned, and matches across chunk boundaries still fire.

mod common;

use aorta_classify::{
    classify, OnMatch, Verdict, LOG_CHUNK_BYTES, PATTERN_LIBRARY_VERSION, TIER4_PATTERNS,
};
use common::*;

#[test]
fn tier4_each_fixture_line_fires_its_id() {
    let rows = tsv("tier4_lines.tsv");
    for p in TIER4_PATTERNS {
        assert!(
            rows.iter().any(|(id, _)| id == p.id),
            "no fixture for {}",
            p.id
        );
    }
    for (id, line) in rows {
        // On stdout and on stderr alike.
        for (out, err) in [(line.as_str(), ""), ("", line.as_str())] {
            let t = Trial::new();
            let c = run(&t.logs(format!("starting\n{out}\n"), err));
            assert!(
                c.failure_detectors_fired.contains(&id),
                "{id} on {line:?}: {:?}",
                c.failure_detectors_fired
            );
            assert_eq!(c.verdict, Verdict::Fail);
        }
    }
}

#[test]
fn tier4_aorta_fixtures_fire_exactly_their_id() {
    // AORTA's seven fixtures do not overlap each other's patterns (aorta's additions may also
    // fire: `cudaErrorIllegalAddress` is an illegal memory access).
    let aorta_ids: Vec<&str> = TIER4_PATTERNS.iter().take(7).map(|p| p.id).collect();
    for (id, line) in tsv("tier4_lines.tsv").into_iter().take(7) {
        let t = Trial::new();
        let fired = run(&t.logs(&line, "")).failure_detectors_fired;
        let aorta_fired: Vec<&String> = fired
            .iter()
            .filter(|f| aorta_ids.contains(&f.as_str()))
            .collect();
        assert_eq!(aorta_fired, [&id], "{line:?}");
    }
    assert_eq!(PATTERN_LIBRARY_VERSION, "4");
}

#[test]
fn tier4_empty_and_unrelated_logs_fire_nothing() {
    let t = Trial::new();
    assert_eq!(run(&t.logs("", "")).verdict, Verdict::Pass);
    let c = run(&t.logs(fixture("clean_run.log"), "warning: deprecated flag\n"));
    assert!(
        c.failure_detectors_fired.is_empty(),
        "{:?}",
        c.failure_detectors_fired
    );
    assert_eq!(c.verdict, Verdict::Pass);
}

#[test]
fn tier4_traceback_and_hip_error_both_fire_in_catalogue_order() {
    let t = Trial::new();
    let c = run(&t.logs("", fixture("traceback_hip.log")));
    assert_eq!(
        c.failure_detectors_fired,
        [
            "tier4:python_traceback",
            "tier4:hip_error",
            "tier4:illegal_memory_access"
        ]
    );
}

#[test]
fn tier4_traceback_needs_a_line_start() {
    let t = Trial::new();
    let c = run(&t.logs(
        "note: Traceback (most recent call last): was printed earlier\n",
        "",
    ));
    assert!(c.failure_detectors_fired.is_empty());
}

#[test]
fn tier4_failure_at_the_end_of_a_12_mib_log_fires() {
    // AORTA kept only the first 10 MiB of each log and missed this.
    let t = Trial::new();
    let mut log = filler(12 * MIB);
    log.push_str("[rank0]: NCCL error: unhandled system error\n");
    assert!(log.len() > 12 * MIB - 100);
    let c = run(&t.logs(log, ""));
    assert_eq!(c.failure_detectors_fired, ["tier4:nccl_rccl_error"]);
}

#[test]
fn tier4_match_straddling_a_chunk_boundary_fires() {
    // One line longer than a chunk, with the pattern cut by the first window's end.
    let needle = "Watchdog caught collective operation timeout";
    let t = Trial::new();
    let mut log = "x".repeat(LOG_CHUNK_BYTES - needle.len() / 2);
    log.push_str(needle);
    log.push('\n');
    let c = run(&t.logs(log, ""));
    assert_eq!(c.failure_detectors_fired, ["tier4:collective_timeout"]);
}

#[test]
fn tier4_line_start_pattern_does_not_fire_at_a_cut_inside_a_line() {
    // The first window ends mid-line exactly before "Traceback": `^` must not match there.
    let t = Trial::new();
    let mut log = "x".repeat(LOG_CHUNK_BYTES);
    log.push_str("Traceback (most recent call last):\n");
    assert!(run(&t.logs(log, "")).failure_detectors_fired.is_empty());
    // A real line start exactly at a chunk boundary still fires.
    let mut log = filler(LOG_CHUNK_BYTES - 100);
    log.push_str(&"y".repeat(LOG_CHUNK_BYTES - log.len() - 1));
    log.push('\n');
    assert_eq!(log.len(), LOG_CHUNK_BYTES);
    log.push_str("Traceback (most recent call last):\n");
    assert_eq!(
        run(&t.logs(log, "")).failure_detectors_fired,
        ["tier4:python_traceback"]
    );
}

#[test]
fn tier4_invalid_utf8_is_decoded_with_replacement() {
    let t = Trial::new();
    let mut log = b"\xff\xfe garbage \xc3\n".to_vec();
    log.extend_from_slice("loss is NaN ✗\n".as_bytes());
    assert_eq!(
        run(&t.logs(log, "")).failure_detectors_fired,
        ["tier4:nan_signature"]
    );
}

// ---- Tier 5 ----

#[test]
fn tier5_simple_match_fails() {
    let t = Trial::new();
    let cfg = with_custom(vec![custom("oom", r"hipErrorOutOfMemory")]);
    let c = classify(&t.logs("", "RuntimeError: hipErrorOutOfMemory\n"), &cfg);
    // Library v3 knows HIP enum names without AORTA's underscore, so Tier 4 fires too.
    assert_eq!(
        c.failure_detectors_fired,
        ["tier4:hip_error", "tier4:cuda_oom", "custom:oom"]
    );
    assert_eq!(c.verdict, Verdict::Fail);
}

#[test]
fn tier5_warn_and_info() {
    let t = Trial::new();
    let cfg = with_custom(vec![
        custom_with(
            "slow",
            r"step time (?P<ms>\d+) ms",
            None,
            OnMatch::Warn,
            false,
        ),
        custom_with(
            "ver",
            r"torch (?P<torch>[\d.]+)",
            None,
            OnMatch::Info,
            false,
        ),
    ]);
    let c = classify(&t.logs("torch 2.5.1\nstep time 912 ms\n", ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert_eq!(c.warn_detectors_fired, ["custom:slow"]);
    assert!(c.failure_detectors_fired.is_empty());
    assert_eq!(c.capture.group("ms").unwrap(), "912");
    assert_eq!(c.capture.group("torch").unwrap(), "2.5.1");
}

#[test]
fn tier5_condition_gates_firing_and_later_matches_get_their_chance() {
    let t = Trial::new();
    let cond = Some("float(capture['loss']) > 2.5");
    let cfg = with_custom(vec![custom_with(
        "diverged",
        r"loss=(?P<loss>[\d.]+)",
        cond,
        OnMatch::Fail,
        false,
    )]);
    let c = classify(&t.logs("step 1 loss=2.1\nstep 2 loss=1.9\n", ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c.capture.is_empty(), "a gated match leaves no capture");
    let c = classify(
        &t.logs("step 1 loss=2.1\nstep 2 loss=3.7\nstep 3 loss=9.9\n", ""),
        &cfg,
    );
    assert_eq!(c.failure_detectors_fired, ["custom:diverged"]);
    assert_eq!(
        c.capture.group("loss").unwrap(),
        "3.7",
        "the first match whose condition holds"
    );
}

#[test]
fn tier5_condition_sees_the_trial_variables_and_errors_do_not_fire() {
    let t = Trial::new();
    let obs = aorta_classify::Observation {
        exit_code: -11,
        peak_vram_mib: Some(70_000),
        ..t.logs("done\n", "")
    };
    let fires = |cond: &str| {
        let cfg = with_custom(vec![custom_with(
            "c",
            "done",
            Some(cond),
            OnMatch::Fail,
            false,
        )]);
        classify(&obs, &cfg)
            .failure_detectors_fired
            .contains(&"custom:c".to_string())
    };
    assert!(fires(
        "exit_code == -11 and peak_vram_mib > 65536 and walltime_sec < 2"
    ));
    assert!(!fires("exit_code == 0"));
    assert!(
        !fires("capture['missing'] == 'x'"),
        "KeyError is a non-match"
    );
    assert!(!fires("1 // 0 == 0"), "ZeroDivisionError is a non-match");
}

#[test]
fn tier5_required_for_pass() {
    let t = Trial::new();
    let cfg = with_custom(vec![custom_with(
        "done",
        r"TRAINING COMPLETE",
        None,
        OnMatch::Fail,
        true,
    )]);
    let c = classify(&t.logs("step 1\n", ""), &cfg);
    assert_eq!(c.failure_detectors_fired, ["meta:missing_pass_signal"]);
    assert_eq!(c.verdict, Verdict::Fail);
    let c = classify(&t.logs("step 1\nTRAINING COMPLETE\n", ""), &cfg);
    assert_eq!(c.failure_detectors_fired, ["custom:done"]);
}

#[test]
fn tier5_no_match_leaves_empty_capture() {
    let t = Trial::new();
    let cfg = with_custom(vec![custom("x", r"(?P<code>E\d{4})")]);
    let c = classify(&t.logs(fixture("clean_run.log"), ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c.capture.is_empty());
}

#[test]
fn tier5_named_groups_merge_later_overwrites_earlier() {
    let t = Trial::new();
    let cfg = with_custom(vec![
        custom_with(
            "a",
            r"rank=(?P<rank>\d+) host=(?P<host>\w+)",
            None,
            OnMatch::Info,
            false,
        ),
        custom_with(
            "b",
            r"failed on rank (?P<rank>\d+)(?: gpu (?P<gpu>\d+))?",
            None,
            OnMatch::Fail,
            false,
        ),
    ]);
    let c = classify(&t.logs("rank=0 host=node1\nfailed on rank 3\n", ""), &cfg);
    assert_eq!(c.capture.group("rank").unwrap(), "3");
    assert_eq!(c.capture.group("host").unwrap(), "node1");
    assert!(
        c.capture.group("gpu").is_none(),
        "an unmatched optional group is not captured"
    );
}

#[test]
fn tier5_python_dialect_lookaround_and_backrefs() {
    let t = Trial::new();
    let cfg = with_custom(vec![custom("dup", r"(?P<w>\b\w+\b) \1(?= again)")]);
    let c = classify(&t.logs("say hello hello again\n", ""), &cfg);
    assert_eq!(c.capture.group("w").unwrap(), "hello");
}

#[test]
fn tier5_12_mib_log_with_the_signal_at_the_end() {
    let t = Trial::new();
    let mut log = filler(12 * MIB);
    log.push_str("FATAL rank 7 code=E1234\n");
    let cfg = with_custom(vec![custom(
        "fatal",
        r"FATAL rank (?P<rank>\d+) code=(?P<code>E\d+)",
    )]);
    let c = classify(&t.logs(log, ""), &cfg);
    assert_eq!(c.failure_detectors_fired, ["custom:fatal"]);
    assert_eq!(
        (c.capture.group("rank"), c.capture.group("code")),
        (Some("7"), Some("E1234"))
    );
}

#[test]
fn tier5_match_straddling_a_chunk_boundary() {
    let t = Trial::new();
    let needle = "custom failure marker 42";
    let mut log = "z".repeat(LOG_CHUNK_BYTES - 8);
    log.push_str(needle);
    log.push('\n');
    let cfg = with_custom(vec![custom("m", r"failure marker (?P<n>\d+)")]);
    let c = classify(&t.logs("", log), &cfg);
    assert_eq!(c.failure_detectors_fired, ["custom:m"]);
    assert_eq!(c.capture.group("n").unwrap(), "42");
}

#[test]
fn tier5_fires_once_across_both_streams() {
    let t = Trial::new();
    let cfg = with_custom(vec![custom("e", r"ERR (?P<n>\d)")]);
    let c = classify(&t.logs("ERR 1\n", "ERR 2\n"), &cfg);
    assert_eq!(c.failure_detectors_fired, ["custom:e"]);
    assert_eq!(
        c.capture.group("n").unwrap(),
        "1",
        "stdout is scanned first"
    );
}

/// docs/compatibility.md, `separate-streams`: AORTA scanned `stdout + "\n" + stderr` as one text.
#[test]
fn stdout_and_stderr_are_two_texts_with_stdout_first() {
    let t = Trial::new();
    let cfg = with_custom(vec![
        custom("seam", r"BEGIN\s+END"),
        custom_with(
            "host",
            r"host_rank=(?P<rank>\d+)",
            None,
            OnMatch::Info,
            false,
        ),
        custom_with(
            "local",
            r"local_rank=(?P<rank>\d+)",
            None,
            OnMatch::Info,
            false,
        ),
        custom_with("warn_a", "WARN-A", None, OnMatch::Warn, false),
        custom_with("warn_b", "WARN-B", None, OnMatch::Warn, false),
    ]);
    let c = classify(
        &t.logs(
            "local_rank=2\nWARN-B\nBEGIN\n",
            "END\nhost_rank=7\nWARN-A\n",
        ),
        &cfg,
    );
    assert!(
        c.failure_detectors_fired.is_empty(),
        "no match across the seam"
    );
    assert_eq!(
        c.capture.group("rank").unwrap(),
        "7",
        "the later stream's value wins"
    );
    assert_eq!(c.warn_detectors_fired, ["custom:warn_b", "custom:warn_a"]);
}

#[test]
fn unreadable_log_is_recorded_and_the_other_stream_still_scanned() {
    let t = Trial::new();
    let mut obs = t.logs("", "Traceback (most recent call last):\n");
    obs.stdout_log = Some(t.path("does-not-exist.log"));
    let c = classify(&obs, &with_custom(vec![custom("tb", "most recent call")]));
    assert_eq!(
        c.failure_detectors_fired,
        ["tier4:python_traceback", "custom:tb"]
    );
    let err = c.capture.classifier_error.as_deref().unwrap();
    assert!(err.starts_with("IoError: reading stdout log"), "{err}");
    assert_eq!(
        err.matches("IoError").count(),
        1,
        "reported once though Tiers 4 and 5 both read: {err}"
    );
}

#[test]
fn tier5_catastrophic_regex_hits_the_backtrack_limit_not_a_hang() {
    let t = Trial::new();
    // A look-behind that fails after every split: `seek` cannot skip it, since the pattern
    // without it (`(x+x+)+ y`) matches.
    let cfg = with_custom(vec![
        custom("evil", r"(x+x+)+(?<!x) y"),
        custom("ok", "tail"),
    ]);
    let c = classify(&t.logs(format!("{} y\ntail\n", "x".repeat(40)), ""), &cfg);
    assert_eq!(c.failure_detectors_fired, ["custom:ok"]);
    let err = c.capture.classifier_error.as_deref().unwrap();
    assert!(err.contains("RegexRuntimeError: custom:evil"), "{err}");
}

#[test]
fn tier5_condition_budget_retires_a_pattern_that_never_holds() {
    let t = Trial::new();
    let cond = Some("capture['c'] == 'never'");
    let cfg = with_custom(vec![custom_with(
        "every",
        r"(?P<c>x)",
        cond,
        OnMatch::Fail,
        false,
    )]);
    let log = "x".repeat(aorta_classify::CONDITION_EVAL_BUDGET as usize + 10);
    let c = classify(&t.logs(log, ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c
        .capture
        .classifier_error
        .as_deref()
        .unwrap()
        .contains("ConditionBudgetExceeded: custom:every"));
}
