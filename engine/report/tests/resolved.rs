//! recipe.resolved.yaml reloads into an equal recipe (AORTA §11.6 and §12.1.1).

mod common;
use aorta_recipe::{load_recipe, parse_recipe, FlagRecipe, ProbeOverlays, Recipe};
use aorta_registry::Registry;
use aorta_report::resolved_recipe_yaml;
use aorta_source::{SourceFile, Syntax};
use common::recipe;
use serde_json::Value;
use std::path::Path;

/// The recipe as JSON, without where it came from (the resolved file is a different file).
fn comparable(r: &Recipe) -> Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("source");
    o.remove("registry_files");
    v
}

fn reload(r: &Recipe, registry: &Registry) -> Recipe {
    let text = resolved_recipe_yaml(r);
    parse_recipe(
        &SourceFile::new("recipe.resolved.yaml", text.as_str()),
        Syntax::Yaml,
        registry,
    )
    .unwrap_or_else(|d| panic!("{d:?}\n---\n{text}"))
}

fn assert_round_trip(r: &Recipe, registry: &Registry) {
    let back = reload(r, registry);
    assert_eq!(
        comparable(&back),
        comparable(r),
        "\n---\n{}",
        resolved_recipe_yaml(r)
    );
    // Canonical: writing the reloaded recipe gives the same text (bar the source comment).
    let strip = |s: String| {
        s.lines()
            .filter(|l| !l.starts_with("# Source:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(resolved_recipe_yaml(&back)),
        strip(resolved_recipe_yaml(r))
    );
}

#[test]
fn every_shipped_recipe_round_trips() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let loaded =
            load_recipe(&path, &[]).unwrap_or_else(|d| panic!("{}: {d:?}", path.display()));
        assert_round_trip(&loaded.recipe, &loaded.registry);
        n += 1;
    }
    assert!(n >= 15, "found only {n} recipes in {}", dir.display());
}

