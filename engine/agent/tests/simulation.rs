//! The agent's error rates, measured: over many seeded runs where no candidate helps, the
//! share of runs that declare a fix must stay at or below α = 1 − confidence; where one
//! candidate is a real fix, it must be found. AORTA's one-trial rule is measured alongside
//! (docs/benchmarks.md has the full table from `cargo run --example simulate`).

mod sim;

use aorta_agent::stats::Design;
use sim::{agent_run, aorta_run, rates, Scenario};

const SEEDS: u64 = 2_000;

/// The worst case for false convergence: every candidate is a dud, the baseline flaky.
#[test]
fn false_convergence_stays_below_alpha_for_every_failure_rate() {
    for p in [0.05, 0.2, 0.3, 0.5, 0.8, 1.0] {
        let q = [p; 5];
        let design = Design::new(0.95, 5, 64, 32);
        let r = rates(SEEDS, &[false; 5], |seed| {
            agent_run(&design, &Scenario { p, q: &q }, seed)
        });
        // 2,000 runs: the 99.9% binomial upper bound of a true rate of 0.05 is ~0.066; the
        // design is conservative, so the measured rate sits far below α itself.
        assert!(
            r.false_convergence <= 0.05,
            "p = {p}: false convergence {}",
            r.false_convergence
        );
    }
}

/// A stricter confidence must give a smaller measured rate too (the bound is not luck).
#[test]
fn false_convergence_follows_the_stated_confidence() {
    let (p, q) = (0.5, [0.5; 3]);
    let design = Design::new(0.99, 3, 64, 32);
    let r = rates(SEEDS, &[false; 3], |seed| {
        agent_run(&design, &Scenario { p, q: &q }, seed)
    });
    assert!(r.false_convergence <= 0.01, "{}", r.false_convergence);
}

/// AORTA's rule converges on a dud most of the time when the bug is intermittent: the
/// failure mode this agent exists to remove.
#[test]
fn aortas_rule_converges_falsely_on_an_intermittent_bug() {
    let q = [0.3; 5];
    let r = rates(SEEDS, &[false; 5], |seed| {
        aorta_run(&Scenario { p: 0.3, q: &q }, seed)
    });
    // P(baseline fails) · P(some dud passes once) = 0.3 · (1 − 0.3⁵) ≈ 0.30.
    assert!(r.false_convergence > 0.25, "{}", r.false_convergence);
}

/// With a real fix behind two duds, the agent finds it (power), at p ∈ {1.0, 0.5, 0.2}.
#[test]
fn a_real_fix_is_found() {
    for (p, min_power) in [(1.0, 0.99), (0.5, 0.95), (0.2, 0.6)] {
        let q = [p, p, 0.0];
        let design = Design::new(0.95, 3, 64, 64);
        let r = rates(SEEDS, &[false, false, true], |seed| {
            agent_run(&design, &Scenario { p, q: &q }, seed)
        });
        assert!(
            r.found_fix >= min_power,
            "p = {p}: found the fix in {}",
            r.found_fix
        );
        assert!(r.false_convergence <= 0.05);
        if p == 1.0 {
            // 8 baseline trials, 4 per dud (it fails as often as the baseline), 8 for the fix.
            assert_eq!(r.mean_trials, 24.0);
        }
    }
}
