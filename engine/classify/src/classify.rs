//! The classifier entry point: runs the five tiers, applies disables, resolves the verdict.
//!
//! A classifier bug must never lose the trial (AORTA §5.9 "crash containment"): [`classify`]
//! catches a panic and falls back to a Tier-1-only verdict with `capture.classifier_error`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use aorta_trial::Capture;

use crate::budget::{Budget, Meter, DEFAULT_BUDGET};
use crate::catalogue::Tier;
use crate::model::{Classification, ClassifierConfig, Observation};
use crate::stream::{WindowParams, DEFAULT_WINDOWS};
use crate::verdict::{resolve, Effective, Fired};
use crate::{patterns, tier1, tier3};

/// Classifies one finished trial. Never panics: see the module docs.
pub fn classify(obs: &Observation, cfg: &ClassifierConfig) -> Classification {
    classify_with(obs, cfg, DEFAULT_WINDOWS, DEFAULT_BUDGET)
}

pub(crate) fn classify_with(
    obs: &Observation,
    cfg: &ClassifierConfig,
    params: WindowParams,
    budget: Budget,
) -> Classification {
    match catch_unwind(AssertUnwindSafe(|| run(obs, cfg, params, budget))) {
        Ok(c) => c,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            fallback(obs, cfg, &format!("Panic: {msg}"))
        }
    }
}

/// Tier 1 alone, with the same disables and precedence; every duration is 0.0.
fn fallback(obs: &Observation, cfg: &ClassifierConfig, error: &str) -> Classification {
    let eff = Effective::new(&cfg.disables, obs.exec_failed);
    let tier1 = if eff.tier_on(Tier::Tier1) {
        eff.filter(tier1::detect(obs))
    } else {
        Vec::new()
    };
    let mut capture = Capture {
        classifier_error: Some(error.into()),
        ..Default::default()
    };
    eff.echo(&mut capture);
    let durations = Tier::ALL
        .iter()
        .map(|t| (t.name().to_string(), 0.0))
        .collect();
    resolve(
        Fired {
            tier1,
            ..Default::default()
        },
        capture,
        durations,
    )
}

/// Times one tier: runs `f` if the tier is on, records the milliseconds either way.
fn timed<T: Default>(
    durations: &mut BTreeMap<String, f64>,
    tier: Tier,
    on: bool,
    f: impl FnOnce() -> T,
) -> T {
    let start = Instant::now();
    let out = if on { f() } else { T::default() };
    let ms = if on {
        start.elapsed().as_secs_f64() * 1000.0
    } else {
        0.0
    };
    durations.insert(tier.name().to_string(), ms);
    out
}

