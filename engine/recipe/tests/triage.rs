//! AORTA §11.2: triage-mode recipe parsing.
mod common;
use common::*;

use aorta_recipe::{Mode, Verdict};
use aorta_source::DiagKind::{Cell, Schema, UnknownName};
use serde_json::json;

#[test]
fn minimal_yaml_and_equivalent_json_load_identically() {
    let y = ok(&triage_with(BASE_CELL));
    let json = r#"{"schema_version": 1, "workload": "training", "trials": 2, "steps": 3,
        "cells": [{"name": "baseline", "mitigations": ["none"], "environment": "local"}]}"#;
    let j = aorta_recipe::parse_recipe(
        &aorta_source::SourceFile::new("r.json", json),
        aorta_source::Syntax::Json,
        &aorta_registry::Registry::builtin(),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&y).unwrap(),
        serde_json::to_value(&j).unwrap()
    );
    assert_eq!(y.mode, Mode::Triage);
    assert_eq!(y.confound.threshold, 1.15);
    assert_eq!(y.confound.resolved_baseline, "baseline");
}

#[test]
fn ticket_confound_and_cell_overrides_are_honoured() {
    let r = ok(&format!(
        "{TRIAGE}ticket: T-1\nconfound: {{threshold: 1.3, baseline_cell: b}}\ncells:\n  - {{name: a, mitigations: [tf32_off], environment: local, trials: 5, steps: 7}}\n  - {{name: b, mitigations: [none], environment: default}}\n"
    ));
    assert_eq!(r.ticket.as_deref(), Some("T-1"));
    assert_eq!(r.confound.threshold, 1.3);
    assert_eq!(r.confound.resolved_baseline, "b");
    assert_eq!(r.cells[0].effective_trials(&r), 5);
    assert_eq!(r.cells[0].effective_steps(&r), 7);
    assert_eq!(r.cells[1].effective_trials(&r), 2);
}

#[test]
fn schema_version_rules() {
    assert_eq!(
        err(
            &triage_with(BASE_CELL).replace("schema_version: 1", "schema_version: 2"),
            Schema,
            "unsupported version 2"
        ),
        "2"
    );
    err(
        &triage_with(BASE_CELL).replace("schema_version: 1", "schema_version: '1'"),
        Schema,
        "must be the integer 1",
    );
    err(
        &triage_with(BASE_CELL).replace("schema_version: 1", "schema_version: true"),
        Schema,
        "must be the integer 1",
    );
}

#[test]
fn missing_required_keys_are_named() {
    for key in ["workload", "trials", "steps", "cells"] {
        let text: String = triage_with(BASE_CELL)
            .lines()
            .filter(|l| !l.starts_with(&format!("{key}:")))
            .map(|l| format!("{l}\n"))
            .collect();
        let text = if key == "cells" {
            text.lines()
                .filter(|l| !l.starts_with("  -"))
                .map(|l| format!("{l}\n"))
                .collect()
        } else {
            text
        };
        err(&text, Schema, &format!("missing required key '{key}'"));
    }
}

#[test]
fn unknown_top_level_key_lists_allowed_keys() {
    let e = common::parse(&format!("{}trails: 3\n", triage_with(BASE_CELL))).unwrap_err();
    assert!(e.to_string().contains("unknown key 'trails'"));
    assert!(e.to_string().contains("did you mean 'trials'"));
    assert!(e.help.as_deref().unwrap().contains("allowed keys:"));
}

#[test]
fn mitigation_list_rules() {
    err(
        &triage_with("  - {name: a, mitigations: [], environment: local}\n"),
        Schema,
        "must not be empty",
    );
    let e = common::parse(&triage_with(
        "  - {name: a, mitigations: [], environment: local}\n",
    ))
    .unwrap_err();
    assert!(e.help.unwrap().contains("['none']"));
    assert_eq!(
        err(
            &triage_with("  - {name: a, mitigations: [tf32_of], environment: local}\n"),
            UnknownName,
            "unknown mitigation 'tf32_of'"
        ),
        "tf32_of"
    );
    err(
        &triage_with("  - {name: a, mitigations: [none], environment: moon}\n"),
        UnknownName,
        "unknown environment 'moon'",
    );
}

#[test]
fn unknown_workload_loads() {
    ok(&triage_with(BASE_CELL).replace("workload: training", "workload: no_such_workload"));
}

