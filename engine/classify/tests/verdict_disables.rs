//! Verdict resolution and detector disables end to end (AORTA §11.8 Verdict, Disables).

mod common;

use aorta_classify::{
    classify, failure_type, ClassifierConfig, Disables, GpuSnapshot, Observation, OnMatch, Tier,
    Verdict,
};
use common::*;

fn disables(tokens: &[&str]) -> Disables {
    let mut d = Disables::default();
    for t in tokens {
        d.add_cli_token(t).unwrap();
    }
    d
}

fn cfg_with(custom: Vec<aorta_classify::CustomDetector>, off: &[&str]) -> ClassifierConfig {
    ClassifierConfig {
        custom,
        disables: disables(off),
        ..Default::default()
    }
}

fn growth() -> (Option<GpuSnapshot>, Option<GpuSnapshot>) {
    let s = |v| {
        Some(GpuSnapshot {
            vram_used_mib: Some(v),
            throttle: Some(0),
        })
    };
    (s(100), s(600))
}

#[test]
fn verdict_vocabulary() {
    let names: Vec<_> = [Verdict::Pass, Verdict::Fail, Verdict::Error]
        .iter()
        .map(|v| serde_json::to_value(v).unwrap())
        .collect();
    assert_eq!(names, ["pass", "fail", "error"]);
}

#[test]
fn nothing_fired_passes() {
    let c = run(&Trial::new().obs());
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(
        c.failure_detectors_fired.is_empty()
            && c.error_detectors_fired.is_empty()
            && c.warn_detectors_fired.is_empty()
    );
}

#[test]
fn every_tier_in_fixed_order() {
    let t = Trial::new();
    let (gpu_pre, gpu_post) = growth();
    let obs = Observation {
        exit_code: 1,
        hang_detected: true,
        dmesg_text: Some("amdgpu: GPU reset begin!".into()),
        gpu_pre,
        gpu_post,
        ..t.logs(
            "loss is NaN\n",
            "Traceback (most recent call last):\nFATAL\nslow step\n",
        )
    };
    let cfg = with_custom(vec![
        custom("fatal", "FATAL"),
        custom_with("slow", "slow step", None, OnMatch::Warn, false),
    ]);
    let c = classify(&obs, &cfg);
    assert_eq!(
        c.failure_detectors_fired,
        [
            "tier1:exit_nonzero",
            "tier2:hang",
            "tier3:amdgpu_reset",
            "tier4:python_traceback",
            "tier4:nan_signature",
            "custom:fatal"
        ]
    );
    assert_eq!(
        c.warn_detectors_fired,
        ["tier3:vram_growth", "custom:slow"],
        "warn + failure keeps both lists"
    );
    assert_eq!(c.verdict, Verdict::Fail);
}

#[test]
fn warn_only_passes() {
    let t = Trial::new();
    let (gpu_pre, gpu_post) = growth();
    let cfg = with_custom(vec![custom_with("w", "slow", None, OnMatch::Warn, false)]);
    let c = classify(
        &Observation {
            gpu_pre,
            gpu_post,
            ..t.logs("slow\n", "")
        },
        &cfg,
    );
    assert_eq!(c.verdict, Verdict::Pass);
    assert_eq!(c.warn_detectors_fired, ["tier3:vram_growth", "custom:w"]);
}

#[test]
fn errors_versus_failures() {
    let t = Trial::new();
    let timeout = run(&Observation {
        exit_code: -1,
        timed_out: true,
        ..t.obs()
    });
    assert_eq!(
        (timeout.verdict, timeout.error_detectors_fired.clone()),
        (Verdict::Error, vec!["tier1:timeout".to_string()])
    );
    let exec = run(&Observation {
        exit_code: 127,
        exec_failed: true,
        ..t.obs()
    });
    assert_eq!(exec.verdict, Verdict::Error);
    let hang = run(&Observation {
        exit_code: -1,
        timed_out: true,
        hang_detected: true,
        ..t.obs()
    });
    assert_eq!(hang.verdict, Verdict::Fail);
    assert_eq!(
        (hang.failure_detectors_fired, hang.error_detectors_fired),
        (
            vec!["tier2:hang".to_string()],
            vec!["tier1:timeout".to_string()]
        )
    );
    assert_eq!(
        run(&Observation {
            exit_code: 1,
            ..t.obs()
        })
        .verdict,
        Verdict::Fail
    );
}

