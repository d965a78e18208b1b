//! Simulates `trials: auto` (the group-sequential test of `aorta_report::sequential`) on the
//! issue's suite and compares it with the fixed-N design (bench/sequential/run.sh).
//!
//!     cargo run --release -p aorta-report --example sequential_sim -- \
//!         [--seeds 10000] [--cap 64] [--seed 1] [--verify SEEDS] [--no-variants]
//!
//! **The suite**, one row per baseline failure rate p0 ∈ {1.0, 0.7, 0.4, 0.2}: the baseline
//! (rate p0), a real fix (rate 0), a partial fix (rate p0/2), five duds (rate p0) and a speed
//! confound (rate 0, but every trial's step time ~ Normal(1.5, 0.075) against Normal(1.0, 0.05)
//! for the others). M = 8 comparisons, confidence 0.95. The report calls a cell that fails less
//! a fix unless it is speed-flagged: median(its step times) / median(the baseline's) > 1.15.
//!
//! **Sequential**: every cell advances in lockstep rounds as the engine runs them: each round,
//! `plan(&design, Some(0), &outcomes, Some(&paces), false)` (each trial's step time as its one
//! per-step sample, so the crate's speed stop applies), and every running cell (the baseline included)
//! is extended to its `Decision.trials`, until every cell has stopped. A run's cost is the sum
//! of the lengths of all outcome vectors, the baseline's included.
//!
//! **Fixed N**: N trials in each of the 9 cells (9N), called by the report's fixed-N rule
//! (`verdict.rs`, `Answer::of`): two-sided Fisher p = min(1, 2·min(p_less, p_more)), Holm's
//! step-down over the 8 cells at α = 0.05. Per row, the smallest N in 2..=200 whose simulated
//! power for the real fix is ≥ the sequential design's and whose false-fix rate is ≤ 5%.
//! Fixed-N outcomes are coupled across N (N + 1 trials extend the N trials of the same seed), so
//! the power curve is smooth and every N uses all the seeds.
//!
//! **The rules.** The design as it is runs the crate's own `plan` (and so `decide`). The
//! variants' table runs `Seq::decide` / `Seq::plan` below: a copy of the *first* rules measured
//! (α spent over every look, futility only on the "worse" side), with the first look, the
//! looks' spacing, the α spending and the futility rules as parameters, on a log-factorial table
//! that gives bit-identical p-values (checked at start-up). It is how the crate's present rules
//! were chosen (docs/benchmarks.md, "trials: auto"); it lacks the crate's trend rule, so it is
//! not checked against the crate (`--verify` is accepted and ignored). `--no-variants` skips it.
//!
//! Deterministic given `--seed`: trial j of cell i in seed s of row r draws from its own
//! splitmix64 stream, so the schedule (and the variant) does not change what a trial drew.

use aorta_report::evidence::{fisher_less, Counts};
use aorta_report::sequential::{
    counts, doubling, plan, Decision, Design, Finding, Outcome, Paces, Stop, FIRST_LOOK, FUTILE_P,
};
use std::time::Instant;

const CONFIDENCE: f64 = 0.95;
const CONFOUND_RATIO: f64 = 1.15;
const ROWS: [f64; 4] = [1.0, 0.7, 0.4, 0.2];
const FIXED_MAX_N: u32 = 200;
const FALSE_FIX_GOAL: f64 = 0.05;
const TRIALS_GOAL: f64 = 0.40;