#[test]
fn duplicate_cell_names_and_trials_zero() {
    let text = triage_with(&format!("{BASE_CELL}{BASE_CELL}"));
    assert_eq!(
        err(&text, Cell, "duplicate cell name 'baseline'"),
        "baseline"
    );
    err(
        &triage_with(BASE_CELL).replace("trials: 2", "trials: 0"),
        Schema,
        "must be an integer >= 1",
    );
    err(
        &triage_with(BASE_CELL).replace("trials: 2", "trials: true"),
        Schema,
        "must be an integer >= 1",
    );
    err(
        &triage_with(BASE_CELL).replace("trials: 2", "trials: 2.0"),
        Schema,
        "must be an integer >= 1",
    );
}

#[test]
fn confound_rules() {
    err(
        &format!("{}confound: {{threshhold: 1.2}}\n", triage_with(BASE_CELL)),
        Schema,
        "unknown key 'threshhold'",
    );
    err(
        &format!(
            "{}confound: {{baseline_cell: nope}}\n",
            triage_with(BASE_CELL)
        ),
        Cell,
        "does not name a cell",
    );
    err(
        &format!("{}confound: {{threshold: 0}}\n", triage_with(BASE_CELL)),
        Schema,
        "must be a number > 0",
    );
    err(
        &format!("{}confound: {{threshold: -1.5}}\n", triage_with(BASE_CELL)),
        Schema,
        "must be a number > 0",
    );
    err(
        &format!("{}confound: {{threshold: true}}\n", triage_with(BASE_CELL)),
        Schema,
        "must be a number",
    );
}

#[test]
fn cell_name_rules() {
    for bad in ["../x", "a/b", "-x"] {
        err(
            &triage_with(&format!(
                "  - {{name: '{bad}', mitigations: [none], environment: local}}\n"
            )),
            Cell,
            "is not allowed",
        );
    }
    for reserved in [".", "..", "matrix.md", "matrix.json"] {
        err(
            &triage_with(&format!(
                "  - {{name: '{reserved}', mitigations: [none], environment: local}}\n"
            )),
            Cell,
            "is reserved",
        );
    }
    for good in ["PROJ-1.fix", "a_b.c-d"] {
        ok(&triage_with(&format!(
            "  - {{name: '{good}', mitigations: [none], environment: local}}\n"
        )));
    }
}

#[test]
fn stacked_mitigations_conflict_names_cell_key_and_both_mitigations() {
    let text = triage_with(
        "  - {name: a, mitigations: [hsa_disable_cache, hsa_enable_cache], environment: local}\n",
    );
    let e = common::parse(&text).unwrap_err();
    let msg = e.to_string();
    assert_eq!(e.kind, Cell);
    for needle in [
        "cell 'a'",
        "HSA_DISABLE_CACHE",
        "hsa_disable_cache",
        "hsa_enable_cache",
        "'1'",
        "'0'",
    ] {
        assert!(msg.contains(needle), "{msg} lacks {needle}");
    }
    let r = ok(&triage_with(
        "  - {name: a, mitigations: [tf32_off, xnack, none], environment: local}\n",
    ));
    assert_eq!(
        r.cells[0]
            .resolved_env
            .get("DISABLE_TF32")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        r.cells[0].resolved_env.get("HSA_XNACK").map(String::as_str),
        Some("1")
    );
}

#[test]
fn same_value_stacking_is_fine_and_extra_env_overrides_silently() {
    ok(&triage_with(
        "  - {name: a, mitigations: [tf32_off, tf32_off], environment: local}\n",
    ));
    let r = ok(&triage_with("  - {name: a, mitigations: [tf32_off], environment: local, extra_env: {DISABLE_TF32: '0', FOO: bar}}\n"));
    assert_eq!(r.cells[0].resolved_env["DISABLE_TF32"], "0");
    assert_eq!(r.cells[0].env_origin["DISABLE_TF32"], "extra_env");
    assert_eq!(r.cells[0].resolved_env["FOO"], "bar");
    err(
        &triage_with(
            "  - {name: a, mitigations: [none], environment: local, extra_env: {FOO: 1}}\n",
        ),
        Schema,
        "must be a string",
    );
    err(
        &triage_with(
            "  - {name: a, mitigations: [none], environment: local, extra_env: {'1BAD': x}}\n",
        ),
        Schema,
        "not a valid environment variable name",
    );
    ok(&triage_with(
        "  - {name: a, mitigations: [none], environment: local, extra_env: null}\n",
    ));
}