#[test]
fn required_pass_signal() {
    let t = Trial::new();
    let cfg = with_custom(vec![custom_with(
        "ok",
        "ALL DONE",
        None,
        OnMatch::Fail,
        true,
    )]);
    let missing = classify(&t.logs("partial\n", ""), &cfg);
    assert_eq!(
        (missing.verdict, missing.failure_detectors_fired),
        (Verdict::Fail, vec!["meta:missing_pass_signal".to_string()])
    );
    let present = classify(&t.logs("ALL DONE\n", ""), &cfg);
    assert!(!present
        .failure_detectors_fired
        .iter()
        .any(|d| d.starts_with("meta:")));
}

#[test]
fn failure_detail_types() {
    let t = Trial::new();
    let c = run(&t.logs("Traceback (most recent call last):\n", ""));
    assert_eq!(failure_type(&c, 0, false, false), Some("detector_failure"));
    let c = run(&Observation {
        exit_code: 2,
        ..t.obs()
    });
    assert_eq!(
        failure_type(&c, 2, false, false),
        Some("subprocess_nonzero_exit")
    );
    let c = run(&Observation {
        exit_code: -1,
        timed_out: true,
        ..t.obs()
    });
    assert_eq!(
        failure_type(&c, -1, true, false),
        Some("subprocess_timeout")
    );
    let c = run(&Observation {
        exit_code: 127,
        exec_failed: true,
        ..t.obs()
    });
    assert_eq!(
        failure_type(&c, 127, false, true),
        Some("subprocess_exec_failed")
    );
    assert_eq!(failure_type(&run(&t.obs()), 0, false, false), None);
}

// ---- Disables ----

#[test]
fn disabling_tier2_or_the_hang_detector_suppresses_a_hang() {
    let t = Trial::new();
    let obs = Observation {
        exit_code: -1,
        timed_out: true,
        hang_detected: true,
        ..t.obs()
    };
    for off in ["tier2", "tier2:hang"] {
        let c = classify(&obs, &cfg_with(vec![], &[off]));
        assert_eq!(c.verdict, Verdict::Error, "{off}");
        assert!(c.failure_detectors_fired.is_empty());
    }
}

#[test]
fn tier4_disables() {
    let t = Trial::new();
    let obs = t.logs("", fixture("traceback_hip.log"));
    assert!(classify(&obs, &cfg_with(vec![], &["tier4"]))
        .failure_detectors_fired
        .is_empty());
    let c = classify(
        &obs,
        &cfg_with(
            vec![],
            &["tier4:python_traceback", "tier4:illegal_memory_access"],
        ),
    );
    assert_eq!(c.failure_detectors_fired, ["tier4:hip_error"]);
    assert_eq!(
        serde_json::json!(c.capture.disabled_detectors),
        serde_json::json!(["tier4:illegal_memory_access", "tier4:python_traceback"])
    );
    assert_eq!(
        serde_json::json!(c.capture.disabled_detector_tiers),
        serde_json::json!([])
    );
    assert!(c.tier_durations_ms["tier4"] >= 0.0);
    assert_eq!(
        classify(&obs, &cfg_with(vec![], &["tier4"])).tier_durations_ms["tier4"],
        0.0
    );
}

