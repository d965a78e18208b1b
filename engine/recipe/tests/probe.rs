//! AORTA §11.3: probe-mode parsing, CLI overlays and the sandbox at load time.
mod common;
use common::*;

use aorta_classify::Tier;
use aorta_recipe::{OnMatch, PassthroughMode, ProbeOverlays, RetainLevel, Verdict};
use aorta_source::DiagKind::{Cell, Schema, UnknownName, Usage};

#[test]
fn axes_make_the_cartesian_product() {
    let r = ok(&probe_with(""));
    let names: Vec<_> = r.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["none-none", "none-xnack", "tf32_off-none", "tf32_off-xnack"]
    );
    assert_eq!(r.workload, "_subprocess");
    assert_eq!(r.cells[3].mitigations, ["tf32_off", "xnack"]);
    assert_eq!(r.cells[3].resolved_env.len(), 2);
    assert_eq!(r.cells[0].environment.name, "local");
    assert_eq!(r.confound.resolved_baseline, "none-none");
}

#[test]
fn no_mode_is_triage_and_invalid_mode_errors() {
    err(
        &probe_with("").replace("mode: probe", "mode: sweep"),
        Schema,
        "unknown mode",
    );
    err(
        &probe_with("").replace("mode: probe\n", ""),
        Schema,
        "probe-mode key",
    );
}

#[test]
fn triage_keys_rejected_in_probe_mode() {
    for extra in [
        "workload: x",
        "cells: []",
        "steps: 3",
        "save_logs: true",
        "workload_config: {}",
        // AORTA 0.3.0's, triage-only there too.
        "trial_isolation: process",
        "extra_env: {A: '1'}",
    ] {
        err(
            &probe_with(&format!("{extra}\n")),
            Schema,
            "triage-mode key",
        );
    }
}

/// AORTA 0.3.0 accepts `collect` in probe recipes (it wraps the command in rocprof or
/// proton): an empty list loads, ncu and torch_profiler are kept; a ROCm collector is refused
/// with what to do instead.
#[test]
fn probe_collectors_are_refused_with_the_alternative() {
    ok(&probe_with("collect: []\n"));
    let r = ok(&probe_with("collect: [ncu, torch_profiler]\n"));
    assert_eq!(r.collect.names(), ["ncu", "torch_profiler"]);
    err(
        &probe_with("collect: [rocprof]\n"),
        Schema,
        "collector 'rocprof' is not supported in a probe recipe",
    );
    let e = common::parse(&probe_with("collect: [rocprof]\n")).unwrap_err();
    assert!(
        e.help.as_deref().unwrap_or("").contains("rocprofv3"),
        "{e:?}"
    );
    assert_eq!(e.path.unwrap().to_string(), "collect");
    err(
        &probe_with("collect: [bogus]\n"),
        Schema,
        "unknown collector 'bogus'",
    );
}

#[test]
fn axis_rules() {
    err(
        &probe_with("").replace("[none, xnack]", "[none, nope]"),
        UnknownName,
        "unknown mitigation 'nope'",
    );
    err(
        &probe_with("").replace("diagnostic_axis: [none, xnack]\n", ""),
        Schema,
        "missing required key 'diagnostic_axis'",
    );
    err(
        &probe_with("").replace("trials: 2\n", ""),
        Schema,
        "missing required key 'trials'",
    );
    err(
        &probe_with("").replace("[none, xnack]", "[]"),
        Schema,
        "non-empty list",
    );
}

#[test]
fn slug_collisions_are_cell_errors() {
    // Sidecar-free way to collide: the same mitigation twice on one axis.
    err(
        &probe_with("").replace("[none, tf32_off]", "[none, none]"),
        Cell,
        "both make the cell name 'none-none'",
    );
}

#[test]
fn axis_bundle_conflicts_are_cell_errors() {
    err(
        &probe_with("")
            .replace("[none, xnack]", "[hsa_enable_cache]")
            .replace("[none, tf32_off]", "[hsa_disable_cache]"),
        Cell,
        "HSA_DISABLE_CACHE",
    );
}

