//! AORTA §11.5: confound classification and baseline resolution, plus aorta's bootstrap
//! interval (determinism and sanity).

mod common;
use aorta_report::bootstrap::ratio_ci;
use aorta_report::confound::{aorta_compat, classify, resolve_baseline, resolve_run_baseline};
use aorta_report::{CellStats, Outcome, StepTimeSource, Tag};
use common::*;

const T: f64 = 1.15;

/// A triage recipe whose cells are named as given; the first is `[none]`.
fn named(names: &[&str]) -> aorta_recipe::Recipe {
    let mut y = "schema_version: 1\nworkload: training\ntrials: 2\nsteps: 1\nconfound: {baseline_cell: X}\ncells:\n".replace("X", names[0]);
    for (i, n) in names.iter().enumerate() {
        let m = if i == 0 { "none" } else { "xnack" };
        y.push_str(&format!(
            "  - {{name: {n}, mitigations: [{m}], environment: local}}\n"
        ));
    }
    recipe(&y)
}

fn cells() -> (aorta_recipe::Recipe, CellStats, CellStats) {
    let r = named(&["base", "cell"]);
    (r.clone(), agg(&r, "base", &[]), agg(&r, "cell", &[]))
}

#[test]
fn aorta_spec_examples() {
    let r = named(&["base", "cell"]);
    // base 400 ms, failure rate 0.5; cell 500 ms, failure rate 0 → speed (+25%), ratio 1.25.
    let base = agg(&r, "base", &trials(&[P, F], &[400.0]));
    let cell = agg(&r, "cell", &trials(&[P, P], &[500.0]));
    let (tag, ratio) = aorta_compat(&cell, Some(&base), T);
    assert_eq!(
        (tag.to_string(), ratio),
        ("speed (+25%)".to_string(), Some(1.25))
    );
    assert_eq!(
        classify(&cell, Some(&base), T).tag.to_string(),
        "speed (+25%)"
    );
    // base 100 ms rate 1.0, cell 105 ms rate 1.0 → no effect, ratio 1.05.
    let base = agg(&r, "base", &trials(&[F, F], &[100.0]));
    let cell = agg(&r, "cell", &trials(&[F, F], &[105.0]));
    let v = classify(&cell, Some(&base), T);
    assert_eq!(v.tag, Tag::NoEffect);
    assert!((v.ratio.unwrap() - 1.05).abs() < 1e-12);
    // ratio 1.0 with a lower failure rate → "-".
    let cell = agg(&r, "cell", &trials(&[P, F], &[100.0]));
    let v = classify(&cell, Some(&base), T);
    assert_eq!((v.tag.to_string(), v.ratio), ("-".to_string(), Some(1.0)));
}

#[test]
fn percent_uses_bankers_rounding() {
    let r = named(&["base", "cell"]);
    let base = agg(&r, "base", &trials(&[P, P], &[200.0]));
    // Exact binary ties: 1.125 → 12.5 → 12 and 1.625 → 62.5 → 62 (ties to even; Rust's
    // `round` would say 13 and 63), 1.375 → 37.5 → 38.
    for (ms, pct) in [(225.0, 12), (325.0, 62), (275.0, 38)] {
        let cell = agg(&r, "cell", &trials(&[P, P], &[ms]));
        assert_eq!(
            aorta_compat(&cell, Some(&base), 1.1).0,
            Tag::Speed { percent: pct }
        );
    }
}

#[test]
fn error_baseline_and_not_applicable() {
    let (r, _, _) = cells();
    let ok = agg(&r, "cell", &trials(&[P, P], &[100.0]));
    let errored = CellStats::aggregate(&r.cells[1], &r, &[], Some("boom".into()));
    assert_eq!(classify(&errored, Some(&ok), T).tag, Tag::Error);
    let base_err = CellStats::aggregate(&r.cells[0], &r, &[], Some("boom".into()));
    let v = classify(&ok, Some(&base_err), T);
    assert_eq!((v.tag, v.ratio), (Tag::NotApplicable, None));
    assert_ne!(v.tag.to_string(), "-");
    let zero = agg(&r, "base", &[]);
    assert_eq!(classify(&ok, Some(&zero), T).tag, Tag::NotApplicable);
    let base = agg(&r, "base", &trials(&[P, P], &[100.0]));
    assert_eq!(classify(&base, Some(&base), T).tag, Tag::Baseline);
    assert_eq!(classify(&ok, None, T).tag, Tag::NotApplicable);
    assert_ne!(Tag::NotApplicable.to_string(), Tag::Neutral.to_string());
}