#[test]
fn inline_docker_environments() {
    let r = ok(&triage_with(
        "  - {name: a, mitigations: [none], environment: {docker: 'rocm/pytorch:latest'}}\n  - {name: b, mitigations: [tf32_off], environment: {docker: 'rocm/pytorch:latest'}}\n",
    ));
    assert_eq!(r.cells[0].environment.name, "_inline_982a8846");
    assert_eq!(r.cells[1].environment.name, r.cells[0].environment.name);
    assert_eq!(r.inline_environments.len(), 1);
    err(
        &triage_with("  - {name: a, mitigations: [none], environment: {docker: x, name: y}}\n"),
        Schema,
        "unknown key 'name'",
    );
    err(
        &triage_with("  - {name: a, mitigations: [none], environment: {docker: ''}}\n"),
        Schema,
        "non-empty string",
    );
}

#[test]
fn workload_config_rules_and_merge() {
    let r = ok(&format!(
        "{TRIAGE}workload_config: {{a: 1, b: {{c: 2}}}}\ncells:\n  - {{name: x, mitigations: [none], environment: local, workload_config: {{a: 5, d: true}}}}\n"
    ));
    assert_eq!(
        serde_json::Value::Object(r.cells[0].effective_workload_config(&r)),
        json!({"a": 5, "b": {"c": 2}, "d": true})
    );
    assert!(ok(&triage_with(BASE_CELL)).workload_config.is_empty());
    err(
        &format!("{}workload_config: [1]\n", triage_with(BASE_CELL)),
        Schema,
        "must be a mapping",
    );
    err(
        &format!("{}workload_config: {{1: x}}\n", triage_with(BASE_CELL)),
        Schema,
        "keys must be strings",
    );
    err(
        &format!("{}workload_config: {{steps: 3}}\n", triage_with(BASE_CELL)),
        Schema,
        "'steps' is reserved",
    );
    err(
        &format!(
            "{}workload_config: {{_aorta_x: 3}}\n",
            triage_with(BASE_CELL)
        ),
        Schema,
        "reserved for the engine",
    );
    let e = common::parse(&triage_with(
        "  - {name: x, mitigations: [none], environment: local, workload_config: {steps: 1}}\n",
    ))
    .unwrap_err();
    assert_eq!(
        e.path.unwrap().to_string(),
        "cells[0].workload_config.steps"
    );
}

/// AORTA 0.3.0's recipe-wide `extra_env` (above the mitigations, below the cell's own) and
/// `trial_isolation` (every value runs as a process here).
#[test]
fn recipe_extra_env_and_trial_isolation() {
    let cells = "  - {name: baseline, mitigations: [none], environment: local}\n  - {name: b, mitigations: [cuda_launch_blocking], environment: local, extra_env: {FOO: '2'}}\n";
    let r = ok(&format!(
        "{}extra_env: {{FOO: '1', CUDA_LAUNCH_BLOCKING: '0'}}\ntrial_isolation: in_process\n",
        triage_with(cells)
    ));
    assert_eq!(r.trial_isolation, aorta_recipe::TrialIsolation::InProcess);
    assert!(r
        .trial_isolation
        .note()
        .unwrap()
        .contains("process of its own"));
    let base = &r.cells[0].resolved_env;
    assert_eq!(base["FOO"], "1");
    let b = &r.cells[1];
    assert_eq!(b.resolved_env["FOO"], "2", "the cell's own wins");
    assert_eq!(
        b.resolved_env["CUDA_LAUNCH_BLOCKING"], "0",
        "the recipe's extra_env is above the mitigations"
    );
    assert_eq!(b.env_origin["CUDA_LAUNCH_BLOCKING"], "extra_env (recipe)");
    assert!(ok(&triage_with(BASE_CELL)).trial_isolation.note().is_none());
    err(
        &format!("{}trial_isolation: threads\n", triage_with(BASE_CELL)),
        Schema,
        "unknown trial_isolation 'threads'",
    );
    err(
        &format!("{}extra_env: [A]\n", triage_with(BASE_CELL)),
        Schema,
        "extra_env",
    );
}