#[test]
fn scalar_field_rules() {
    err(
        &probe_with("step_time_regex: '(unclosed'\n"),
        Schema,
        "does not compile",
    );
    ok(&probe_with("step_time_regex: 'step (?P<ms>[0-9.]+) ms'\n"));
    err(
        &probe_with("env_passthrough_mode: both\n"),
        Schema,
        "unknown mode 'both'",
    );
    err(&probe_with("timeout_per_trial: 0\n"), Schema, "> 0");
    err(&probe_with("timeout_per_trial: -3\n"), Schema, "> 0");
    ok(&probe_with("hang_grace_period_at_start: 0\n"));
    err(
        &probe_with("hang_grace_period_at_start: -1\n"),
        Schema,
        ">= 0",
    );
    err(&probe_with("hang_window_sec: 0\n"), Schema, "> 0");
    assert!(ok(&probe_with("")).probe.unwrap().tier3_vram_growth);
    assert!(
        !ok(&probe_with("tier3_vram_growth: false\n"))
            .probe
            .unwrap()
            .tier3_vram_growth
    );
    err(
        &probe_with("tier3_vram_growth: 'false'\n"),
        Schema,
        "true or false",
    );
    let p = ok(&probe_with("")).probe.unwrap();
    assert_eq!(
        (
            p.hang_window_sec,
            p.hang_grace_period_at_start,
            p.env_passthrough_mode
        ),
        (30.0, 60.0, PassthroughMode::Inherit)
    );
}

#[test]
fn confound_keys() {
    err(
        &probe_with("confound: {baseline_cel: none-none}\n"),
        Schema,
        "did you mean 'baseline_cell'",
    );
    let r = ok(&probe_with(
        "confound: {threshold: 1.2, baseline_cell: tf32_off-none}\n",
    ));
    assert_eq!(r.confound.resolved_baseline, "tf32_off-none");
}

#[test]
fn disable_knobs() {
    let p = ok(&probe_with(
        "disable_detectors: [tier2:hang]\ndisable_detector_tiers: [TIER3]\n",
    ))
    .probe
    .unwrap();
    assert_eq!(p.disables.detectors, ["tier2:hang"]);
    assert_eq!(p.disables.tiers, [Tier::Tier3]);
    assert_eq!(
        err(
            &probe_with("disable_detectors: [tier3:vram_growht]\n"),
            Schema,
            "unknown tier3 detector"
        ),
        "tier3:vram_growht"
    );
    err(
        &probe_with("disable_detector_tiers: [tier9]\n"),
        Schema,
        "unknown detector tier 'tier9'",
    );
    err(
        &probe_with("disable_detectors: tier2:hang\n"),
        Schema,
        "must be a list",
    );
}

#[test]
fn stop_after_rules() {
    let s = ok(&probe_with("stop_after: {events: 3, max_trials: 160}\n"))
        .stop_after
        .unwrap();
    assert_eq!(s.event_verdict, Verdict::Fail);
    for v in ["pass", "error"] {
        ok(&probe_with(&format!(
            "stop_after: {{events: 1, max_trials: 2, event_verdict: {v}}}\n"
        )));
    }
    err(
        &probe_with("stop_after: {events: 1, max_trials: 2, event_verdict: [fail]}\n"),
        Schema,
        "must be a string",
    );
    err(
        &probe_with("stop_after: {events: 1, max_trials: 2, event_verdict: maybe}\n"),
        Schema,
        "unknown verdict",
    );
    err(
        &probe_with("stop_after: {max_trials: 2}\n"),
        Schema,
        "missing required key 'events'",
    );
    err(
        &probe_with("stop_after: {events: 2}\n"),
        Schema,
        "missing required key 'max_trials'",
    );
    err(
        &probe_with("stop_after: {events: 3, max_trials: 2}\n"),
        Schema,
        "must be >= events",
    );
    err(
        &probe_with("stop_after: {events: 1.5, max_trials: 2}\n"),
        Schema,
        "integer",
    );
    err(
        &probe_with("stop_after: {events: 1, max_trials: 2, extra: 1}\n"),
        Schema,
        "unknown key 'extra'",
    );
}

#[test]
fn retain_rules() {
    assert!(ok(&probe_with("")).probe.unwrap().retain.is_none());
    let r = ok(&probe_with("retain: {on_pass: summary}\n"))
        .probe
        .unwrap()
        .retain
        .unwrap();
    assert_eq!(
        (r.on_pass, r.on_fail, r.on_error),
        (RetainLevel::Summary, RetainLevel::Full, RetainLevel::Full)
    );
    err(
        &probe_with("retain: {on_maybe: full}\n"),
        Schema,
        "unknown key 'on_maybe'",
    );
    err(
        &probe_with("retain: {on_pass: tiny}\n"),
        Schema,
        "unknown retention level",
    );
    err(
        &probe_with("retain: [on_pass]\n"),
        Schema,
        "must be a mapping",
    );
    err(
        &probe_with("retain: {on_pass: [full]}\n"),
        Schema,
        "must be a string",
    );
    // Several bad keys: the first in sorted order is reported, whatever the document order.
    err(
        &probe_with("retain: {on_pass: bad, on_error: worse}\n"),
        Schema,
        "'worse'",
    );
}

