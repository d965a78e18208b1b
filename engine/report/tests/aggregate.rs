//! AORTA §11.4: aggregation of trial records into a cell row.

mod common;
use aorta_report::{CellStats, Outcome, StepTimeSource};
use aorta_trial::{ExitStatus, FailureDetail, Metric};
use common::*;
use serde_json::json;

#[test]
fn all_pass_and_mixed_counts() {
    let r = triage();
    let s = agg(&r, "baseline-local", &trials(&[P, P], &[10.0]));
    assert_eq!((s.passed_count, s.failed_count, s.error_count), (2, 0, 0));
    assert_eq!(s.failure_rate(), 0.0);
    let s = agg(&r, "baseline-local", &trials(&[P, F, F, P, F], &[10.0]));
    assert_eq!((s.passed_count, s.failed_count, s.error_count), (2, 3, 0));
    assert!((s.failure_rate() - 0.6).abs() < 1e-12);
}

#[test]
fn setup_and_infrastructure_failures_are_errors_outside_the_denominator() {
    let r = triage();
    let mut setup = rec(1, E);
    setup.exit_status = ExitStatus::WorkloadSetupFailed;
    let ts = vec![steps(0, F, &[5.0]), setup, rec(2, E), steps(3, P, &[5.0])];
    let s = agg(&r, "baseline-local", &ts);
    assert_eq!((s.passed_count, s.failed_count, s.error_count), (1, 1, 2));
    assert_eq!(s.failure_rate(), 0.5);
    assert_eq!(s.error_rate(), 0.5);
    assert!(s.unreliable());
}

#[test]
fn all_error_cell_has_zero_failure_rate_and_no_valid_trials() {
    let r = triage();
    let s = agg(&r, "tf32-local", &[rec(0, E), rec(1, E)]);
    assert_eq!(s.failure_rate(), 0.0);
    let b = agg(&r, "baseline-local", &trials(&[P, P], &[10.0]));
    let md = matrix(&r, vec![b, s]).to_markdown();
    assert!(md.contains("0 / 0 (no valid trials)"), "{md}");
}

#[test]
fn step_time_ladder_and_worst_source() {
    let r = triage(); // steps: 4
    let per_step = agg(&r, "baseline-local", &[steps(0, P, &[10.0, 20.0])]);
    assert_eq!(per_step.step_time_source, StepTimeSource::PerStep);
    assert_eq!(per_step.step_times_ms, vec![10.0, 20.0]);

    let mut e = rec(0, P);
    e.result.total_iterations = 10;
    e.result.elapsed_sec = 2.0;
    let elapsed = agg(&r, "baseline-local", std::slice::from_ref(&e));
    assert_eq!(elapsed.step_time_source, StepTimeSource::ElapsedPerIter);
    assert_eq!(elapsed.step_times_ms, vec![200.0]);

    let wall = agg(&r, "baseline-local", &[rec(0, P)]); // 2.0 s / 4 steps
    assert_eq!(wall.step_time_source, StepTimeSource::WallClockTotal);
    assert_eq!(wall.step_times_ms, vec![500.0]);

    let mut none = rec(0, P);
    none.walltime_sec = 0.0;
    let missing = agg(&r, "baseline-local", std::slice::from_ref(&none));
    assert_eq!(missing.step_time_source, StepTimeSource::Missing);
    assert_eq!(
        (missing.step.mean, missing.step.p99, missing.step.max),
        (0.0, 0.0, 0.0)
    );

    let mixed = agg(
        &r,
        "baseline-local",
        &[steps(0, P, &[10.0]), e.clone(), rec(2, P)],
    );
    assert_eq!(mixed.step_time_source, StepTimeSource::WallClockTotal);
    assert_eq!(mixed.step_times_ms, vec![10.0, 200.0, 500.0]);

    // A missing trial contributes nothing and does not downgrade the others.
    let mut none1 = none.clone();
    none1.trial_index = 1;
    let partial = agg(&r, "baseline-local", &[steps(0, P, &[10.0, 30.0]), none1]);
    assert_eq!(partial.step_time_source, StepTimeSource::PerStep);
    assert_eq!(partial.step.mean, 20.0);
}