#[cfg(test)]
thread_local! {
    /// Lets a test make `run` panic, to prove the containment.
    static INJECT_PANIC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn run(
    obs: &Observation,
    cfg: &ClassifierConfig,
    params: WindowParams,
    budget: Budget,
) -> Classification {
    #[cfg(test)]
    if INJECT_PANIC.get() {
        panic!("injected classifier bug");
    }
    let eff = Effective::new(&cfg.disables, obs.exec_failed);
    let mut capture = Capture::default();
    let mut errors: Vec<String> = Vec::new();
    let mut d = BTreeMap::new();

    let t1 = timed(&mut d, Tier::Tier1, eff.tier_on(Tier::Tier1), || {
        tier1::detect(obs)
    });

    let (t2, reconciled) = timed(&mut d, Tier::Tier2, eff.tier_on(Tier::Tier2), || {
        tier1::hang(obs)
    });
    capture.tier2_hang_latched_but_reconciled = reconciled;

    // Nothing ran when the command never launched: kernel events and counters are not its own.
    let check_vram = cfg.tier3_vram_growth && !eff.detector_off("tier3:vram_growth");
    let t3 = timed(
        &mut d,
        Tier::Tier3,
        eff.tier_on(Tier::Tier3) && !obs.exec_failed,
        || tier3::detect(obs, check_vram, &mut capture, &mut errors),
    );

    let t4 = timed(&mut d, Tier::Tier4, eff.tier_on(Tier::Tier4), || {
        patterns::tier4(obs, params, &mut errors)
    });

    // Disabled custom patterns are removed before the scan: no condition, no capture, and
    // they cannot make a required signal go missing.
    let custom: Vec<_> = cfg
        .custom
        .iter()
        .filter(|c| !eff.detector_off(&c.detector_id()))
        .collect();
    let mut meter = Meter::new(budget);
    let t5 = timed(&mut d, Tier::Tier5, eff.tier_on(Tier::Tier5), || {
        patterns::tier5(obs, &custom, params, &mut meter, &mut capture, &mut errors)
    });

    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if !unique.is_empty() {
        capture.classifier_error = Some(unique.join("; "));
    }
    eff.echo(&mut capture);

    let fired = Fired {
        tier1: eff.filter(t1),
        tier2: eff.filter(t2),
        tier3: eff.filter(t3.fired),
        tier3_warn: eff.filter(t3.warn),
        tier4: eff.filter(t4),
        custom_fail: t5.fail,
        custom_warn: t5.warn,
        missing_required: t5.missing_required,
    };
    resolve(fired, capture, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aorta_trial::Verdict;
    use std::time::Instant;

    #[test]
    fn fallback_keeps_tier1_and_disables() {
        let obs = Observation {
            exit_code: 1,
            ..Default::default()
        };
        let c = fallback(&obs, &ClassifierConfig::default(), "Panic: boom");
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(
            c.capture.classifier_error.as_deref().unwrap(),
            "Panic: boom"
        );
        assert!(c.tier_durations_ms.values().all(|v| *v == 0.0));
        assert_eq!(c.tier_durations_ms.len(), 5);

        let mut cfg = ClassifierConfig::default();
        cfg.disables.add_tier(Tier::Tier1);
        assert_eq!(fallback(&obs, &cfg, "x").verdict, Verdict::Pass);
        let unlaunched = Observation {
            exit_code: 127,
            exec_failed: true,
            ..Default::default()
        };
        assert_eq!(fallback(&unlaunched, &cfg, "x").verdict, Verdict::Error);
    }

    #[test]
    fn a_panic_inside_a_tier_is_contained() {
        INJECT_PANIC.set(true);
        let obs = Observation {
            exit_code: -11,
            ..Default::default()
        };
        let c = classify(&obs, &ClassifierConfig::default());
        INJECT_PANIC.set(false);
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(c.failure_detectors_fired, ["tier1:sigsegv"]);
        assert_eq!(
            c.capture.classifier_error.as_deref().unwrap(),
            "Panic: injected classifier bug"
        );
    }

    #[test]
    fn tiny_windows_give_the_same_classification() {
        let dir = tempfile::tempdir().unwrap();
        let mut log: String = (0..300)
            .map(|i| format!("step {i} loss={}.{}\n", i % 3, i % 7))
            .collect();
        log.push_str("Traceback (most recent call last):\nRuntimeError: CUDA error: device-side assert triggered\n");
        let path = dir.path().join("stdout.log");
        std::fs::write(&path, &log).unwrap();
        let obs = Observation {
            stdout_log: Some(path),
            ..Default::default()
        };
        let det = crate::CustomDetector::new(
            "hi",
            r"loss=(?P<l>\d\.\d)",
            Some("float(capture['l']) > 2.5"),
            crate::OnMatch::Warn,
            false,
        );
        let cfg = ClassifierConfig {
            custom: vec![det.unwrap()],
            ..Default::default()
        };
        let small = classify_with(
            &obs,
            &cfg,
            WindowParams {
                chunk: 64,
                overlap: 48,
            },
            DEFAULT_BUDGET,
        );
        let mut big = classify(&obs, &cfg);
        big.tier_durations_ms = small.tier_durations_ms.clone();
        assert_eq!(small, big);
        assert_eq!(
            small.failure_detectors_fired,
            [
                "tier4:python_traceback",
                "tier4:cuda_error",
                "tier4:device_side_assert"
            ]
        );
        assert_eq!(
            (
                small.warn_detectors_fired[0].as_str(),
                small.capture.group("l")
            ),
            ("custom:hi", Some("2.6"))
        );
    }

    /// Issue 36: `(?=(a+)+$)x` costs n² per line of n bytes (50 lines of 1 MiB: hours). `seek`
    /// now skips it to the `x`s it needs; the second alternative defeats that (every `a` is a
    /// candidate), and with spans and a time budget the trial's classification ends within the
    /// budget plus one span's search, names the pattern it cut short, and every other detector
    /// still runs.
    #[test]
    fn a_hostile_lookaround_pattern_is_cut_short_within_the_budget_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut line = "a".repeat(1 << 20);
        line.push('\n');
        let mut log = line.repeat(8);
        log.push_str("Traceback (most recent call last):\nlate marker\n");
        let path = dir.path().join("stdout.log");
        std::fs::write(&path, &log).unwrap();
        let obs = Observation {
            stdout_log: Some(path),
            ..Default::default()
        };
        let det = |id: &str, re: &str| {
            crate::CustomDetector::new(id, re, None, crate::OnMatch::Fail, false).unwrap()
        };
        let cfg = ClassifierConfig {
            custom: vec![
                det("hostile", "(?=(a+)+$)x|(?=(a+)+b)a"),
                det("hostile2", "(?=(a+)+$)y|(?=(a+)+c)a"),
                det("late", r"late (?=marker)"),
            ],
            ..Default::default()
        };
        let budget = Budget {
            per_pattern: std::time::Duration::from_millis(300),
            total: std::time::Duration::from_millis(500),
            ..DEFAULT_BUDGET
        };
        let start = Instant::now();
        let c = classify_with(&obs, &cfg, DEFAULT_WINDOWS, budget);
        let took = start.elapsed();
        assert!(took.as_secs_f64() < 5.0, "took {took:?}");
        let err = c.capture.classifier_error.as_deref().unwrap();
        assert!(
            err.contains("PatternTimeBudgetExceeded: custom:hostile: "),
            "{err}"
        );
        // The second pattern got what the first left of the total, then was cut too; the
        // third, a look-around pattern on short lines, is cut as well: the total is spent.
        assert!(
            err.contains("CustomPatternsTimeBudgetExceeded: custom:hostile2: ")
                || err.contains("PatternTimeBudgetExceeded: custom:hostile2: "),
            "{err}"
        );
        assert_eq!(c.failure_detectors_fired, ["tier4:python_traceback"]);
    }

    /// A backtracking pattern searched span by span finds what it finds over the whole window:
    /// matches across lines, behind look-behinds, after a long line, at a span's cut.
    #[test]
    fn spans_find_what_whole_windows_find() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout.log");
        let obs = Observation {
            stdout_log: Some(path.clone()),
            ..Default::default()
        };
        let budget = Budget {
            span: 64,
            ..DEFAULT_BUDGET
        };
        let cases = [
            (
                "step 1\nstep 2\n".repeat(40) + "ERROR x\ncaused by y\n",
                r"(?s)ERROR(?=.{0,12}caused by) x",
            ),
            (
                "a".repeat(500) + "\nloss=nan\n",
                r"(?<!best_)loss=(?P<v>nan)",
            ),
            ("b".repeat(300) + "Z" + &"b".repeat(300), r"(?<=b{3})Z(?=b)"),
            ("ok\n".repeat(100), r"(?<=o)k(?=\nnever)"),
        ];
        for (log, re) in cases {
            std::fs::write(&path, &log).unwrap();
            let cfg = ClassifierConfig {
                custom: vec![crate::CustomDetector::new(
                    "p",
                    re,
                    None,
                    crate::OnMatch::Warn,
                    false,
                )
                .unwrap()],
                ..Default::default()
            };
            let whole = classify(&obs, &cfg);
            let spans = classify_with(&obs, &cfg, DEFAULT_WINDOWS, budget);
            assert!(cfg.custom[0].backtracks, "{re}");
            assert_eq!(
                whole.warn_detectors_fired, spans.warn_detectors_fired,
                "{re}"
            );
            assert_eq!(whole.capture, spans.capture, "{re}");
        }
    }

    #[test]
    fn an_unreadable_log_is_recorded_not_fatal() {
        // A directory cannot be read as a file.
        let obs = Observation {
            exit_code: 0,
            stdout_log: Some(std::env::temp_dir()),
            ..Default::default()
        };
        let c = classify(&obs, &ClassifierConfig::default());
        assert_eq!(c.verdict, Verdict::Pass);
        assert!(c
            .capture
            .classifier_error
            .as_deref()
            .unwrap()
            .starts_with("IoError: reading stdout log"));
    }
}
