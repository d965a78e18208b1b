//! AORTA §11.6: end-of-run summary strings, plus aorta's cache line (whose counts the
//! caller supplies: the matrix does not know them).

mod common;
use aorta_report::{CellStats, SummaryOptions};
use common::*;

const OPTS: SummaryOptions = SummaryOptions {
    unrecorded: &[],
    run_dir: "out/T/training/TS",
    executed: 2,
    reused: 0,
};

#[test]
fn all_clean() {
    let r = recipe("schema_version: 1\nworkload: training\ntrials: 2\nsteps: 1\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n");
    let m = matrix(
        &r,
        vec![agg(&r, "baseline-local", &trials(&[P, P], &[1.0]))],
    );
    assert_eq!(
        m.summary(OPTS),
        "Sweep summary: all 1 cell(s) passed.\n\
         Answer: The baseline baseline-local did not fail in 2 trial(s): there is no failure to fix in this run.\n\
         Next: Reproduce the failure first: more trials (`trials:`), the failing environment, or the job's real settings.\n\
         Trials: 2 executed, 0 reused from cache.\n"
    );
}

#[test]
fn failing_error_only_and_mixed_cells() {
    let r = recipe(
        "schema_version: 1\nworkload: training\ntrials: 2\nsteps: 1\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: tf32-local, mitigations: [tf32_off], environment: local}\n  - {name: err-local, mitigations: [xnack], environment: local}\n  - {name: mixed-local, mitigations: [hsa_no_sdma], environment: local}\n",
    );
    let mut hinted = steps(1, F, &[1.0]);
    hinted.result.failure_details = vec![aorta_trial::FailureDetail {
        hint: Some("NaN at layer 3".into()),
        ..Default::default()
    }];
    let cells = vec![
        agg(&r, "baseline-local", &trials(&[P, P], &[1.0])),
        agg(&r, "tf32-local", &[steps(0, P, &[1.0]), hinted]),
        agg(&r, "err-local", &[rec(0, E), rec(1, E)]),
        agg(
            &r,
            "mixed-local",
            &[steps(0, F, &[1.0]), rec(1, E), steps(2, P, &[1.0])],
        ),
    ];
    let s = matrix(&r, cells).summary(SummaryOptions {
        executed: 9,
        ..OPTS
    });
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines,
        [
            "Sweep summary: 4 cell(s) -- 1 clean, 2 with failing trials, 1 with errors.",
            "  [fail] tf32-local: 1 failed of 2 trial(s) (NaN at layer 3) -> cells/tf32-local/",
            "  [error] err-local: 2 errored of 2 trial(s) -> cells/err-local/",
            "  [fail] mixed-local: 1 failed, 1 errored of 3 trial(s) -> cells/mixed-local/",
            "Answer: The baseline baseline-local did not fail in 2 trial(s): there is no failure to fix in this run; tf32-local, mixed-local failed (not shown worse at 95%).",
            "Next: Look at why tf32-local fails where the baseline does not (its logs, matrix.md's failure hints): what its mitigation changes is where to look.",
            "Trials: 9 executed, 0 reused from cache.",
            "Full matrix: out/T/training/TS/matrix.md",
        ]
    );
}

#[test]
fn whole_cell_error_on_one_line() {
    let r = triage();
    let cells = vec![
        agg(&r, "baseline-local", &trials(&[P], &[1.0])),
        CellStats::aggregate(
            &r.cells[1],
            &r,
            &[],
            Some("UnknownMitigationError: unknown mitigation 'x'\nknown: none, tf32_off".into()),
        ),
    ];
    let s = matrix(&r, cells).summary(SummaryOptions {
        unrecorded: &[],
        run_dir: "run/",
        executed: 1,
        reused: 0,
    });
    assert!(s.contains("  [error] tf32-local: cell did not run (UnknownMitigationError: unknown mitigation 'x' known: none, tf32_off) -> cells/tf32-local/\n"), "{s}");
    assert!(
        s.starts_with(
            "Sweep summary: 2 cell(s) -- 1 clean, 0 with failing trials, 1 with errors.\n"
        ),
        "{s}"
    );
    assert!(s.ends_with("Full matrix: run/matrix.md\n"), "{s}");
}