#[test]
fn only_per_step_on_both_sides_is_compared() {
    let (r, _, _) = cells();
    let per_step = agg(&r, "cell", &trials(&[P, P], &[300.0]));
    let wall = agg(&r, "base", &[rec(0, P), rec(1, P)]);
    assert_eq!(wall.step_time_source, StepTimeSource::WallClockTotal);
    let wall_cell = agg(&r, "cell", &[rec(0, P), rec(1, P)]);
    let mut e = rec(0, P);
    e.result.total_iterations = 2;
    e.result.elapsed_sec = 1.0;
    let elapsed_b = agg(&r, "base", std::slice::from_ref(&e));
    let elapsed_c = agg(&r, "cell", std::slice::from_ref(&e));
    for (c, b) in [
        (&per_step, &wall),
        (&wall_cell, &wall),
        (&elapsed_c, &elapsed_b),
    ] {
        let v = classify(c, Some(b), T);
        assert_eq!(
            (v.tag, v.ratio),
            (Tag::NotApplicable, None),
            "{:?} vs {:?}",
            c.step_time_source,
            b.step_time_source
        );
    }
    // wall-clock-only cells never render speed, however slow.
    let mut slow = rec(0, P);
    slow.walltime_sec = 100.0;
    let slow = agg(&r, "cell", &[slow]);
    assert_eq!(classify(&slow, Some(&wall), T).tag, Tag::NotApplicable);
    let mut none = rec(0, P);
    none.walltime_sec = 0.0;
    let missing = agg(&r, "cell", &[none]);
    let base = agg(&r, "base", &trials(&[P], &[10.0]));
    assert_eq!(classify(&missing, Some(&base), T).tag, Tag::NotApplicable);
    assert!(classify(&per_step, Some(&base), T).ratio.is_some());
}

#[test]
fn did_not_run_rules() {
    let (r, _, _) = cells();
    let dnr = agg(&r, "base", &[rec(0, E), rec(1, E)]);
    assert!(dnr.did_not_run());
    assert_eq!(
        classify(&dnr, Some(&dnr), T).tag,
        Tag::DidNotRun,
        "even the baseline"
    );
    let mixed = agg(&r, "cell", &[rec(0, E), steps(1, P, &[10.0])]);
    assert!(!mixed.did_not_run());
    // an error cell's empty histogram is never did_not_run.
    let err = CellStats::aggregate(&r.cells[1], &r, &[], Some("x".into()));
    assert!(!err.did_not_run());
    // a histogram that does not cover every trial is not did_not_run.
    let mut partial = dnr.clone();
    partial.trials = 3;
    assert!(!partial.did_not_run());
    partial.trials = 2;
    partial.outcome_counts.insert(Outcome::Unknown, 0);
    assert!(!partial.did_not_run());
}

#[test]
fn baseline_resolution_rules() {
    let r = recipe(
        "schema_version: 1\nworkload: t\ntrials: 1\nsteps: 1\ncells:\n  - {name: a, mitigations: [xnack], environment: local}\n  - {name: n, mitigations: [none], environment: local}\n  - {name: baseline-x, mitigations: [xnack], environment: local}\n  - {name: baseline-y, mitigations: [none], environment: local}\n",
    );
    let all: Vec<CellStats> = r
        .cells
        .iter()
        .map(|c| CellStats::aggregate(c, &r, &[], None))
        .collect();
    assert_eq!(resolve_baseline(&all, Some("a"), &[]).unwrap(), "a");
    assert_eq!(
        resolve_baseline(&all, Some("zzz"), &[]),
        Err(aorta_report::confound::BaselineError::UnknownCell(
            "zzz".into()
        ))
    );
    assert_eq!(resolve_baseline(&all, None, &[]).unwrap(), "baseline-x");
    assert_eq!(
        resolve_baseline(&all, None, &["baseline-x", "baseline-y"]).unwrap(),
        "n"
    );
    assert_eq!(
        resolve_baseline(&all[..1], None, &[]).unwrap(),
        "a",
        "a single cell is its own baseline"
    );
    assert!(resolve_baseline(&all[..1], None, &["a"]).is_err());
    let two = [
        all[0].clone(),
        CellStats {
            name: "b".into(),
            ..all[0].clone()
        },
    ];
    assert!(resolve_baseline(&two, None, &[]).is_err());
    assert!(resolve_baseline(&[], None, &[]).is_err());
}