#[test]
fn collect_rules() {
    assert!(ok(&triage_with(BASE_CELL)).collect.is_empty());
    let r = ok(&format!(
        "{}collect: [layer_numerics, layer_numerics, rocprof]\n",
        triage_with(BASE_CELL)
    ));
    assert_eq!(r.collect.names(), ["layer_numerics", "rocprof"]);
    // aorta's kernel profilers reach workload trials too (docs/diagnostics.md).
    let r = ok(&format!(
        "{}collect: [ncu, torch_profiler]\n",
        triage_with(BASE_CELL)
    ));
    assert_eq!(r.collect.names(), ["ncu", "torch_profiler"]);
    let e = common::parse(&format!("{}collect: [bogus]\n", triage_with(BASE_CELL))).unwrap_err();
    assert!(
        e.to_string().contains("unknown collector 'bogus'") && e.help.unwrap().contains("rocprof")
    );
    assert_eq!(e.path.unwrap().to_string(), "collect[0]");
    err(
        &format!("{}collect: 3\n", triage_with(BASE_CELL)),
        Schema,
        "must be a list of collector names or a mapping",
    );
    let r = ok(&format!(
        "{}collect: {{rocprof: {{interval: '10'}}, numerics: null}}\n",
        triage_with(BASE_CELL)
    ));
    assert_eq!(r.collect.collectors[0].1["interval"], "10");
    assert!(r.collect.collectors[1].1.is_empty());
    err(
        &format!(
            "{}collect: {{rocprof: {{interval: 10}}}}\n",
            triage_with(BASE_CELL)
        ),
        Schema,
        "must be a string",
    );
    let r = ok(&format!(
        "{TRIAGE}collect: [rocprof]\ncells:\n  - {{name: a, mitigations: [none], environment: local}}\n  - {{name: b, mitigations: [none], environment: local, collect: [numerics]}}\n  - {{name: c, mitigations: [none], environment: local, collect: []}}\n"
    ));
    assert_eq!(r.cells[0].effective_collect(&r).names(), ["rocprof"]);
    assert_eq!(r.cells[1].effective_collect(&r).names(), ["numerics"]);
    assert!(r.cells[2].effective_collect(&r).is_empty());
    let e = common::parse(&triage_with(
        "  - {name: a, mitigations: [none], environment: local, collect: null}\n",
    ))
    .unwrap_err();
    assert_eq!(e.path.unwrap().to_string(), "cells[0].collect");
}

#[test]
fn stop_after_in_triage_mode() {
    let r = ok(&format!(
        "{}stop_after: {{events: 3, max_trials: 160}}\n",
        triage_with(BASE_CELL)
    ));
    let s = r.stop_after.unwrap();
    assert_eq!(
        (s.events, s.max_trials, s.event_verdict),
        (3, 160, Verdict::Fail)
    );
    err(
        &format!("{TRIAGE}stop_after: {{events: 1, max_trials: 4}}\ncells:\n  - {{name: a, mitigations: [none], environment: local, trials: 3}}\n"),
        Schema,
        "conflicts with stop_after",
    );
}

#[test]
fn probe_keys_are_rejected_in_triage_mode() {
    for extra in [
        "custom_patterns: []",
        "redaction: {}",
        "disable_detectors: []",
        "timeout_per_trial: 3",
        "mitigation_axis: [none]",
    ] {
        err(
            &format!("{}{extra}\n", triage_with(BASE_CELL)),
            Schema,
            "probe-mode key",
        );
    }
}

#[test]
fn baseline_resolution() {
    let r = ok(&triage_with("  - {name: x, mitigations: [tf32_off], environment: local}\n  - {name: baseline-local, mitigations: [xnack], environment: local}\n"));
    assert_eq!(r.confound.resolved_baseline, "baseline-local");
    let r = ok(&triage_with("  - {name: x, mitigations: [tf32_off], environment: local}\n  - {name: y, mitigations: [none], environment: local}\n"));
    assert_eq!(r.confound.resolved_baseline, "y");
    let r = ok(&triage_with(
        "  - {name: only, mitigations: [tf32_off], environment: local}\n",
    ));
    assert_eq!(r.confound.resolved_baseline, "only");
    err(&triage_with("  - {name: x, mitigations: [tf32_off], environment: local}\n  - {name: y, mitigations: [xnack], environment: local}\n"), Cell, "cannot choose a baseline");
}

#[test]
fn pyyaml_scalars_are_honoured() {
    let r = ok(&format!("{}save_logs: yes\n", triage_with(BASE_CELL)));
    assert!(r.save_logs);
    err(
        &format!("{}save_logs: 'true'\n", triage_with(BASE_CELL)),
        Schema,
        "true or false",
    );
}

#[test]
fn top_level_condition_is_phase_3() {
    err(
        &format!("{}condition: 'x'\n", triage_with(BASE_CELL)),
        Schema,
        "Phase 3",
    );
}

#[test]
fn mode_rules() {
    err(
        &format!("mode: fast\n{}", triage_with(BASE_CELL)),
        Schema,
        "unknown mode",
    );
    ok(&format!("mode: triage\n{}", triage_with(BASE_CELL)));
}