#[test]
fn error_cell_keeps_row_with_zeros_and_error() {
    let r = triage();
    let c = &r.cells[1];
    let mut t = steps(0, F, &[10.0]);
    t.result.failure_details = vec![FailureDetail {
        hint: Some("reinstall ROCm".to_string()),
        ..Default::default()
    }];
    let s = CellStats::aggregate(c, &r, &[t], Some("UnknownMitigationError: nope".into()));
    assert_eq!(s.error.as_deref(), Some("UnknownMitigationError: nope"));
    assert_eq!(s.step_time_source, StepTimeSource::Missing);
    assert_eq!((s.passed_count, s.failed_count, s.error_count), (0, 1, 0));
    assert_eq!(s.step.mean, 0.0);
    assert!(s.exit_status_counts.is_empty() && s.outcome_counts.is_empty());
    assert_eq!(s.iters_display, "—");
    assert_eq!(s.failure_hints, vec![("reinstall ROCm".to_string(), 1)]);
    let empty = CellStats::aggregate(c, &r, &[], Some("boom".into()));
    assert_eq!((empty.trials, empty.failed_count), (0, 0));
}

#[test]
fn env_paths_percentiles_and_exit_histogram() {
    let r = triage();
    let mut ts: Vec<_> = (0..11).map(|i| steps(i, P, &[f64::from(i + 1)])).collect();
    ts[3].exit_status = ExitStatus::WorkloadFailed;
    ts[3].verdict = F;
    ts.reverse();
    let s = agg(&r, "tf32-local", &ts);
    assert_eq!(
        s.resolved_env_vars.get("NCCL_DEBUG").map(String::as_str),
        Some("INFO")
    );
    assert_eq!(
        s.resolved_env_vars.get("DISABLE_TF32").map(String::as_str),
        Some("1")
    );
    assert_eq!(s.extra_env.len(), 1);
    assert_eq!(s.trial_paths[2], "cells/tf32-local/trial_2/result.json");
    assert_eq!(s.trial_paths[10], "cells/tf32-local/trial_10/result.json");
    assert_eq!((s.step.min, s.step.max, s.step.p50), (1.0, 11.0, 6.0));
    assert!((s.step.p90 - 10.0).abs() < 1e-12 && (s.step.p99 - 10.9).abs() < 1e-12);
    assert!((s.step.std - 10.0f64.sqrt()).abs() < 1e-12);
    let hist: Vec<(&str, usize)> = s
        .exit_status_counts
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(hist, vec![("ok", 10), ("workload_failed", 1)]);
}

#[test]
fn hints_are_counted_per_trial_in_first_seen_order() {
    let r = triage();
    let with = |i, hints: &[serde_json::Value]| {
        let mut t = steps(i, F, &[1.0]);
        t.result.failure_details = hints
            .iter()
            .map(|h| serde_json::from_value(h.clone()).unwrap())
            .collect();
        t
    };
    let none = agg(&r, "baseline-local", &[with(0, &[json!({"error": "x"})])]);
    assert!(none.failure_hints.is_empty());
    let m = matrix(&r, vec![none]);
    assert_eq!(json(&m)["cells"][0]["failure_hints"], json!([]));
    let s = agg(
        &r,
        "baseline-local",
        &[
            with(
                0,
                &[
                    json!({"hint": "B"}),
                    json!({"hint": "A"}),
                    json!({"hint": "B"}),
                ],
            ),
            with(
                1,
                &[
                    json!({"hint": ""}),
                    json!({"hint": 3}),
                    json!({"hint": "A"}),
                ],
            ),
            with(2, &[json!({"error": "no hint"})]),
        ],
    );
    assert_eq!(
        s.failure_hints,
        vec![("B".to_string(), 1), ("A".to_string(), 2)]
    );
}

#[test]
fn did_not_run_inference_and_outcomes() {
    let r = triage();
    let one = |t: aorta_trial::TrialRecord| agg(&r, "baseline-local", &[t]);
    // non-ok, no step times, no elapsed → did_not_run, and no wall-clock fallback.
    let dnr = one(rec(0, E));
    assert_eq!(dnr.outcome_counts.get(&Outcome::DidNotRun), Some(&1));
    assert!(dnr.did_not_run());
    assert_eq!(dnr.step_time_source, StepTimeSource::Missing);
    // a positive step time, elapsed > 0, or an ok status → not inferred.
    assert!(!one(steps(0, F, &[3.0])).did_not_run());
    let mut el = rec(0, F);
    el.result.elapsed_sec = 1.0;
    assert!(!one(el).did_not_run());
    assert_eq!(
        one(rec(0, P)).outcome_counts.get(&Outcome::Unknown),
        Some(&1)
    );
    // explicit main_work_started=false, even with an ok status.
    let mut explicit = rec(0, P);
    explicit.result.main_work_started = Some(false);
    let s = one(explicit);
    assert!(s.did_not_run());
    assert_eq!(s.step_time_source, StepTimeSource::Missing);
    let started = |e, c, passed| {
        let mut t = rec(0, if passed { P } else { F });
        t.result.main_work_started = Some(true);
        t.result.executed_iterations = Some(e);
        t.result.configured_iterations = Some(c);
        t
    };
    assert_eq!(
        one(started(10, 10, true))
            .outcome_counts
            .get(&Outcome::Completed),
        Some(&1)
    );
    assert_eq!(
        one(started(12, 10, false))
            .outcome_counts
            .get(&Outcome::Completed),
        Some(&1)
    );
    assert_eq!(
        one(started(3, 10, false))
            .outcome_counts
            .get(&Outcome::CrashedAfterIterations),
        Some(&1)
    );
    assert_eq!(
        one(started(3, 10, true))
            .outcome_counts
            .get(&Outcome::Unknown),
        Some(&1)
    );
    // mixed outcomes are not a did_not_run cell.
    let mixed = agg(&r, "baseline-local", &[rec(0, E), rec(1, P)]);
    assert!(!mixed.did_not_run());
}