#[test]
fn redaction_rules() {
    let r = ok(&probe_with(
        "redaction: {scrub_env_keys: ['AWS_*'], scrub_paths: true}\n",
    ))
    .probe
    .unwrap()
    .redaction
    .unwrap();
    assert_eq!(r.scrub_env_keys, ["AWS_*"]);
    assert!(r.scrub_paths && !r.scrub_ip_addresses);
    err(
        &probe_with("redaction: {scrub_everything: true}\n"),
        Schema,
        "unknown key 'scrub_everything'",
    );
    err(&probe_with("redaction: null\n"), Schema, "not null");
    err(
        &probe_with("redaction: {1: true}\n"),
        Schema,
        "unknown key 1",
    );
}

#[test]
fn custom_pattern_rules() {
    let p = ok(&probe_with("custom_patterns:\n  - {id: oom, match: {regex: 'out of (?P<what>memory)', condition: \"len(capture['what']) > 2\"}, on_match: warn}\n  - {id: ok, match: {regex: DONE}, required_for_pass: true}\n")).probe.unwrap();
    assert_eq!(p.custom_patterns.len(), 2);
    assert_eq!(p.custom_patterns[0].on_match, OnMatch::Warn);
    assert!(p.custom_patterns[1].required_for_pass);
    err(
        &probe_with("custom_patterns: []\n"),
        Schema,
        "must not be empty",
    );
    err(
        &probe_with(
            "custom_patterns:\n  - {id: a, match: {regex: x}}\n  - {id: a, match: {regex: y}}\n",
        ),
        Schema,
        "duplicate custom pattern id 'a'",
    );
    err(
        &probe_with("custom_patterns:\n  - {id: a, match: {regex: '(x'}}\n"),
        Schema,
        "does not compile",
    );
    err(
        &probe_with("custom_patterns:\n  - {id: a, match: {regex: x}, colour: red}\n"),
        Schema,
        "unknown key 'colour'",
    );
    err(
        &probe_with("custom_patterns:\n  - {id: a, match: {regex: x, flags: i}}\n"),
        Schema,
        "unknown key 'flags'",
    );
    err(
        &probe_with("custom_patterns:\n  - {id: a, match: {regex: x}, on_match: panic}\n"),
        Schema,
        "unknown on_match",
    );
    err(&probe_with("custom_patterns:\n  - {id: a, match: {regex: x}, on_match: warn, required_for_pass: true}\n"), Schema, "only allowed with on_match: fail");
}

#[test]
fn hostile_conditions_are_rejected_at_load_with_their_path() {
    for hostile in [
        "__import__('os')",
        "open('/etc/passwd')",
        "capture.update({})",
        "2 ** 8",
        "'a' in capture",
        "capture[0]",
        "math.pi",
    ] {
        let text = probe_with(&format!(
            "custom_patterns:\n  - {{id: a, match: {{regex: x, condition: \"{hostile}\"}}}}\n"
        ));
        let e = parse(&text).unwrap_err();
        assert_eq!(
            e.path.as_ref().unwrap().to_string(),
            "custom_patterns[0].match.condition",
            "{hostile}"
        );
        let span = e.primary_span().unwrap();
        assert!(
            text[span.clone()].len() <= hostile.len() + 2,
            "span {:?} should sit inside the condition",
            &text[span]
        );
    }
    let long = "1 + ".repeat(70) + "1";
    err(
        &probe_with(&format!(
            "custom_patterns:\n  - {{id: a, match: {{regex: x, condition: '{long}'}}}}\n"
        )),
        Schema,
        "256",
    );
}