/// AORTA's `resumed`: a cell whose trials all came from a prior run. The caller knows only
/// this invocation's totals, so cells count as resumed when nothing was executed at all.
#[test]
fn resumed_cells_are_tagged_and_counted() {
    let r = triage();
    let cells = |tf32: &[aorta_trial::Verdict]| {
        vec![
            agg(&r, "baseline-local", &trials(&[P, P], &[1.0])),
            agg(&r, "tf32-local", &trials(tf32, &[1.0])),
        ]
    };
    let cached = SummaryOptions {
        executed: 0,
        reused: 4,
        ..OPTS
    };
    let clean = matrix(&r, cells(&[P, P])).summary(cached);
    assert_eq!(clean, "Sweep summary: all 2 cell(s) passed. 2 resumed from a prior run (no trials re-executed).\n\
        Answer: The baseline baseline-local did not fail in 2 trial(s): there is no failure to fix in this run.\n\
        Next: Reproduce the failure first: more trials (`trials:`), the failing environment, or the job's real settings.\n\
        Trials: 0 executed, 4 reused from cache.\n");
    let s = matrix(&r, cells(&[P, F])).summary(cached);
    assert!(s.starts_with("Sweep summary: 2 cell(s) -- 1 clean, 1 with failing trials, 0 with errors. 2 resumed from a prior run (no trials re-executed).\n"), "{s}");
    assert!(
        s.contains("  [fail] tf32-local: 1 failed of 2 trial(s) [resumed] -> cells/tf32-local/\n"),
        "{s}"
    );
    // One trial executed: no cell is known to be resumed.
    let s = matrix(&r, cells(&[P, F])).summary(SummaryOptions {
        executed: 1,
        reused: 3,
        ..OPTS
    });
    assert!(
        s.starts_with(
            "Sweep summary: 2 cell(s) -- 1 clean, 1 with failing trials, 0 with errors.\n"
        ),
        "{s}"
    );
    assert!(
        s.contains("  [fail] tf32-local: 1 failed of 2 trial(s) -> cells/tf32-local/\n"),
        "{s}"
    );
    assert!(
        s.contains("Trials: 1 executed, 3 reused from cache.\n"),
        "{s}"
    );
    // A cell that could not run has no trials to have reused.
    let errored = vec![
        agg(&r, "baseline-local", &trials(&[P, P], &[1.0])),
        CellStats::aggregate(&r.cells[1], &r, &[], Some("boom".into())),
    ];
    let s = matrix(&r, errored).summary(SummaryOptions {
        reused: 2,
        ..cached
    });
    assert!(s.starts_with("Sweep summary: 2 cell(s) -- 1 clean, 0 with failing trials, 1 with errors. 1 resumed from a prior run (no trials re-executed).\n"), "{s}");
    assert!(
        s.contains("  [error] tf32-local: cell did not run (boom) -> cells/tf32-local/\n"),
        "{s}"
    );
}

#[test]
fn degraded_runs_still_summarise() {
    let r = recipe(
        "schema_version: 1\nworkload: training\ntrials: 2\nsteps: 1\nconfound: {baseline_cell: baseline-local}\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: tf32-local, mitigations: [tf32_off], environment: local}\n",
    );
    let m = matrix(
        &r,
        vec![
            agg(&r, "baseline-local", &[rec(0, E), rec(1, E)]),
            agg(&r, "tf32-local", &trials(&[P, P], &[1.0])),
        ],
    );
    assert!(m.incomplete_reason().is_some());
    assert!(m.summary(OPTS).starts_with(
        "Sweep summary: 2 cell(s) -- 1 clean, 0 with failing trials, 1 with errors.\n"
    ));
}