#[test]
fn tier3_disables() {
    let (gpu_pre, gpu_post) = growth();
    let obs = Observation {
        dmesg_text: Some("amdgpu: GPU reset begin!".into()),
        gpu_pre,
        gpu_post,
        ..Default::default()
    };
    let c = classify(&obs, &cfg_with(vec![], &["tier3"]));
    assert!(c.failure_detectors_fired.is_empty() && c.warn_detectors_fired.is_empty());
    assert_eq!(c.tier_durations_ms["tier3"], 0.0);
    let c = classify(&obs, &cfg_with(vec![], &["tier3:vram_growth"]));
    assert_eq!(c.failure_detectors_fired, ["tier3:amdgpu_reset"]);
    assert!(c.warn_detectors_fired.is_empty());
}

#[test]
fn disabled_custom_pattern_leaves_no_capture_and_no_missing_signal() {
    let t = Trial::new();
    let cfg = cfg_with(
        vec![
            custom_with("done", r"DONE (?P<steps>\d+)", None, OnMatch::Fail, true),
            custom_with("i", r"(?P<x>\d+)", None, OnMatch::Info, false),
        ],
        &["custom:done", "custom:i"],
    );
    let c = classify(&t.logs("DONE 100\n", ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c.capture.group("steps").is_none() && c.capture.group("x").is_none());
    // Required and absent, but disabled: no meta:missing_pass_signal.
    let c = classify(&t.logs("nothing\n", ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert_eq!(
        serde_json::json!(c.capture.disabled_detectors),
        serde_json::json!(["custom:done", "custom:i"])
    );
}

#[test]
fn tier5_disabled_skips_the_scan() {
    let t = Trial::new();
    let cfg = cfg_with(
        vec![
            custom_with("done", "DONE", None, OnMatch::Fail, true),
            custom("e", "ERR"),
        ],
        &["tier5"],
    );
    let c = classify(&t.logs("ERR\n", ""), &cfg);
    assert_eq!(c.verdict, Verdict::Pass);
    assert_eq!(
        serde_json::json!(c.capture.disabled_detector_tiers),
        serde_json::json!(["tier5"])
    );
}

#[test]
fn exec_failure_exception() {
    let t = Trial::new();
    let unlaunched = Observation {
        exit_code: 127,
        exec_failed: true,
        ..t.obs()
    };
    let launched = Observation {
        exit_code: 1,
        ..t.obs()
    };
    for off in [
        &["tier1"][..],
        &["tier1:exit_nonzero"],
        &["tier1", "tier1:exit_nonzero", "tier1:exec_failed"],
    ] {
        let cfg = cfg_with(vec![], off);
        let c = classify(&unlaunched, &cfg);
        assert_eq!(
            (c.verdict, c.error_detectors_fired.clone()),
            (Verdict::Error, vec!["tier1:exec_failed".to_string()]),
            "{off:?}"
        );
        // The effective (ignored) disables are what capture echoes.
        assert_eq!(
            serde_json::json!(c.capture.disabled_detector_tiers),
            serde_json::json!([])
        );
        assert_eq!(
            serde_json::json!(c.capture.disabled_detectors),
            serde_json::json!([])
        );
        assert_eq!(
            classify(&launched, &cfg).verdict,
            Verdict::Pass,
            "a launched non-zero exit may be disabled: {off:?}"
        );
    }
    let cfg = cfg_with(vec![], &["tier1", "tier2:hang"]);
    let c = classify(&unlaunched, &cfg);
    assert_eq!(
        serde_json::json!(c.capture.disabled_detectors),
        serde_json::json!(["tier2:hang"])
    );
    assert!(
        cfg.disables.tier_disabled(Tier::Tier1),
        "the recipe's own disables are untouched"
    );
}

#[test]
fn disables_are_echoed_sorted() {
    let t = Trial::new();
    let c = classify(
        &t.obs(),
        &cfg_with(
            vec![],
            &["tier4", "tier3", "tier2:hang", "custom:b", "custom:a"],
        ),
    );
    assert_eq!(
        serde_json::json!(c.capture.disabled_detector_tiers),
        serde_json::json!(["tier3", "tier4"])
    );
    assert_eq!(
        serde_json::json!(c.capture.disabled_detectors),
        serde_json::json!(["custom:a", "custom:b", "tier2:hang"])
    );
}