#[test]
fn overlays() {
    let mut r = ok(&probe_with(""));
    ProbeOverlays {
        stop_after_events: Some(2),
        max_trials: Some(5),
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap();
    assert_eq!(r.stop_after.map(|s| (s.events, s.max_trials)), Some((2, 5)));

    let mut r = ok(&probe_with(
        "stop_after: {events: 1, max_trials: 9, event_verdict: error}\n",
    ));
    ProbeOverlays {
        stop_after_events: Some(3),
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap();
    let s = r.stop_after.unwrap();
    assert_eq!(
        (s.events, s.max_trials, s.event_verdict),
        (3, 9, Verdict::Error)
    );

    let mut r = ok(&probe_with(""));
    let e = ProbeOverlays {
        stop_after_events: Some(2),
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap_err();
    assert!(e.to_string().contains("hard cap") && e.kind == Usage);
    let e = ProbeOverlays {
        max_trials: Some(2),
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap_err();
    assert!(e
        .to_string()
        .contains("--max-trials requires --stop-after-events"));
    let e = ProbeOverlays {
        stop_after_events: Some(5),
        max_trials: Some(2),
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap_err();
    assert!(e.to_string().contains("must be >="));

    let mut r = ok(&probe_with("disable_detectors: [tier2:hang]\n"));
    ProbeOverlays {
        disable_detector: vec!["tier3".into(), "tier2:hang".into()],
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap();
    let p = r.probe.as_ref().unwrap();
    assert_eq!(
        (p.disables.tiers.clone(), p.disables.detectors.clone()),
        (vec![Tier::Tier3], vec!["tier2:hang".to_string()])
    );
    let e = ProbeOverlays {
        disable_detector: vec!["tier7".into()],
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap_err();
    assert!(e.to_string().contains("--disable-detector"));
}

#[test]
fn passthrough_precedence() {
    let mut r = ok(&probe_with("env_passthrough_mode: file\n"));
    ProbeOverlays::default().apply(&mut r).unwrap();
    assert_eq!(
        r.probe.as_ref().unwrap().env_passthrough_mode,
        PassthroughMode::File
    );
    ProbeOverlays {
        env_passthrough_mode: Some(PassthroughMode::Inherit),
        ..Default::default()
    }
    .apply(&mut r)
    .unwrap();
    assert_eq!(
        r.probe.as_ref().unwrap().env_passthrough_mode,
        PassthroughMode::Inherit
    );
}

/// `aorta bundle` reads only a recipe's `redaction:` block: no registry, no other validation,
/// and a bad block fails closed with its location.
#[test]
fn load_redaction_reads_only_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // An unknown mitigation elsewhere does not matter here.
    let p = write(
        "a.yaml",
        "mode: probe\nmitigation_axis: [no_such_mitigation]\nredaction: {scrub_env_keys: ['AWS_*'], scrub_paths: true}\n",
    );
    let r = aorta_recipe::load_redaction(&p).unwrap().unwrap();
    assert_eq!(r.scrub_env_keys, ["AWS_*"]);
    assert!(r.scrub_paths && !r.scrub_ip_addresses);
    assert!(
        aorta_recipe::load_redaction(&write("b.yaml", "mode: probe\n"))
            .unwrap()
            .is_none()
    );
    for bad in [
        "redaction: null\n",
        "redaction: {scrub_pathz: true}\n",
        "- a list\n",
    ] {
        let e = aorta_recipe::load_redaction(&write("c.yaml", bad)).unwrap_err();
        assert_eq!(e.kind, Schema, "{bad}: {e:?}");
    }
}

/// RocJITsu's sanitizers are diagnostic entries, with AORTA 0.3.0's names (`consan`,
/// `waitcheck`) after its module's prefix; they set no variables and combine with every
/// mitigation.
#[test]
fn rocjitsu_entries_on_the_diagnostic_axis() {
    let r = ok(&probe_with("").replace(
        "diagnostic_axis: [none, xnack]",
        "diagnostic_axis: [none, rocjitsu_consan, rocjitsu_waitcheck]",
    ));
    let c = r
        .cells
        .iter()
        .find(|c| c.name == "tf32_off-rocjitsu_consan")
        .unwrap();
    assert_eq!(c.sanitizer, Some(aorta_registry::Sanitizer::Consan));
    assert_eq!(c.mitigations, ["tf32_off", "rocjitsu_consan"]);
    assert_eq!(c.resolved_env.len(), 1, "tf32_off's variable only");
    let w = r
        .cells
        .iter()
        .find(|c| c.name == "none-rocjitsu_waitcheck")
        .unwrap();
    assert_eq!(w.sanitizer, Some(aorta_registry::Sanitizer::Waitcheck));
}

/// AORTA 0.3.0's shipped RocJITsu recipes (`recipes/sanitizers/*.yaml`, e.g.
/// daily-consan-lds-dispatch.yaml) are `mode: sanitizer` over selected code objects: refused
/// at the mode, saying which diagnostic entries run a command under the same hook.
#[test]
fn aorta_0_3_0_sanitizer_mode_is_refused_with_the_diagnostic_entries() {
    let yaml = "schema_version: 1\nmode: sanitizer\nticket: DAILY-CONSAN-LDS-DISPATCH\nsanitizer_plan:\n  target: gfx950\n  source:\n    kind: kernel\n    kernel:\n      name: lds_reduce\n      code_object: fixtures/isa/lds.hsaco\n      code_object_index: 0\n    consan_command: fixtures/bin/lds_dispatch\n    consan_log: true\n  scope:\n    kind: kernel\n  selection:\n    requirement: top_dispatch_count\n    top_n: 1\n  sanitizers:\n    - consan\n  policy:\n    consan_policy: strict\n    on_missing_backend: fail\n    timeout_seconds: 600\n  output:\n    report: sanitizer_report.json\n";
    let e = parse(yaml).err().unwrap();
    assert_eq!(e.kind, Schema);
    let text = format!("{e:?}");
    assert!(text.contains("unknown mode"), "{text}");
    assert!(text.contains("rocjitsu_consan"), "{text}");
}