#[test]
fn iters_display() {
    let r = triage();
    let t = |i, e: Option<u64>, c: Option<u64>| {
        let mut t = rec(i, P);
        t.result.executed_iterations = e;
        t.result.configured_iterations = c;
        t
    };
    let show = |ts: &[aorta_trial::TrialRecord]| agg(&r, "baseline-local", ts).iters_display;
    assert_eq!(
        show(&[t(0, Some(10), Some(10)), t(1, Some(10), Some(10))]),
        "10/10"
    );
    assert_eq!(
        show(&[t(0, Some(4), Some(10)), t(1, Some(10), Some(10))]),
        "4..10/10"
    );
    assert_eq!(
        show(&[t(0, Some(4), Some(10)), t(1, Some(4), Some(12))]),
        "?/?"
    );
    assert_eq!(show(&[t(0, None, None), t(1, None, None)]), "—");
    assert_eq!(
        show(&[t(0, None, Some(10)), t(1, Some(10), Some(10))]),
        "—/10"
    );
    let s = agg(
        &r,
        "baseline-local",
        &[t(0, Some(4), Some(10)), t(1, Some(10), Some(10))],
    );
    assert_eq!(
        (s.executed_iter_min, s.executed_iter_max, s.configured_iters),
        (Some(4), Some(10), Some(10))
    );
    assert_eq!(
        agg(
            &r,
            "baseline-local",
            &[t(0, Some(4), Some(10)), t(1, Some(4), Some(12))]
        )
        .configured_iters,
        None
    );
}

#[test]
fn top_detectors() {
    let r = triage();
    let t = |i, flat: &[&str], metric: &[&str], warn: &[&str]| {
        let mut t = rec(i, F);
        t.failure_detectors_fired = flat.iter().map(|s| s.to_string()).collect();
        t.warn_detectors_fired = warn.iter().map(|s| s.to_string()).collect();
        t.result.metrics.insert(
            "failure_detectors_fired".into(),
            Metric::Texts(metric.iter().map(|s| s.to_string()).collect()),
        );
        t
    };
    let s = agg(
        &r,
        "baseline-local",
        &[
            t(0, &["a"], &[], &[]),
            t(1, &["b"], &[], &["w"]),
            t(2, &["b", "a"], &[], &[]),
            t(3, &["b"], &[], &[]),
        ],
    );
    assert_eq!(s.top_failure_detector_id.as_deref(), Some("b"));
    assert_eq!(s.top_warn_detector_id.as_deref(), Some("w"));
    let tie = agg(
        &r,
        "baseline-local",
        &[t(0, &["x", "y"], &[], &[]), t(1, &["y", "x"], &[], &[])],
    );
    assert_eq!(tie.top_failure_detector_id.as_deref(), Some("x"));
    // The same id in metrics and the flat list counts once per trial: dup 1 < other 2 (counted
    // twice, dup would tie at 2 and win as the first seen).
    let once = agg(
        &r,
        "baseline-local",
        &[
            t(0, &["dup"], &["dup"], &[]),
            t(1, &["other"], &[], &[]),
            t(2, &[], &["other"], &[]),
        ],
    );
    assert_eq!(once.top_failure_detector_id.as_deref(), Some("other"));
    let none = agg(&r, "baseline-local", &[rec(0, P)]);
    assert_eq!(
        (none.top_failure_detector_id, none.top_warn_detector_id),
        (None, None)
    );
    let md = matrix(&r, vec![agg(&r, "baseline-local", &[rec(0, P)])]).to_markdown();
    assert!(!md.contains("Top failure") && !md.contains("Top warn"));
    let md = matrix(&r, vec![s]).to_markdown();
    assert!(md.contains("| Top failure | Top warn |"), "{md}");
}