#[test]
fn run_baseline_skips_cells_that_did_not_run() {
    let r = recipe(
        "schema_version: 1\nworkload: t\ntrials: 2\nsteps: 1\ncells:\n  - {name: baseline-a, mitigations: [none], environment: local}\n  - {name: baseline-b, mitigations: [none], environment: local}\n  - {name: c, mitigations: [xnack], environment: local}\n",
    );
    let dnr = agg(&r, "baseline-a", &[rec(0, E), rec(1, E)]);
    let ok_b = agg(&r, "baseline-b", &trials(&[P, P], &[10.0]));
    let ok_c = agg(&r, "c", &trials(&[P, P], &[10.0]));
    let b = resolve_run_baseline(&r, &[dnr.clone(), ok_b.clone(), ok_c.clone()]);
    assert_eq!(
        (b.name.as_str(), b.incomplete_reason.as_deref()),
        ("baseline-b", None)
    );
    // no candidate survives → keep the original choice, warn, mark the run incomplete.
    let dnr_b = agg(&r, "baseline-b", &[rec(0, E), rec(1, E)]);
    let ok_c2 = CellStats {
        name: "c2".into(),
        ..ok_c.clone()
    };
    let m = matrix(&r, vec![dnr.clone(), dnr_b, ok_c, ok_c2]);
    assert_eq!(m.baseline.name, "baseline-a");
    assert!(m.incomplete_reason().is_some());
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    let j = json(&m);
    assert_eq!(j["baseline_cell"], "baseline-a");
    assert_eq!(j["cells"][2]["confound"], "n/a");
    // an explicit baseline that did not run degrades the run too.
    let e = named(&["base", "cell"]);
    let m = matrix(
        &e,
        vec![
            agg(&e, "base", &[rec(0, E)]),
            agg(&e, "cell", &trials(&[P], &[1.0])),
        ],
    );
    assert_eq!(m.baseline.name, "base");
    assert!(m.incomplete_reason().unwrap().contains("did not run"));
    assert!(m
        .to_markdown()
        .contains("> [!WARNING]\n> baseline cell 'base' did not run"));
    // probe baselines count as explicit.
    let p = probe();
    let m = matrix(
        &p,
        p.cells
            .iter()
            .map(|c| CellStats::aggregate(c, &p, &[rec(0, E)], None))
            .collect(),
    );
    assert!(m.incomplete_reason().is_some());
}

#[test]
fn errored_baseline_warns() {
    let r = named(&["base", "cell"]);
    let m = matrix(
        &r,
        vec![
            CellStats::aggregate(&r.cells[0], &r, &[], Some("KeyError: 'x'".into())),
            agg(&r, "cell", &trials(&[P], &[1.0])),
        ],
    );
    assert!(
        m.warnings[0].contains("errored (KeyError: 'x')"),
        "{:?}",
        m.warnings
    );
    assert_eq!(m.rows[1].confound.tag, Tag::NotApplicable);
    assert!(m.incomplete_reason().is_none());
}

// ---- aorta's interval ------------------------------------------------------------------

fn noisy(center: f64, spread: f64, n: usize, phase: usize) -> Vec<f64> {
    // A deterministic zig-zag around `center`: mean exactly `center` for even n.
    (0..n)
        .map(|i| {
            center
                + if (i + phase) % 2 == 0 {
                    spread
                } else {
                    -spread
                }
        })
        .collect()
}

#[test]
fn bootstrap_is_deterministic() {
    let a = vec![noisy(100.0, 20.0, 8, 0), noisy(110.0, 25.0, 8, 1)];
    let b = vec![noisy(100.0, 15.0, 8, 0), noisy(95.0, 10.0, 8, 1)];
    let one = ratio_ci(&a, &b, "cell", "base");
    assert_eq!(one, ratio_ci(&a, &b, "cell", "base"));
    assert!(one.is_some());
    assert_ne!(
        one,
        ratio_ci(&a, &b, "other-cell", "base"),
        "the seed comes from the names"
    );
}