// ---------------------------------------------------------------------------------------------
// Randomness: splitmix64, one stream per (row, seed, cell).

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn stream(master: u64, row: usize, seed: u32, cell: usize) -> Rng {
        let mut x = master;
        for part in [row as u64, u64::from(seed), cell as u64] {
            x ^= splitmix(&mut x.clone()).wrapping_add(part);
            splitmix(&mut x);
        }
        Rng(x)
    }

    fn uniform(&mut self) -> f64 {
        (splitmix(&mut self.0) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

// ---------------------------------------------------------------------------------------------
// The suite.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Baseline,
    Fix,
    Partial,
    Dud,
    Confound,
}

#[derive(Clone, Copy)]
struct CellSpec {
    kind: Kind,
    rate: f64,
    step_mean: f64,
    step_sd: f64,
}

fn suite(p0: f64) -> Vec<CellSpec> {
    let cell = |kind, rate, step_mean, step_sd| CellSpec {
        kind,
        rate,
        step_mean,
        step_sd,
    };
    let mut v = vec![
        cell(Kind::Baseline, p0, 1.0, 0.05),
        cell(Kind::Fix, 0.0, 1.0, 0.05),
        cell(Kind::Partial, p0 / 2.0, 1.0, 0.05),
    ];
    v.extend((0..5).map(|_| cell(Kind::Dud, p0, 1.0, 0.05)));
    v.push(cell(Kind::Confound, 0.0, 1.5, 0.075));
    v
}

/// One trial: (failed, step time).
fn trial(spec: &CellSpec, rng: &mut Rng) -> (bool, f64) {
    let failed = rng.uniform() < spec.rate;
    (failed, rng.normal(spec.step_mean, spec.step_sd))
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    median_sorted(&v)
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn speed_flagged(cell_times: &[f64], base_times: &[f64]) -> bool {
    median(cell_times) / median(base_times) > CONFOUND_RATIO
}

// ---------------------------------------------------------------------------------------------
// Fisher's test on a log-factorial table: bit-identical to `evidence::fisher_less` (the same
// additions in the same order), checked at start-up.

struct Fast {
    ln_fact: Vec<f64>,
}

impl Fast {
    fn new(max: u32) -> Fast {
        let mut ln_fact = vec![0.0f64; max as usize + 1];
        let mut acc = -0.0f64;
        for (i, slot) in ln_fact.iter_mut().enumerate().skip(2) {
            acc += (i as f64).ln();
            *slot = acc;
        }
        Fast { ln_fact }
    }

    fn ln_choose(&self, n: u32, k: u32) -> f64 {
        self.ln_fact[n as usize] - self.ln_fact[k as usize] - self.ln_fact[(n - k) as usize]
    }

    fn fisher_less(&self, baseline: Counts, candidate: Counts) -> f64 {
        let (nb, nc) = (baseline.trials, candidate.trials);
        let total = nb + nc;
        let failures = baseline.failed + candidate.failed;
        if nc == 0 || nb == 0 {
            return 1.0;
        }
        let lo = nc.saturating_sub(total - failures);
        let hi = candidate.failed.min(failures);
        let denom = self.ln_choose(total, nc);
        let p: f64 = (lo..=hi)
            .map(|x| {
                (self.ln_choose(failures, x) + self.ln_choose(total - failures, nc - x) - denom)
                    .exp()
            })
            .sum();
        p.min(1.0)
    }

    fn check(&self, max_n: u32, master: u64) {
        let mut rng = Rng::stream(master, 99, 0, 0);
        let mut draw = |n: u32| (rng.uniform() * f64::from(n + 1)) as u32;
        for _ in 0..2000 {
            let (nb, nc) = (draw(max_n), draw(max_n));
            let b = Counts::new(draw(nb), nb);
            let c = Counts::new(draw(nc), nc);
            let (x, y) = (fisher_less(b, c), self.fisher_less(b, c));
            assert!(
                x.to_bits() == y.to_bits(),
                "fisher_less({b:?}, {c:?}): {x} vs {y}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The sequential design: copies of `decide` and `plan` with their rules as parameters.

#[derive(Clone)]
struct Variant {
    name: String,
    looks: Vec<u32>,
    futile_p: f64,
    /// Spend α only over the looks at which a rejection is possible at all (0 of n against
    /// n of n); the crate spends it over every look.
    spend_reachable: bool,
    /// Also stop as futile a cell that failed at least once when its one-sided p for "fewer"
    /// is above this (the crate has no such rule: `None`).
    futile_fewer: Option<f64>,
    /// Stop a cell once it is speed-flagged (at or after the first look): it can no longer be
    /// called a fix. The copy's version of the crate's speed stop (`Stop::Slower`), on medians
    /// and without the crate's bootstrap interval or its "fails less" condition.
    drop_slow: bool,
    /// Run the crate's own `plan` instead of the copy (the design as it is).
    crate_rules: bool,
}

fn spaced(first: u32, cap: u32, factor: f64) -> Vec<u32> {
    let mut looks = vec![first.min(cap)];
    while *looks.last().unwrap() < cap {
        let n = *looks.last().unwrap();
        let next = ((f64::from(n) * factor).round() as u32).max(n + 1).min(cap);
        looks.push(next);
    }
    looks
}

struct Seq<'a> {
    design: Design,
    futile_p: f64,
    futile_fewer: Option<f64>,
    drop_slow: bool,
    /// α for each direction at each look.
    levels: Vec<f64>,
    fast: &'a Fast,
    /// The crate's own rules (`Design::new`, `FUTILE_P`): its plan can check the copy.
    as_crate: bool,
}

impl<'a> Seq<'a> {
    fn new(v: &Variant, comparisons: u32, fast: &'a Fast) -> Seq<'a> {
        let mut design = Design::new(CONFIDENCE, comparisons, *v.looks.last().unwrap());
        design.looks = v.looks.clone();
        let levels: Vec<f64> = if v.spend_reachable {
            let m = f64::from(comparisons);
            // The smallest p at n: 0/n against n/n.
            let reachable: Vec<bool> = (0..design.looks.len())
                .map(|k| {
                    let n = design.looks[k];
                    fast.fisher_less(Counts::new(n, n), Counts::new(0, n))
                        <= design.alpha / (2.0 * m)
                })
                .collect();
            let total: u32 = design
                .looks
                .iter()
                .zip(&reachable)
                .filter(|(_, r)| **r)
                .map(|(n, _)| *n)
                .sum();
            design
                .looks
                .iter()
                .zip(&reachable)
                .map(|(&n, &r)| match r {
                    true => design.alpha / (2.0 * m) * f64::from(n) / f64::from(total),
                    false => 0.0,
                })
                .collect()
        } else {
            let total: u32 = design.looks.iter().sum();
            let m = f64::from(comparisons);
            design
                .looks
                .iter()
                .map(|&n| design.alpha / (2.0 * m) * f64::from(n) / f64::from(total))
                .collect()
        };
        design.levels = levels.clone();
        let as_crate = v.crate_rules;
        let _copy_matches_crate_before_trend_rule = !v.spend_reachable
            && !v.drop_slow
            && v.futile_fewer.is_none()
            && v.futile_p == FUTILE_P
            && design == Design::new(CONFIDENCE, comparisons, *v.looks.last().unwrap());
        Seq {
            design,
            futile_p: v.futile_p,
            futile_fewer: v.futile_fewer,
            drop_slow: v.drop_slow,
            levels,
            fast,
            as_crate,
        }
    }

    fn cap(&self) -> u32 {
        *self.design.looks.last().unwrap()
    }

    fn out_of_reach(&self, b: Counts, c: Counts) -> bool {
        let cap = self.cap();
        let last = *self.levels.last().unwrap();
        let more = cap.saturating_sub(c.trials);
        let base = Counts::new((b.rate() * f64::from(cap)).round() as u32, cap);
        let best = Counts::new(c.failed, c.trials + more);
        let worst = Counts::new(c.failed + more, c.trials + more);
        self.fast.fisher_less(base, best) > last && self.fast.fisher_less(worst, base) > last
    }

    /// `sequential::decide` with `budget_spent = false`.
    fn decide(&self, baseline: &[Outcome], cell: &[Outcome]) -> Decision {
        let mut p = (1.0, 1.0);
        let stopped = |finding, stop, trials, p: (f64, f64)| Decision {
            finding,
            stop: Some(stop),
            trials,
            p_fewer: p.0,
            p_more: p.1,
        };
        let last = self.design.looks.len() - 1;
        for (k, &n) in self.design.looks.iter().enumerate() {
            if (cell.len() as u32) < n || (baseline.len() as u32) < n {
                return Decision {
                    finding: Finding::Undecided,
                    stop: None,
                    trials: n,
                    p_fewer: p.0,
                    p_more: p.1,
                };
            }
            let (b, c) = (counts(baseline, n), counts(cell, n));
            if b.trials == 0 {
                return stopped(Finding::Undecided, Stop::NoBaseline, n, p);
            }
            p = (self.fast.fisher_less(b, c), self.fast.fisher_less(c, b));
            let level = self.levels[k];
            if p.0 <= level {
                return stopped(Finding::Fewer, Stop::Decided, n, p);
            }
            if p.1 <= level {
                return stopped(Finding::More, Stop::Decided, n, p);
            }
            if k == last {
                return stopped(Finding::Undecided, Stop::Cap, n, p);
            }
            let not_fewer = c.trials > 0 && c.failed > 0 && c.rate() >= b.rate();
            let weak = self.futile_fewer.is_some_and(|f| c.failed > 0 && p.0 > f);
            if (not_fewer && p.1 > self.futile_p) || weak || self.out_of_reach(b, c) {
                return stopped(Finding::NoDifferent, Stop::Futile, n, p);
            }
        }
        unreachable!("the last look always returns")
    }

    /// `sequential::plan` with the baseline at 0, at least one other cell, no budget; a cell
    /// marked `slow` (only with `drop_slow`) stops where it is.
    fn plan(&self, outcomes: &[Vec<Outcome>], slow: &[bool]) -> Vec<Decision> {
        let mut out: Vec<Decision> = outcomes
            .iter()
            .zip(slow)
            .map(|(o, &slow)| match slow {
                true => Decision {
                    finding: Finding::NoDifferent,
                    stop: Some(Stop::Futile),
                    trials: o.len() as u32,
                    p_fewer: 1.0,
                    p_more: 1.0,
                },
                false => self.decide(&outcomes[0], o),
            })
            .collect();
        let needed = out[1..].iter().map(|x| x.trials).max().unwrap_or(0);
        let all_stopped = out[1..].iter().all(|x| !x.running());
        out[0] = Decision {
            finding: Finding::Undecided,
            stop: all_stopped.then_some(Stop::Decided),
            trials: needed,
            p_fewer: 1.0,
            p_more: 1.0,
        };
        out
    }
}

/// The cells' calls in one finished run of either design.
#[derive(Default, Clone, Copy)]
struct Calls {
    fix_found: bool,
    partial_found: bool,
    false_fix: bool,
    any_worse: bool,
}

struct SeqRun {
    total: u32,
    /// Trials per cell kind: baseline, fix, partial, duds (all five), confound.
    by_kind: [u32; 5],
    calls: Calls,
}

fn kind_index(k: Kind) -> usize {
    match k {
        Kind::Baseline => 0,
        Kind::Fix => 1,
        Kind::Partial => 2,
        Kind::Dud => 3,
        Kind::Confound => 4,
    }
}

fn run_sequential(
    seq: &Seq,
    specs: &[CellSpec],
    master: u64,
    row: usize,
    seed: u32,
    verify: bool,
) -> SeqRun {
    let mut rngs: Vec<Rng> = (0..specs.len())
        .map(|i| Rng::stream(master, row, seed, i))
        .collect();
    let mut outcomes: Vec<Vec<Outcome>> = vec![Vec::new(); specs.len()];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut slow = vec![false; specs.len()];
    let names: Vec<String> = (0..specs.len()).map(|i| format!("cell{i}")).collect();
    let decisions = loop {
        if seq.drop_slow {
            for i in 1..specs.len() {
                slow[i] |= times[i].len() >= seq.design.looks[0] as usize
                    && speed_flagged(&times[i], &times[0]);
            }
        }
        let decisions = match seq.as_crate {
            true => {
                // One step time per trial: each trial is a group of one sample.
                let steps: Vec<Vec<Vec<f64>>> = times
                    .iter()
                    .map(|ts| ts.iter().map(|&t| vec![t]).collect())
                    .collect();
                let paces = Paces {
                    threshold: CONFOUND_RATIO,
                    names: &names,
                    steps: &steps,
                };
                let theirs = plan(&seq.design, Some(0), &outcomes, Some(&paces), false);
                if verify {
                    let ours = seq.plan(&outcomes, &slow);
                    assert_eq!(ours, theirs, "the copy of plan disagrees with the crate's");
                }
                theirs
            }
            false => seq.plan(&outcomes, &slow),
        };
        if decisions.iter().all(|d| !d.running()) {
            break decisions;
        }
        let mut grew = false;
        for (i, d) in decisions.iter().enumerate() {
            if !d.running() {
                continue;
            }
            while (outcomes[i].len() as u32) < d.trials {
                let (failed, t) = trial(&specs[i], &mut rngs[i]);
                outcomes[i].push(Some(failed));
                times[i].push(t);
                grew = true;
            }
        }
        assert!(grew, "a round ran no trial while a cell still runs");
    };
    let mut run = SeqRun {
        total: 0,
        by_kind: [0; 5],
        calls: Calls::default(),
    };
    for (i, spec) in specs.iter().enumerate() {
        let n = outcomes[i].len() as u32;
        run.total += n;
        run.by_kind[kind_index(spec.kind)] += n;
        if i == 0 {
            continue;
        }
        // Trials never run past the verdict in lockstep.
        assert_eq!(n, decisions[i].trials, "a cell ran past its verdict");
        let fixes = decisions[i].finding == Finding::Fewer && !speed_flagged(&times[i], &times[0]);
        match spec.kind {
            Kind::Fix => run.calls.fix_found |= fixes,
            Kind::Partial => run.calls.partial_found |= fixes,
            Kind::Dud | Kind::Confound => run.calls.false_fix |= fixes,
            Kind::Baseline => {}
        }
        run.calls.any_worse |= decisions[i].finding == Finding::More;
    }
    run
}

#[derive(Clone)]
struct SeqRow {
    mean: f64,
    p95: u32,
    max: u32,
    by_kind: [f64; 5],
    fix_power: f64,
    partial_power: f64,
    false_fix: f64,
    any_worse: f64,
}

fn simulate_sequential(
    seq: &Seq,
    p0: f64,
    row: usize,
    seeds: u32,
    master: u64,
    verify: u32,
) -> SeqRow {
    let specs = suite(p0);
    let mut totals = Vec::with_capacity(seeds as usize);
    let mut by_kind = [0u64; 5];
    let (mut fix, mut partial, mut false_fix, mut worse) = (0u32, 0u32, 0u32, 0u32);
    for s in 0..seeds {
        // The copy lacks the crate's trend rule, so it is no longer checked against the crate.
        let _ = verify;
        let r = run_sequential(seq, &specs, master, row, s, false);
        totals.push(r.total);
        for (acc, x) in by_kind.iter_mut().zip(r.by_kind) {
            *acc += u64::from(x);
        }
        fix += u32::from(r.calls.fix_found);
        partial += u32::from(r.calls.partial_found);
        false_fix += u32::from(r.calls.false_fix);
        worse += u32::from(r.calls.any_worse);
    }
    let n = f64::from(seeds);
    let mean = totals.iter().map(|&t| f64::from(t)).sum::<f64>() / n;
    totals.sort_unstable();
    let p95 = totals[((0.95 * n).ceil() as usize).max(1) - 1];
    SeqRow {
        mean,
        p95,
        max: *totals.last().unwrap(),
        by_kind: by_kind.map(|x| x as f64 / n),
        fix_power: f64::from(fix) / n,
        partial_power: f64::from(partial) / n,
        false_fix: f64::from(false_fix) / n,
        any_worse: f64::from(worse) / n,
    }
}

// ---------------------------------------------------------------------------------------------
// The fixed-N design: the report's rule (two-sided Fisher, Holm's step-down).

/// Two-sided p-values and their direction for N trials each, memoised by (N, b, c).
struct TwoSided<'a> {
    fast: &'a Fast,
    tables: Vec<Vec<(f64, bool)>>,
}

impl<'a> TwoSided<'a> {
    fn new(fast: &'a Fast, max_n: u32) -> TwoSided<'a> {
        let tables = (0..=max_n)
            .map(|n| vec![(f64::NAN, false); (n as usize + 1) * (n as usize + 1)])
            .collect();
        TwoSided { fast, tables }
    }

    /// `verdict::two_sided`.
    fn get(&mut self, n: u32, b: u32, c: u32) -> (f64, bool) {
        let idx = b as usize * (n as usize + 1) + c as usize;
        let slot = &mut self.tables[n as usize][idx];
        if slot.0.is_nan() {
            let (bc, cc) = (Counts::new(b, n), Counts::new(c, n));
            let less = self.fast.fisher_less(bc, cc);
            let more = self.fast.fisher_less(cc, bc);
            *slot = ((2.0 * less.min(more)).min(1.0), less <= more);
        }
        *slot
    }
}

#[derive(Default, Clone, Copy)]
struct FixedPoint {
    fix_power: f64,
    partial_power: f64,
    false_fix: f64,
    any_worse: f64,
}

/// The fixed-N design's rates for every N in 2..=max_n (index N).
fn fixed_curve(
    two: &mut TwoSided,
    p0: f64,
    row: usize,
    seeds: u32,
    master: u64,
    max_n: u32,
) -> Vec<FixedPoint> {
    let specs = suite(p0);
    let alpha = 1.0 - CONFIDENCE;
    let mut tally = vec![[0u32; 4]; max_n as usize + 1];
    let m = specs.len() - 1;
    let mut fails = vec![0u32; specs.len()];
    let mut sorted_times: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut tested: Vec<(usize, f64, bool)> = Vec::with_capacity(m);
    for s in 0..seeds {
        let mut rngs: Vec<Rng> = (0..specs.len())
            .map(|i| Rng::stream(master, row, s, i))
            .collect();
        fails.iter_mut().for_each(|f| *f = 0);
        sorted_times.iter_mut().for_each(Vec::clear);
        for n in 1..=max_n {
            for (i, spec) in specs.iter().enumerate() {
                let (failed, t) = trial(spec, &mut rngs[i]);
                fails[i] += u32::from(failed);
                let v = &mut sorted_times[i];
                let at = v.partition_point(|x| *x < t);
                v.insert(at, t);
            }
            if n < 2 {
                continue;
            }
            tested.clear();
            for i in 1..specs.len() {
                let (p, fewer) = two.get(n, fails[0], fails[i]);
                tested.push((i, p, fewer));
            }
            tested.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut still = true;
            let mut calls = Calls::default();
            let base_median = median_sorted(&sorted_times[0]);
            for (rank, &(i, p, fewer)) in tested.iter().enumerate() {
                still &= p <= alpha / (m - rank) as f64;
                if !still {
                    break;
                }
                let slower = median_sorted(&sorted_times[i]) / base_median > CONFOUND_RATIO;
                let fixes = fewer && !slower;
                match specs[i].kind {
                    Kind::Fix => calls.fix_found |= fixes,
                    Kind::Partial => calls.partial_found |= fixes,
                    Kind::Dud | Kind::Confound => calls.false_fix |= fixes,
                    Kind::Baseline => {}
                }
                calls.any_worse |= !fewer;
            }
            let t = &mut tally[n as usize];
            t[0] += u32::from(calls.fix_found);
            t[1] += u32::from(calls.partial_found);
            t[2] += u32::from(calls.false_fix);
            t[3] += u32::from(calls.any_worse);
        }
    }
    let k = f64::from(seeds);
    tally
        .iter()
        .map(|t| FixedPoint {
            fix_power: f64::from(t[0]) / k,
            partial_power: f64::from(t[1]) / k,
            false_fix: f64::from(t[2]) / k,
            any_worse: f64::from(t[3]) / k,
        })
        .collect()
}

/// The smallest N whose power (by `power`) is ≥ `target` at a false-fix rate ≤ 5%.
fn smallest_n(
    curve: &[FixedPoint],
    target: f64,
    power: impl Fn(&FixedPoint) -> f64,
) -> Option<u32> {
    (2..curve.len()).find_map(|n| {
        let pt = &curve[n];
        (power(pt) >= target && pt.false_fix <= FALSE_FIX_GOAL).then_some(n as u32)
    })
}

// ---------------------------------------------------------------------------------------------

struct Args {
    seeds: u32,
    cap: u32,
    seed: u64,
    verify: u32,
    variants: bool,
}

fn args() -> Args {
    let mut a = Args {
        seeds: 10_000,
        cap: 64,
        seed: 1,
        verify: u32::MAX,
        variants: true,
    };
    let mut it = std::env::args().skip(1);
    let usage =
        "usage: sequential_sim [--seeds N] [--cap N] [--seed S] [--verify K] [--no-variants]";
    while let Some(flag) = it.next() {
        let mut value = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{flag} needs a number; {usage}"))
        };
        match flag.as_str() {
            "--seeds" => a.seeds = value().max(1) as u32,
            "--cap" => a.cap = value().max(1) as u32,
            "--seed" => a.seed = value(),
            "--verify" => a.verify = value() as u32,
            "--no-variants" => a.variants = false,
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0);
            }
            _ => panic!("unknown argument {flag}; {usage}"),
        }
    }
    a
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

fn main() {
    let a = args();
    let started = Instant::now();
    let comparisons = (suite(1.0).len() - 1) as u32;
    let fast = Fast::new(2 * a.cap.max(FIXED_MAX_N) + 2);
    fast.check(a.cap.max(FIXED_MAX_N), a.seed);
    let as_is = Variant {
        name: "as is: the crate's plan".to_string(),
        looks: doubling(FIRST_LOOK, a.cap),
        futile_p: FUTILE_P,
        spend_reachable: true,
        futile_fewer: Some(aorta_report::sequential::FUTILE_FEWER_P),
        drop_slow: false,
        crate_rules: true,
    };
    // The copy's baseline for the variants: the first rules measured (the crate's before it
    // spent α only on reachable looks and gained the fewer-side and trend futility rules).
    let first = Variant {
        name: format!("first rules: looks {FIRST_LOOK},×2; FUTILE_P {FUTILE_P}"),
        spend_reachable: false,
        futile_fewer: None,
        crate_rules: false,
        ..as_is.clone()
    };
    let mut variants = vec![as_is.clone()];
    if a.variants {
        variants.push(first.clone());
        let with = |name: &str| Variant {
            name: name.to_string(),
            ..first.clone()
        };
        let x15 = spaced(4, a.cap, 1.5);
        variants.extend([
            Variant {
                futile_p: 0.05,
                ..with("FUTILE_P 0.05")
            },
            Variant {
                futile_p: 0.5,
                ..with("FUTILE_P 0.5")
            },
            Variant {
                looks: doubling(8, a.cap),
                ..with("first look 8")
            },
            Variant {
                looks: doubling(2, a.cap),
                ..with("first look 2")
            },
            Variant {
                looks: x15.clone(),
                ..with("looks 4,×1.5")
            },
            Variant {
                spend_reachable: true,
                ..with("α only on reachable looks")
            },
            Variant {
                futile_fewer: Some(0.5),
                ..with("+ futile when failed and p_fewer > 0.5")
            },
            Variant {
                futile_fewer: Some(0.3),
                ..with("+ futile when failed and p_fewer > 0.3")
            },
            Variant {
                futile_fewer: Some(0.1),
                ..with("+ futile when failed and p_fewer > 0.1")
            },
            Variant {
                looks: x15.clone(),
                spend_reachable: true,
                futile_fewer: Some(0.3),
                ..with("looks 4,×1.5 + α on reachable + p_fewer > 0.3")
            },
            Variant {
                looks: doubling(2, a.cap),
                spend_reachable: true,
                futile_fewer: Some(0.3),
                ..with("first look 2 + α on reachable + p_fewer > 0.3")
            },
            Variant {
                drop_slow: true,
                ..with("stop speed-flagged cells (engine rule, not decide)")
            },
            Variant {
                looks: doubling(4, 2 * a.cap),
                ..with("cap ×2")
            },
            Variant {
                futile_fewer: Some(0.5),
                drop_slow: true,
                ..with("p_fewer > 0.5 + stop speed-flagged")
            },
            Variant {
                looks: x15.clone(),
                spend_reachable: true,
                futile_fewer: Some(0.5),
                drop_slow: true,
                ..with("looks 4,×1.5 + α on reachable + p_fewer > 0.5 + stop speed-flagged")
            },
        ]);
    }

    println!("# trials: auto against fixed N (engine/report/examples/sequential_sim.rs)\n");
    println!(
        "seeds per row: {} (fixed N: the same {} seeds for every N in 2..={FIXED_MAX_N}, coupled); cap: {}; confidence: {CONFIDENCE}; M = {comparisons}; master seed: {}; \
         the design as it is runs the crate's plan; the variants run a copy of the first rules (without the crate's trend futility rule)",
        a.seeds, a.seeds, a.cap, a.seed
    );
    println!(
        "cells: baseline p0, real fix 0, partial fix p0/2, 5 duds p0, speed confound 0 at 1.5× step time (flagged when median ratio > {CONFOUND_RATIO})\n"
    );

    let mut two = TwoSided::new(&fast, FIXED_MAX_N);
    let mut curves = Vec::new();
    let t_fixed = Instant::now();
    for (row, &p0) in ROWS.iter().enumerate() {
        curves.push(fixed_curve(&mut two, p0, row, a.seeds, a.seed, FIXED_MAX_N));
    }
    let fixed_secs = t_fixed.elapsed().as_secs_f64();

    let mut results: Vec<Vec<SeqRow>> = Vec::new();
    let mut seq_secs = Vec::new();
    for v in &variants {
        let seq = Seq::new(v, comparisons, &fast);
        let t = Instant::now();
        let rows: Vec<SeqRow> = ROWS
            .iter()
            .enumerate()
            .map(|(row, &p0)| simulate_sequential(&seq, p0, row, a.seeds, a.seed, a.verify))
            .collect();
        seq_secs.push(t.elapsed().as_secs_f64());
        results.push(rows);
    }

    let fixed_for = |row: usize, target: f64| smallest_n(&curves[row], target, |p| p.fix_power);
    let ratio = |mean: f64, n: Option<u32>| match n {
        Some(n) => format!("{:.3}", mean / f64::from(9 * n)),
        None => "n/a".into(),
    };
    let fixed_both = |row: usize, r: &SeqRow| {
        (2..curves[row].len()).find_map(|k| {
            let c = &curves[row][k];
            (c.fix_power >= r.fix_power
                && c.partial_power >= r.partial_power
                && c.false_fix <= FALSE_FIX_GOAL)
                .then_some(k as u32)
        })
    };
    let show_n = |n: Option<u32>| n.map_or(format!(">{FIXED_MAX_N}"), |n| n.to_string());
    let show_9n = |n: Option<u32>| n.map_or("n/a".into(), |n| (9 * n).to_string());

    println!("## The design as it is ({})\n", as_is.name);
    println!("| p0 | seq mean trials | seq p95 | false-fix % | real-fix missed % | partial-fix missed % | any-worse % | fixed N | fixed total (9N) | ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (row, &p0) in ROWS.iter().enumerate() {
        let r = &results[0][row];
        let n = fixed_for(row, r.fix_power);
        println!(
            "| {p0} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.mean,
            r.p95,
            pct(r.false_fix),
            pct(1.0 - r.fix_power),
            pct(1.0 - r.partial_power),
            pct(r.any_worse),
            show_n(n),
            show_9n(n),
            ratio(r.mean, n)
        );
    }
    println!(
        "\nGoal: ratio ≤ {TRIALS_GOAL} at a false-fix rate ≤ {}% (whole run).\n",
        100.0 * FALSE_FIX_GOAL
    );

    println!("### Context: the fixed-N design at that N, and where the sequential trials go\n");
    println!("| p0 | fixed: real-fix power % | fixed: partial-fix power % | fixed: false-fix % | fixed: any-worse % | seq: real-fix power % | seq: partial-fix power % | N matching seq on both fixes | ratio to that 9N | N at real-fix power ≥ min(seq, 99%) | ratio to that 9N | seq max | seq mean trials: baseline / fix / partial / 5 duds / confound |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (row, &p0) in ROWS.iter().enumerate() {
        let r = &results[0][row];
        let n = fixed_for(row, r.fix_power);
        let pt = n.map(|n| curves[row][n as usize]).unwrap_or_default();
        let both = fixed_both(row, r);
        // Matching a power of 100.00% asks the fixed design never to miss in any seed, which
        // grows N with the number of seeds: a tail-robust match.
        let n99 = fixed_for(row, r.fix_power.min(0.99));
        let k = r.by_kind;
        println!(
            "| {p0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} / {:.1} / {:.1} / {:.1} / {:.1} |",
            pct(pt.fix_power),
            pct(pt.partial_power),
            pct(pt.false_fix),
            pct(pt.any_worse),
            pct(r.fix_power),
            pct(r.partial_power),
            show_n(both),
            ratio(r.mean, both),
            show_n(n99),
            ratio(r.mean, n99),
            r.max,
            k[0],
            k[1],
            k[2],
            k[3],
            k[4]
        );
    }

    if variants.len() > 1 {
        println!("\n## Variants of the rules (copies of decide; same seeds; fixed N re-matched to each variant's real-fix power)\n");
        println!("| variant | looks | p0 | seq mean | p95 | false-fix % | real-fix missed % | partial-fix missed % | any-worse % | fixed N | ratio | N matching both fixes | ratio to that |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (v, rows) in variants.iter().zip(&results) {
            let looks: Vec<String> = v.looks.iter().map(u32::to_string).collect();
            for (row, &p0) in ROWS.iter().enumerate() {
                let r = &rows[row];
                let n = fixed_for(row, r.fix_power);
                let both = fixed_both(row, r);
                println!(
                    "| {} | {} | {p0} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    v.name,
                    looks.join(","),
                    r.mean,
                    r.p95,
                    pct(r.false_fix),
                    pct(1.0 - r.fix_power),
                    pct(1.0 - r.partial_power),
                    pct(r.any_worse),
                    show_n(n),
                    ratio(r.mean, n),
                    show_n(both),
                    ratio(r.mean, both)
                );
            }
        }
    }

    println!(
        "\ntimings: fixed-N curves {fixed_secs:.1} s; sequential {} ; total {:.1} s",
        variants
            .iter()
            .zip(&seq_secs)
            .map(|(v, s)| format!("[{}: {s:.1} s]", v.name))
            .collect::<Vec<_>>()
            .join(" "),
        started.elapsed().as_secs_f64()
    );
}
