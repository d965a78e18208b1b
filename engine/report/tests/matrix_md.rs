//! AORTA §11.4 (matrix.md) and §3.6 (matrix.json): conditional columns, header lines,
//! sections and the JSON shape.

mod common;
use aorta_report::{CellStats, Matrix, RunInfo};
use common::*;
use serde_json::json;

/// The header of the matrix table (the answer's table comes before it).
fn header_row(md: &str) -> String {
    md.lines()
        .skip_while(|l| !l.starts_with("## Reproduction Summary"))
        .find(|l| l.starts_with("| "))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn errors_column_only_with_error_trials_and_unreliable_at_ten_percent() {
    let r = triage();
    let clean = matrix(
        &r,
        vec![agg(&r, "baseline-local", &trials(&[P, F], &[1.0]))],
    )
    .to_markdown();
    assert!(!header_row(&clean).contains("Errors"));
    let mut ts = trials(&[P, P, P, P, P, P, P, P, P, P], &[1.0]);
    ts[9] = rec(9, E);
    let md = matrix(
        &r,
        vec![
            agg(&r, "baseline-local", &ts[..9]),
            agg(&r, "tf32-local", &ts),
        ],
    )
    .to_markdown();
    assert!(header_row(&md).contains("| Errors "), "{md}");
    assert!(md.contains("1 / 10 (unreliable)"), "{md}");
    assert!(md.contains("0 / 9 "), "{md}");
    let mut many = trials(&[P; 11], &[1.0]);
    many[10] = rec(10, E);
    let md = matrix(&r, vec![agg(&r, "baseline-local", &many)]).to_markdown();
    let row = md
        .lines()
        .find(|l| l.starts_with("| baseline-local"))
        .unwrap();
    assert!(
        row.contains("| 1 / 11 |") && !row.contains("unreliable"),
        "{md}"
    );
}

#[test]
fn config_column_shows_only_varying_keys() {
    let same = recipe(
        "schema_version: 1\nworkload: race\ntrials: 1\nsteps: 1\nworkload_config: {mode: fsdp}\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: b, mitigations: [xnack], environment: local, workload_config: {mode: fsdp}}\n",
    );
    let md = matrix(
        &same,
        same.cells
            .iter()
            .map(|c| CellStats::aggregate(c, &same, &[rec(0, P)], None))
            .collect(),
    )
    .to_markdown();
    assert!(!header_row(&md).contains("Config"), "{md}");
    let varying = recipe(
        "schema_version: 1\nworkload: race\ntrials: 1\nsteps: 1\nworkload_config: {mode: fsdp, dtype: bf16}\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: b, mitigations: [xnack], environment: local, workload_config: {mode: ddp, extra: 'a|b'}}\n  - {name: c, mitigations: [tf32_off], environment: local, workload_config: {nested: {y: 1, x: [2]}}}\n",
    );
    let md = matrix(
        &varying,
        varying
            .cells
            .iter()
            .map(|c| CellStats::aggregate(c, &varying, &[rec(0, P)], None))
            .collect(),
    )
    .to_markdown();
    assert!(header_row(&md).contains("| Config "), "{md}");
    assert!(
        md.contains("| baseline-local | none        | local       | mode=fsdp "),
        "{md}"
    );
    assert!(md.contains(r"extra=a\|b, mode=ddp"), "{md}");
    assert!(md.contains(r#"mode=fsdp, nested={"x":[2],"y":1}"#), "{md}");
    assert!(!md.contains("dtype="), "dtype is the same everywhere: {md}");
}

#[test]
fn config_cell_is_a_dash_when_the_cell_lacks_every_varying_key() {
    let r = recipe(
        "schema_version: 1\nworkload: race\ntrials: 1\nsteps: 1\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n  - {name: b, mitigations: [xnack], environment: local, workload_config: {k: 1}}\n",
    );
    let md = matrix(
        &r,
        r.cells
            .iter()
            .map(|c| CellStats::aggregate(c, &r, &[rec(0, P)], None))
            .collect(),
    )
    .to_markdown();
    assert!(
        md.contains("| baseline-local | none        | local       | —      |"),
        "{md}"
    );
}

#[test]
fn iters_column_hidden_for_legacy_and_shown_for_disagreement() {
    let r = triage();
    let md = matrix(&r, vec![agg(&r, "baseline-local", &trials(&[P], &[1.0]))]).to_markdown();
    assert!(!header_row(&md).contains("Iters"));
    let mut a = rec(0, P);
    a.result.configured_iterations = Some(5);
    let mut b = rec(1, P);
    b.result.configured_iterations = Some(6);
    let md = matrix(&r, vec![agg(&r, "baseline-local", &[a, b])]).to_markdown();
    assert!(header_row(&md).contains("| Iters "), "{md}");
    assert!(md.contains("| ?/?   |"), "{md}");
}

#[test]
fn stop_after_column_even_when_every_cell_errored() {
    let r = recipe(
        "schema_version: 1\nworkload: training\ntrials: 1\nsteps: 1\nstop_after: {events: 1, max_trials: 5}\ncells:\n  - {name: baseline-local, mitigations: [none], environment: local}\n",
    );
    let s = CellStats::aggregate(&r.cells[0], &r, &[], Some("RuntimeError: x".into()));
    let md = matrix(&r, vec![s]).to_markdown();
    assert!(header_row(&md).contains("| Stop after "), "{md}");
    assert!(md.contains("**Trials per cell**: up to 5  \n"), "{md}");
    assert!(
        md.contains("| n/a          | n/a      | —          |"),
        "{md}"
    );
}

#[test]
fn failure_hints_section_only_with_hints() {
    let r = triage();
    let md = matrix(&r, vec![agg(&r, "baseline-local", &trials(&[F], &[1.0]))]).to_markdown();
    assert!(!md.contains("## Failure hints"));
    let mut t = steps(0, F, &[1.0]);
    t.result.failure_details = vec![aorta_trial::FailureDetail {
        hint: Some("NaN at layer 3".into()),
        ..Default::default()
    }];
    let md = matrix(
        &r,
        vec![agg(&r, "baseline-local", &[t, steps(1, P, &[1.0])])],
    )
    .to_markdown();
    assert!(
        md.contains("## Failure hints\n\n- **baseline-local** (1/2 trials): NaN at layer 3\n"),
        "{md}"
    );
}

#[test]
fn probe_tables_split_axes_and_show_directories() {
    let r = probe();
    let cells: Vec<_> = r
        .cells
        .iter()
        .map(|c| CellStats::aggregate(c, &r, &[rec(0, P)], None))
        .collect();
    let md = matrix(&r, cells).to_markdown();
    let h = header_row(&md);
    assert!(
        h.starts_with("| Mitigation | Diagnostic | Environment |"),
        "{h}"
    );
    assert!(h.contains("| Confound   | Directory "), "{h}");
    assert!(
        md.contains("| tf32_off   | none       | local       |"),
        "{md}"
    );
    assert!(md.contains("| tf32_off-none/ |"), "{md}");
}

#[test]
fn header_lines() {
    let r = triage();
    let mut run = RunInfo {
        run_timestamp: "2026-01-02T03-04-05".into(),
        warnings: vec!["host env probe was partial:\n rocm missing".into()],
        doctor: None,
    };
    let cells = vec![
        agg(&r, "baseline-local", &trials(&[P], &[412.3, 412.5])),
        agg(&r, "tf32-local", &trials(&[P], &[1.0])),
    ];
    let md = Matrix::new(&r, cells.clone(), run.clone()).to_markdown();
    assert!(md.starts_with("# Triage Matrix - training\n\n> [!WARNING]\n> host env probe was partial: rocm missing\n\n**Ticket**: (none)  \n"), "{md}");
    assert!(md.contains("**Recipe**: (flag-mode; in-memory)  \n"));
    assert!(
        md.contains("**Baseline cell**: baseline-local (mean step time = 412.4 ms)  \n**Report**: [report.html](report.html)"),
        "{md}"
    );
    run.warnings.clear();
    let md = Matrix::new(&r, cells, run).to_markdown();
    assert!(!md.contains("[!WARNING]"));
}

#[test]
fn a_probe_recipe_without_a_baseline_records_the_default_one_as_configured() {
    // AORTA's probe recipes carry the default baseline (first all-`none` cell) as configured;
    // triage recipes without one record null.
    let r = recipe("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [tf32_off, none]\ndiagnostic_axis: [none]\n");
    let cells: Vec<_> = r
        .cells
        .iter()
        .map(|c| CellStats::aggregate(c, &r, &[rec(0, P)], None))
        .collect();
    let j = json(&matrix(&r, cells));
    assert_eq!(j["confound"]["baseline_cell_configured"], "none-none");
    let t = triage();
    let cells = vec![agg(&t, "baseline-local", &trials(&[P], &[1.0]))];
    let j = json(&matrix(&t, cells));
    assert_eq!(j["confound"]["baseline_cell_configured"], json!(null));
}

#[test]
fn matrix_json_shape() {
    let r = probe();
    let cells: Vec<_> = r
        .cells
        .iter()
        .map(|c| CellStats::aggregate(c, &r, &[rec(0, P), rec(1, F)], None))
        .collect();
    let j = json(&matrix(&r, cells));
    let keys: Vec<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "schema_version",
            "workload",
            "ticket",
            "trials_per_cell",
            "steps_per_trial",
            "run_timestamp",
            "baseline_cell",
            "confound",
            "stop_after",
            "warnings",
            "recipe_source",
            "mode",
            "incomplete_reason",
            "answer",
            "cells"
        ]
    );
    assert_eq!(j["workload"], "_subprocess");
    assert_eq!(j["recipe_source"], json!({"path": null, "blake3": null}));
    assert_eq!(j["confound"]["baseline_cell_configured"], "none-none");
    let c = &j["cells"][1];
    assert_eq!(
        c["trial_paths"],
        json!([
            "tf32_off-none/trial_0/result.json",
            "tf32_off-none/trial_1/result.json"
        ])
    );
    assert_eq!(c["step_time_source"], "wall_clock_total");
    assert_eq!(c["confound"], "n/a");
    assert_eq!(c["confound_aorta"], "n/a");
    assert_eq!(c["step_time_ratio"], json!(null));
    assert_eq!(c["step_time_ratio_ci95"], json!(null));
    assert_eq!(
        c["resolved_environment"],
        json!({"name": "local", "docker": null, "venv": null, "buck_target": null, "inline": false})
    );
    assert_eq!(c["failure_rate"], json!(0.5));
    assert_eq!(c["resumed"], json!(false));
    let ckeys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(ckeys.first(), Some(&"name"));
    assert_eq!(ckeys.last(), Some(&"logits_checksums"));
    assert_eq!(ckeys.len(), 42);
}