#[test]
fn identical_samples_give_an_interval_around_one() {
    let s = vec![vec![100.0; 6], vec![100.0; 6]];
    assert_eq!(ratio_ci(&s, &s, "c", "b"), Some((1.0, 1.0)));
    let n = vec![noisy(100.0, 5.0, 10, 0), noisy(100.0, 5.0, 10, 1)];
    let (lo, hi) = ratio_ci(&n, &n, "c", "b").unwrap();
    assert!(lo < 1.0 && hi > 1.0 && lo > 0.9 && hi < 1.1, "({lo}, {hi})");
}

#[test]
fn clear_slowdown_lies_above_the_threshold() {
    let base = vec![
        noisy(100.0, 5.0, 20, 0),
        noisy(101.0, 5.0, 20, 1),
        noisy(99.0, 5.0, 20, 0),
    ];
    let slow = vec![
        noisy(200.0, 10.0, 20, 0),
        noisy(203.0, 10.0, 20, 1),
        noisy(198.0, 10.0, 20, 0),
    ];
    let (lo, hi) = ratio_ci(&slow, &base, "slow", "base").unwrap();
    assert!(lo > T && lo < 2.0 && hi > 2.0, "({lo}, {hi})");
    let r = named(&["base", "slow"]);
    let to_trials = |groups: &[Vec<f64>]| {
        groups
            .iter()
            .enumerate()
            .map(|(i, g)| steps(i as u32, P, g))
            .collect::<Vec<_>>()
    };
    let b = agg(&r, "base", &to_trials(&base));
    let c = agg(&r, "slow", &to_trials(&slow));
    let v = classify(&c, Some(&b), T);
    assert_eq!(v.tag, Tag::Speed { percent: 100 });
    assert_eq!(v.ci95, Some((lo, hi)));
}

#[test]
fn noisy_overlap_straddles_and_is_uncertain() {
    let r = named(&["base", "cell"]);
    // Means 100 vs 125 (ratio 1.25 > 1.15), but trials disagree wildly.
    let b = agg(
        &r,
        "base",
        &[steps(0, F, &[60.0, 70.0]), steps(1, P, &[130.0, 140.0])],
    );
    let c = agg(
        &r,
        "cell",
        &[steps(0, P, &[70.0, 80.0]), steps(1, P, &[170.0, 180.0])],
    );
    let v = classify(&c, Some(&b), T);
    let (lo, hi) = v.ci95.unwrap();
    assert!(lo < T && hi > T, "({lo}, {hi})");
    assert_eq!(v.tag, Tag::SpeedUncertain { percent: 25 });
    assert_eq!(v.tag.to_string(), "speed? (+25%)");
    assert_eq!(v.aorta_tag.to_string(), "speed (+25%)");
    let m = matrix(&r, vec![b, c]);
    let md = m.to_markdown();
    assert!(
        md.contains("- AORTA 0.2.1 would tag `cell` as `speed (+25%)`."),
        "{md}"
    );
    assert!(md.contains(&format!("1.25 ({lo:.2}–{hi:.2})")), "{md}");
    let j = json(&m);
    assert_eq!(j["cells"][1]["confound"], "speed? (+25%)");
    assert_eq!(j["cells"][1]["confound_aorta"], "speed (+25%)");
    assert_eq!(
        j["cells"][1]["step_time_ratio_ci95"],
        serde_json::json!([lo, hi])
    );
}

#[test]
fn too_few_samples_fall_back_to_aortas_rule_and_say_so() {
    let r = named(&["base", "cell"]);
    let b = agg(&r, "base", &trials(&[F], &[100.0]));
    let c = agg(&r, "cell", &trials(&[P, P], &[130.0]));
    let v = classify(&c, Some(&b), T);
    assert_eq!((v.tag, v.ci95), (Tag::Speed { percent: 30 }, None));
    assert!(v.fell_back_to_point_rule());
    let md = matrix(&r, vec![b, c]).to_markdown();
    assert!(
        md.contains("- No interval for `cell` (fewer than 2 step-time samples on a side)"),
        "{md}"
    );
    assert!(md.contains("1.30 (no CI)"), "{md}");
}
