//! A simulated agent run: the same [`Design`] rules the agent applies, driven by seeded
//! Bernoulli draws instead of builds. Shared by `tests/simulation.rs` and
//! `examples/simulate.rs` (the figures in docs/benchmarks.md).

use aorta_agent::stats::{BaselineStep, Design};
use aorta_report::sequential::{self, Finding, Outcome};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How one simulated run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Declared candidate `i` a fix.
    Converged(usize),
    BaselinePass,
    /// Stopped without a fix (exhausted, uninformative baseline).
    NoFix,
}

/// `p`: the baseline's failure probability; `q[i]`: candidate i's, tested in order.
pub struct Scenario<'a> {
    pub p: f64,
    pub q: &'a [f64],
}

/// One agent run under `design`, one candidate per iteration as the fake proposer does:
/// the baseline alone until it fails, then each candidate under the engine's sequential
/// test, the baseline drawn further only as far as a candidate's look needs it. Returns the
/// ending and the trials spent.
pub fn agent_run(design: &Design, s: &Scenario, seed: u64) -> (End, u32) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut extend = |v: &mut Vec<Outcome>, rate: f64, n: u32| {
        while (v.len() as u32) < n {
            v.push(Some(rng.gen_bool(rate)));
        }
    };
    let mut base: Vec<Outcome> = Vec::new();
    for (k, &n) in design.baseline_looks.iter().enumerate() {
        extend(&mut base, s.p, n);
        match design.baseline_step(k, sequential::counts(&base, n)) {
            BaselineStep::More(_) => continue,
            BaselineStep::Ready => break,
            BaselineStep::Passes => return (End::BaselinePass, base.len() as u32),
            BaselineStep::Uninformative => return (End::NoFix, base.len() as u32),
        }
    }
    let seq = design.sequential();
    let mut spent = 0;
    for (i, &q) in s.q.iter().enumerate() {
        let mut cell = Vec::new();
        let d = loop {
            let d = sequential::decide(&seq, &base, &cell, None, false);
            if !d.running() {
                break d;
            }
            extend(&mut base, s.p, d.trials);
            extend(&mut cell, q, d.trials);
        };
        spent += d.trials;
        if d.finding == Finding::Fewer {
            return (End::Converged(i), base.len() as u32 + spent);
        }
    }
    (End::NoFix, base.len() as u32 + spent)
}

/// AORTA 0.2.1's rule: one trial per cell; a passing baseline ends the search; the first
/// candidate whose one trial passes is `converged`.
pub fn aorta_run(s: &Scenario, seed: u64) -> (End, u32) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    if !rng.gen_bool(s.p) {
        return (End::BaselinePass, 1);
    }
    for (i, &q) in s.q.iter().enumerate() {
        if !rng.gen_bool(q) {
            return (End::Converged(i), 2 + i as u32);
        }
    }
    (End::NoFix, 1 + s.q.len() as u32)
}

/// Over `seeds` runs: the share that converged on a candidate that is not a real fix
/// (`fixes[i]`), the share that found a real fix, and the mean trials spent.
pub struct Rates {
    pub false_convergence: f64,
    pub found_fix: f64,
    pub mean_trials: f64,
}

pub fn rates(seeds: u64, fixes: &[bool], run: impl Fn(u64) -> (End, u32) + Sync) -> Rates {
    use rayon::prelude::*;
    let (fals, found, trials) = (0..seeds)
        .into_par_iter()
        .map(|seed| {
            let (end, spent) = run(seed);
            match end {
                End::Converged(i) if fixes[i] => (0u64, 1u64, u64::from(spent)),
                End::Converged(_) => (1, 0, u64::from(spent)),
                _ => (0, 0, u64::from(spent)),
            }
        })
        .reduce(|| (0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    let n = seeds as f64;
    Rates {
        false_convergence: fals as f64 / n,
        found_fix: found as f64 / n,
        mean_trials: trials as f64 / n,
    }
}