#[test]
fn probe_keeps_mode_axes_and_every_knob() {
    let r = recipe(
        r#"schema_version: 1
mode: probe
ticket: "0123"
trials: 3
mitigation_axis: [none, tf32_off]
diagnostic_axis: [none, hip_launch_blocking]
step_time_regex: 'step (\d+\.\d+) ms'
collect_paths: ['${AORTA_ARTIFACT_DIR}/profiles', "yes"]
timeout_per_trial: 1800
env_passthrough_mode: file
custom_patterns:
  - id: oom
    match: {regex: 'hipErrorOutOfMemory|"quoted"\t', condition: "float(capture['gb']) > 1.5 and exit_code != 0"}
  - id: slow
    match: {regex: 'slow: (?P<s>\d+)'}
    on_match: warn
  - id: ready
    match: {regex: '^READY$'}
    required_for_pass: true
hang_window_sec: 12.5
hang_grace_period_at_start: 0
tier3_vram_growth: false
stop_after: {events: 2, max_trials: 9, event_verdict: error}
disable_detectors: [tier2:hang, 'custom:x y']
disable_detector_tiers: [tier3]
retain: {on_pass: summary}
redaction: {scrub_env_keys: ['AWS_*', '*_TOKEN'], scrub_ip_addresses: true}
confound: {threshold: 1.3, baseline_cell: none-none}
"#,
    );
    let text = resolved_recipe_yaml(&r);
    for needle in [
        "mode: probe",
        "mitigation_axis: [none, tf32_off]",
        "custom_patterns:",
        "redaction:",
        "disable_detector_tiers: [tier3]",
        "timeout_per_trial: 1800.0",
        "ticket: \"0123\"",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
    assert_round_trip(&r, &Registry::builtin());
}

#[test]
fn probe_defaults_are_spelled_out_and_overlays_survive() {
    let mut r = recipe("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n");
    let text = resolved_recipe_yaml(&r);
    for needle in [
        "env_passthrough_mode: inherit",
        "hang_window_sec: 30.0",
        "hang_grace_period_at_start: 60.0",
        "tier3_vram_growth: true",
        "timeout_per_trial: null",
        "threshold: 1.15",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
    assert!(
        !text.contains("baseline_cell"),
        "an automatic baseline stays automatic:\n{text}"
    );
    let overlays = ProbeOverlays {
        ticket: Some("T-9".into()),
        env_passthrough_mode: None,
        stop_after_events: Some(1),
        max_trials: Some(4),
        disable_detector: vec!["tier4".into(), "tier1:exit_nonzero".into()],
    };
    overlays.apply(&mut r).unwrap();
    assert_round_trip(&r, &Registry::builtin());
    assert!(reload(&r, &Registry::builtin()).stop_after.is_some());
}

#[test]
fn triage_inline_collect_stop_after_and_config_round_trip() {
    let r = recipe(
        r#"schema_version: 1
workload: race
ticket: T-1
trials: 2
steps: 3
save_logs: true
workload_config:
  lr: 1.0e-4
  big: 2.5e+20
  ratio: 0.5
  whole: 2.0
  count: 7
  flag: on
  none: ~
  text: "multi\nline: # not a comment"
  odd: "true"
  list: [1, 'two', {three: 3}]
  nested: {a: {b: [x, y]}, "key with space": 1}
collect:
  rocprof: {interval_ms: "10"}
  amd_log:
stop_after: {events: 1, max_trials: 4}
confound: {threshold: 1.2}
cells:
  - name: baseline-img
    mitigations: [none]
    environment: {docker: "rocm/pytorch:latest"}
  - name: stacked
    mitigations: [tf32_off, xnack]
    environment: {docker: "rocm/pytorch:latest"}
    extra_env: {NCCL_DEBUG: INFO, EMPTY: "", NUM: "1"}
    steps: 5
    workload_config: {}
    collect: []
  - name: listed
    mitigations: [none]
    environment: local
    collect: [layer_numerics]
    workload_config: {lr: 2.0e-4}
"#,
    );
    let text = resolved_recipe_yaml(&r);
    assert!(
        text.contains("environment:\n      docker: \"rocm/pytorch:latest\""),
        "{text}"
    );
    assert!(text.contains("collect: []"), "{text}");
    assert_round_trip(&r, &Registry::builtin());
    let back = reload(&r, &Registry::builtin());
    assert_eq!(back.inline_environments.len(), 1);
    assert_eq!(back.cells[0].environment.name, r.cells[0].environment.name);
}

#[test]
fn flag_mode_recipes_round_trip() {
    let registry = Registry::builtin();
    let flags = FlagRecipe {
        workload: Some("training".into()),
        mitigation_axis: Some("none,tf32_off".into()),
        environment_axis: Some("local,image:rocm/pytorch:6.4".into()),
        trials: Some(2),
        steps: Some(8),
        ticket: Some("FLAG-1".into()),
        baseline_cell: None,
        confound_threshold: Some(1.25),
        collect: Some("rocprof".into()),
        ..Default::default()
    };
    let r = flags.build(&registry).unwrap();
    assert_round_trip(&r, &registry);
}

#[test]
fn json_recipes_write_yaml_that_reloads() {
    let json = r#"{"schema_version": 1, "workload": "training", "trials": 1, "steps": 1, "workload_config": {"x": 1e-3, "y": 10},
        "cells": [{"name": "baseline-a", "mitigations": ["none"], "environment": "local"}]}"#;
    let r = parse_recipe(
        &SourceFile::new("r.json", json),
        Syntax::Json,
        &Registry::builtin(),
    )
    .unwrap();
    assert_round_trip(&r, &Registry::builtin());
}

#[test]
fn awkward_strings_and_numbers_keep_their_type() {
    let awkward = [
        "",
        " ",
        "yes",
        "No",
        "ON",
        "y",
        "n",
        "~",
        "null",
        "NULL",
        "1e3",
        "1.0",
        "-.5",
        "+1",
        "0x1F",
        "0o17",
        "010",
        "1:30",
        "1_000",
        ".inf",
        ".NaN",
        "- a",
        "# x",
        "a: b",
        "a:b",
        "[x]",
        "{x}",
        "&a",
        "*a",
        "!tag",
        "%x",
        "@x",
        "`x`",
        "'q'",
        "\"dq\"",
        "tab\there",
        "nl\nx",
        "cr\rx",
        "\u{85}next",
        "\u{feff}bom",
        "\u{2028}sep",
        "\u{7f}del",
        "\u{0}nul",
        "日本語",
        "emoji 🎉",
        " leading",
        "trailing ",
        "=",
        "?x",
        "|x",
        ">x",
        "x #y",
        r"C:\path",
        "back\\slash",
        "---",
        "...",
        "a,b",
        "k=v",
    ];
    // Not "<<": aorta-source reads even a quoted `"<<"` key as a merge key (PyYAML does not).
    let mut r = recipe("schema_version: 1\nworkload: training\ntrials: 1\nsteps: 1\ncells:\n  - {name: baseline-a, mitigations: [none], environment: local}\n");
    let mut nested = serde_json::Map::new();
    for (i, s) in awkward.iter().enumerate() {
        r.workload_config
            .insert(format!("k{i}"), Value::String(s.to_string()));
        nested.insert(s.to_string(), serde_json::json!(i));
    }
    r.workload_config
        .insert("nested".into(), Value::Object(nested));
    for (k, v) in [
        ("f1", 0.1),
        ("f2", 1e-300),
        ("f3", 1.7976931348623157e308),
        ("f4", -2.0),
        ("f5", 123456789.125),
        ("f6", 5e-324),
    ] {
        r.workload_config.insert(k.into(), serde_json::json!(v));
    }
    r.workload_config.insert(
        "ints".into(),
        serde_json::json!([0, -1, i64::MAX, i64::MIN + 1]),
    );
    r.workload_config.insert(
        "empty".into(),
        serde_json::json!({"list": [], "map": {}, "deep": [[], [{}], [[1]]]}),
    );
    r.cells[0]
        .extra_env
        .insert("WEIRD".into(), "a: b # c".into());
    r.cells[0]
        .resolved_env
        .insert("WEIRD".into(), "a: b # c".into());
    r.cells[0]
        .env_origin
        .insert("WEIRD".into(), "extra_env".into());
    assert_round_trip(&r, &Registry::builtin());
}