#[test]
fn stop_after_notes() {
    let r = recipe(
        "schema_version: 1\nworkload: training\ntrials: 1\nsteps: 1\nstop_after: {events: 2, max_trials: 4}\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n",
    );
    let note = |vs: &[aorta_trial::Verdict]| {
        agg(&r, "baseline-local", &trials(vs, &[1.0]))
            .stop_after_note
            .unwrap()
    };
    assert_eq!(
        note(&[P, F, F]),
        "stopped early: 2 fail event(s) in 3 trial(s)"
    );
    assert_eq!(
        note(&[P, F, P, F]),
        "cap reached: 2 fail event(s) in 4 trial(s)"
    );
    assert_eq!(
        note(&[P, P, P, P]),
        "cap reached: 0 fail event(s) in 4 trial(s)"
    );
    assert_eq!(note(&[E, F]), "1 fail event(s) in 2 trial(s)");
    assert_eq!(
        agg(&triage(), "baseline-local", &trials(&[F], &[1.0])).stop_after_note,
        None
    );
}

/// A cached rerun may hand over the records in another order (the cache answers first):
/// the aggregate is the same.
#[test]
fn record_order_does_not_matter() {
    let r = triage();
    let mut ts = vec![
        steps(0, P, &[1.0, 2.0]),
        steps(1, F, &[3.0]),
        steps(2, P, &[4.0, 5.0]),
    ];
    ts[1].result.failure_details = vec![FailureDetail {
        hint: Some("NaN at layer 3".to_string()),
        ..Default::default()
    }];
    let forward = agg(&r, "baseline-local", &ts);
    ts.reverse();
    assert_eq!(agg(&r, "baseline-local", &ts), forward);
    assert_eq!(forward.step_times_ms, [1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn logits_checksums_are_compared_across_trials() {
    let r = triage();
    let with = |i, sum: Option<&str>| {
        let mut t = steps(i, P, &[1.0]);
        if let Some(s) = sum {
            t.result
                .metrics
                .insert("logits_checksum".into(), Metric::Text(s.to_string()));
        }
        t
    };
    let same = agg(
        &r,
        "baseline-local",
        &[with(0, Some("0xaa")), with(1, Some("0xaa")), with(2, None)],
    );
    assert_eq!(same.logits_checksums, vec![("0xaa".to_string(), 2)]);
    assert!(same.failure_hints.is_empty(), "agreeing trials add no hint");
    let moved = agg(
        &r,
        "baseline-local",
        &[
            with(0, Some("0xaa")),
            with(1, Some("0xbb")),
            with(2, Some("0xaa")),
        ],
    );
    assert_eq!(
        moved.logits_checksums,
        vec![("0xaa".to_string(), 2), ("0xbb".to_string(), 1)]
    );
    assert_eq!(moved.failure_hints.len(), 1);
    assert!(
        moved.failure_hints[0]
            .0
            .starts_with(aorta_report::LOGITS_DISAGREE_HINT),
        "{:?}",
        moved.failure_hints
    );
    assert!(moved.failure_hints[0].0.ends_with("(2 distinct values)"));
    assert_eq!(
        moved.failure_hints[0].1, 1,
        "the trials off the majority value"
    );
    let m = matrix(&r, vec![moved]);
    assert_eq!(
        json(&m)["cells"][0]["logits_checksums"],
        json!([["0xaa", 2], ["0xbb", 1]])
    );
}

#[test]
fn hints_that_differ_only_in_numbers_are_one_line() {
    let r = triage();
    let with = |i, hint: &str| {
        let mut t = steps(i, F, &[1.0]);
        t.result.failure_details = vec![FailureDetail {
            hint: Some(hint.to_string()),
            ..Default::default()
        }];
        t
    };
    let s = agg(
        &r,
        "baseline-local",
        &[
            with(0, "h2d at iteration 10: 711616/1000000 elements"),
            with(1, "h2d at iteration 10: 469568/1000000 elements"),
            with(2, "h2d at iteration 10: 711616/1000000 elements"),
            with(3, "all_to_all mismatch"),
        ],
    );
    assert_eq!(
        s.failure_hints,
        vec![
            (
                "h2d at iteration 10: 711616/1000000 elements (numbers vary: 2 variants)"
                    .to_string(),
                3
            ),
            ("all_to_all mismatch".to_string(), 1)
        ]
    );
}
