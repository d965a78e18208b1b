//! `trials: auto`: the sequential test that decides, cell by cell, when enough trials have run.
//! One pure function ([`decide`]) of a cell's and the baseline's outcomes in trial order: the
//! scheduler calls it after every trial to know which trials to start next, and the report
//! calls it on the finished run to state each cell's verdict, so the two cannot disagree.
//!
//! **Looks.** A cell and the baseline are compared at 4, 8, 16, … trials up to the cap
//! (`max_trials_per_cell`), always on the first n trials of each (trial order, not arrival
//! order), so a rerun, another executor or the report reach the same decision.
//!
//! **The test.** At look k, Fisher's exact test in both directions ([`fisher_less`]): fewer
//! failures than the baseline (a fix) or more (worse). Each direction may reject at level
//! α_k = α / (2M) · n_k / Σn (alpha spending proportional to the look's size), M being the
//! number of cells compared with the baseline; a look too small to reject at its level even
//! with 0 of n against n of n (the look at 4 among many cells) gets none, and the sum runs
//! over the others. The sample sizes of every look are fixed in
//! advance (n_k trials of both), so by the union bound the chance that any cell is called a
//! fix or worse while it is not is at most α = 1 − confidence for the whole run, however many
//! looks and cells; stopping a cell early (futility) only removes chances to reject.
//! `bench/sequential` measures the rates by simulation.
//!
//! **Futility.** A cell stops as "no different" once it shows no sign of a difference: it
//! has failed at least as often as the baseline with the test for "worse" above [`FUTILE_P`],
//! or it has failed with the test for "fewer" above [`FUTILE_FEWER_P`]; or, if the observed
//! rates held, the cap's look would decide nothing (for a cell that has not failed, the
//! baseline's rate is taken at the top of its [`TREND_CONFIDENCE`] interval, so a real fix is
//! dropped only when even that could not show it); or neither verdict could be reached by the
//! cap even if every later trial went its way. This is what makes a dud cheap: an
//! always-failing dud against an always-failing baseline stops at 4.
//!
//! **Slower.** A cell that fails less often than the baseline but whose first n trials run
//! slower than the confound threshold, with the whole bootstrap interval of the step-time ratio
//! above it (the confound detector's `speed` tag, on the same trials), can never be called a
//! fix: it stops there ([`Stop::Slower`]), as the speed confound it is. This needs per-step
//! times ([`Pace`]); without them no cell stops for it. It only removes chances to reject, so
//! the error bound above holds.
//!
//! **Assumptions**, in plain words: trials of one cell are independent and alike (the failure
//! probability does not drift during the run), and trials that error are no evidence either
//! way (they are skipped, not counted as passes or failures).

use crate::bootstrap;
use crate::evidence::{fisher_less, Counts};
use serde::{Deserialize, Serialize};

/// The first look.
pub const FIRST_LOOK: u32 = 4;

/// A cell that fails at least as often as the baseline stops as "no different" when the test
/// for "worse" is above this (no sign of a difference in either direction).
pub const FUTILE_P: f64 = 0.2;

/// A cell that failed at least once stops as "no different" when the test for "fewer" is
/// above this: no sign of a reduction (bench/sequential measured 11–30 trials saved per run
/// of the suite, at no cost in false calls and 1–4 points of power for a partial fix).
pub const FUTILE_FEWER_P: f64 = 0.5;

/// The two-sided confidence of the baseline interval whose upper end the trend rule assumes
/// for a cell that has not failed yet.
pub const TREND_CONFIDENCE: f64 = 0.8;

/// One trial's outcome by position: `Some(true)` failed, `Some(false)` passed, `None` no
/// evidence (the trial errored, or ended without a record).
pub type Outcome = Option<bool>;

/// The looks and the error budget of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// 1 − confidence: the bound on any false call (fix or worse) in the run.
    pub alpha: f64,
    /// M: the cells compared with the baseline.
    pub comparisons: u32,
    /// Trials per cell at each look: 4, 8, 16, …, the cap.
    pub looks: Vec<u32>,
    /// The level each direction may reject at, by look (0 for a look that cannot reject).
    pub levels: Vec<f64>,
}

/// How a cell compares with the baseline, as far as the test went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// Fails less often, at the run's confidence.
    Fewer,
    /// Fails more often, at the run's confidence.
    More,
    /// Stopped as futile: fails about as often as the baseline.
    NoDifferent,
    /// Not decided (still running, at the cap, or out of budget).
    Undecided,
}

/// Why a cell stopped running trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The test decided (fewer or more failures than the baseline).
    Decided,
    /// No difference worth more trials.
    Futile,
    /// `max_trials_per_cell` reached undecided.
    Cap,
    /// The budget (`max_walltime` / `max_gpu_hours`) ran out, or the build was cut short.
    Budget,
    /// The baseline gave no pass or fail to compare with.
    NoBaseline,
    /// Fails less often but runs slower than the confound threshold: never a fix.
    Slower,
}

impl Stop {
    pub fn describe(self) -> &'static str {
        match self {
            Stop::Decided => "decided",
            Stop::Futile => "futile (same rate as the baseline)",
            Stop::Cap => "cap reached",
            Stop::Budget => "budget spent",
            Stop::NoBaseline => "the baseline has no evidence",
            Stop::Slower => "slower than the confound threshold",
        }
    }
}

/// Where a cell stands after [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub finding: Finding,
    /// `None` while the cell still runs.
    pub stop: Option<Stop>,
    /// Running: the trials it needs before its next look. Stopped: the trials its verdict
    /// rests on (the cell is its first `trials` trials).
    pub trials: u32,
    /// The one-sided p-values at the last look made (fewer, more); 1.0 before any.
    pub p_fewer: f64,
    pub p_more: f64,
}

impl Decision {
    pub fn running(&self) -> bool {
        self.stop.is_none()
    }
}

/// Looks at `first`, twice that, … up to `cap` (the last look is the cap itself).
pub fn doubling(first: u32, cap: u32) -> Vec<u32> {
    let mut looks = Vec::new();
    let mut n = first.min(cap).max(1);
    loop {
        looks.push(n);
        if n >= cap {
            return looks;
        }
        n = n.saturating_mul(2).min(cap);
    }
}

/// The most trial positions [`outcomes_of`] lays out (indices come from the plan, bounded by
/// the recipe's trial limit; the cap keeps a hand-edited record from asking for more).
const MAX_POSITIONS: usize = 1 << 20;

/// Values by trial index from `(trial index, value)` pairs in any order; an index no pair
/// names gets `missing`.
fn by_index<T: Clone>(pairs: impl IntoIterator<Item = (u32, T)>, missing: T) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for (index, value) in pairs {
        let i = index as usize;
        if i >= MAX_POSITIONS {
            continue;
        }
        if out.len() <= i {
            out.resize(i + 1, missing.clone());
        }
        out[i] = value;
    }
    out
}

/// Trials' outcomes by index, from `(trial index, verdict)` pairs in any order: a missing
/// index is no evidence, as an errored trial is.
pub fn outcomes_of(trials: impl IntoIterator<Item = (u32, aorta_trial::Verdict)>) -> Vec<Outcome> {
    let outcome = |verdict| match verdict {
        aorta_trial::Verdict::Fail => Some(true),
        aorta_trial::Verdict::Pass => Some(false),
        aorta_trial::Verdict::Error => None,
    };
    by_index(trials.into_iter().map(|(i, v)| (i, outcome(v))), None)
}

/// Trials' per-step times by index (see [`Pace`]), from `(trial index, step times)` pairs in
/// any order: a missing index has none.
pub fn steps_of<'a>(trials: impl IntoIterator<Item = (u32, &'a [f64])>) -> Vec<Vec<f64>> {
    by_index(trials.into_iter().map(|(i, s)| (i, s.to_vec())), Vec::new())
}

/// The failures and valid trials among the first `n` outcomes.
pub fn counts(outcomes: &[Outcome], n: u32) -> Counts {
    let head = &outcomes[..(n as usize).min(outcomes.len())];
    let failed = head.iter().filter(|o| **o == Some(true)).count() as u32;
    let valid = head.iter().filter(|o| o.is_some()).count() as u32;
    Counts::new(failed, valid)
}

impl Design {
    /// `confidence` in (0, 1), `comparisons` ≥ 1 (clamped), `cap` ≥ 1.
    pub fn new(confidence: f64, comparisons: u32, cap: u32) -> Design {
        let alpha = 1.0 - confidence;
        let comparisons = comparisons.max(1);
        let looks = doubling(FIRST_LOOK, cap);
        let per_direction = alpha / (2.0 * f64::from(comparisons));
        // The smallest p-value look n can give: 0 of n failed against n of n.
        let best = |n: u32| fisher_less(Counts::new(n, n), Counts::new(0, n));
        let mut possible = vec![true; looks.len()];
        // Dropping a look raises the others' levels, which may make another possible: settle.
        loop {
            let total: u32 = looks
                .iter()
                .zip(&possible)
                .filter(|(_, p)| **p)
                .map(|(n, _)| n)
                .sum();
            let level = |n: u32| per_direction * f64::from(n) / f64::from(total.max(1));
            let next: Vec<bool> = looks.iter().map(|&n| best(n) <= level(n)).collect();
            if next == possible || !next.iter().any(|p| *p) {
                let levels = looks
                    .iter()
                    .zip(&possible)
                    .map(|(&n, &p)| if p { level(n) } else { 0.0 })
                    .collect();
                return Design {
                    alpha,
                    comparisons,
                    looks,
                    levels,
                };
            }
            possible = next;
        }
    }

    pub fn confidence(&self) -> f64 {
        1.0 - self.alpha
    }

    pub fn cap(&self) -> u32 {
        self.looks.last().copied().unwrap_or(1)
    }

    /// The level each direction may reject at, at look `k`.
    pub fn alpha_at(&self, k: usize) -> f64 {
        self.levels.get(k).copied().unwrap_or(0.0)
    }

    /// Whether, if both rates held as observed, the cap's look would reject in neither
    /// direction: the trend says no verdict is coming (a dud that fails a little less than the
    /// baseline by chance would otherwise run to the cap). For a cell that has not failed the
    /// baseline's rate is taken at the upper end of its interval ([`TREND_CONFIDENCE`]): a real
    /// fix is dropped only when even that could not show it, as against a baseline that rarely
    /// fails.
    fn trend_falls_short(&self, b: Counts, c: Counts) -> bool {
        let cap = f64::from(self.cap());
        let last = self.alpha_at(self.looks.len() - 1);
        let at_cap = |rate: f64| Counts::new((rate * cap).round() as u32, cap as u32);
        let base_rate = match c.failed {
            0 => b.wilson(TREND_CONFIDENCE).1,
            _ => b.rate(),
        };
        let (b, c) = (at_cap(base_rate), at_cap(c.rate()));
        fisher_less(b, c) > last && fisher_less(c, b) > last
    }

    /// Whether neither verdict can be reached by the cap, whatever the later trials do: the
    /// cell's later trials all passing (or all failing) against a baseline that keeps its rate.
    fn out_of_reach(&self, b: Counts, c: Counts) -> bool {
        let cap = self.cap();
        let last = self.alpha_at(self.looks.len() - 1);
        let more = cap.saturating_sub(c.trials);
        let base = Counts::new((b.rate() * f64::from(cap)).round() as u32, cap);
        let best = Counts::new(c.failed, c.trials + more);
        let worst = Counts::new(c.failed + more, c.trials + more);
        fisher_less(base, best) > last && fisher_less(worst, base) > last
    }
}

/// Per-step times in milliseconds of each trial by position (empty where a trial reported
/// none), for the cell and the baseline, and the recipe's confound threshold: what the speed
/// stop looks at (see the module's doc). The names seed the bootstrap, as the report's
/// confound detector seeds it, so the scheduler and the report agree.
#[derive(Debug, Clone, Copy)]
pub struct Pace<'a> {
    pub threshold: f64,
    pub cell_name: &'a str,
    pub baseline_name: &'a str,
    pub cell: &'a [Vec<f64>],
    pub baseline: &'a [Vec<f64>],
}

impl<'a> Pace<'a> {
    /// Whether the first `n` trials of the cell are slower than the baseline's first `n`
    /// beyond the threshold: the mean ratio above it and the bootstrap interval's lower end too.
    pub fn slower_at(&self, n: u32) -> bool {
        // Called at every look as trials end: no copies (the bootstrap drops empty groups).
        let head = |g: &'a [Vec<f64>]| &g[..(n as usize).min(g.len())];
        let (c, b) = (head(self.cell), head(self.baseline));
        let mean = |g: &[Vec<f64>]| {
            let (sum, count) = g
                .iter()
                .flatten()
                .fold((0.0, 0usize), |(s, k), x| (s + x, k + 1));
            (count > 0).then(|| sum / count as f64)
        };
        let (Some(mc), Some(mb)) = (mean(c), mean(b)) else {
            return false;
        };
        if mb <= 0.0 || mc / mb <= self.threshold {
            return false;
        }
        bootstrap::ratio_ci(c, b, self.cell_name, self.baseline_name)
            .is_some_and(|(lo, _)| lo > self.threshold)
    }
}

/// Every cell's per-step times by trial position (`steps[i]` for cell i), their names and the
/// confound threshold: [`plan`] builds each cell's [`Pace`] from it.
#[derive(Debug, Clone, Copy)]
pub struct Paces<'a> {
    pub threshold: f64,
    pub names: &'a [String],
    pub steps: &'a [Vec<Vec<f64>>],
}

impl<'a> Paces<'a> {
    fn of(&self, cell: usize, baseline: usize) -> Option<Pace<'a>> {
        Some(Pace {
            threshold: self.threshold,
            cell_name: self.names.get(cell)?,
            baseline_name: self.names.get(baseline)?,
            cell: self.steps.get(cell)?,
            baseline: self.steps.get(baseline)?,
        })
    }
}

/// Where a cell stands, from its outcomes and the baseline's in trial order (see the module's
/// doc). Both slices hold the outcomes of the trials that ended, from the first on, without
/// gaps; `pace`, where given, their step times for the speed stop; `budget_spent` stops an
/// undecided cell where it is.
pub fn decide(
    d: &Design,
    baseline: &[Outcome],
    cell: &[Outcome],
    pace: Option<Pace<'_>>,
    budget_spent: bool,
) -> Decision {
    let mut p = (1.0, 1.0);
    let stopped = |finding, stop, trials, p: (f64, f64)| Decision {
        finding,
        stop: Some(stop),
        trials,
        p_fewer: p.0,
        p_more: p.1,
    };
    let last = d.looks.len() - 1;
    for (k, &n) in d.looks.iter().enumerate() {
        if (cell.len() as u32) < n || (baseline.len() as u32) < n {
            if budget_spent {
                return stopped(Finding::Undecided, Stop::Budget, cell.len() as u32, p);
            }
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
        p = (fisher_less(b, c), fisher_less(c, b));
        let level = d.alpha_at(k);
        if p.0 <= level {
            return stopped(Finding::Fewer, Stop::Decided, n, p);
        }
        if p.1 <= level {
            return stopped(Finding::More, Stop::Decided, n, p);
        }
        if c.rate() < b.rate() && pace.is_some_and(|pace| pace.slower_at(n)) {
            return stopped(Finding::Undecided, Stop::Slower, n, p);
        }
        if k == last {
            return stopped(Finding::Undecided, Stop::Cap, n, p);
        }
        let not_fewer = c.failed > 0 && c.rate() >= b.rate();
        let no_sign = c.failed > 0 && p.0 > FUTILE_FEWER_P;
        if (not_fewer && p.1 > FUTILE_P)
            || no_sign
            || d.trend_falls_short(b, c)
            || d.out_of_reach(b, c)
        {
            return stopped(Finding::NoDifferent, Stop::Futile, n, p);
        }
    }
    unreachable!("the last look always returns")
}

/// A cell with nothing to compare against (the run has only the baseline): it stops once it
/// has both passed and failed (flaky: the failure reproduces, intermittently) or at the cap.
pub fn decide_alone(d: &Design, cell: &[Outcome], budget_spent: bool) -> Decision {
    for &n in &d.looks {
        if (cell.len() as u32) < n {
            let stop = budget_spent.then_some(Stop::Budget);
            let trials = if budget_spent { cell.len() as u32 } else { n };
            return Decision {
                finding: Finding::Undecided,
                stop,
                trials,
                p_fewer: 1.0,
                p_more: 1.0,
            };
        }
        let head = &cell[..n as usize];
        if head.contains(&Some(true)) && head.contains(&Some(false)) {
            return Decision {
                finding: Finding::Undecided,
                stop: Some(Stop::Decided),
                trials: n,
                p_fewer: 1.0,
                p_more: 1.0,
            };
        }
    }
    Decision {
        finding: Finding::Undecided,
        stop: Some(Stop::Cap),
        trials: d.cap(),
        p_fewer: 1.0,
        p_more: 1.0,
    }
}

/// The baseline's decision from the other cells': it runs as far as the furthest cell needs
/// it, and stops with the last of them.
pub fn baseline_decision<'a>(others: impl IntoIterator<Item = &'a Decision>) -> Decision {
    let (mut needed, mut all_stopped) = (0, true);
    for d in others {
        needed = needed.max(d.trials);
        all_stopped &= !d.running();
    }
    Decision {
        finding: Finding::Undecided,
        stop: all_stopped.then_some(Stop::Decided),
        trials: needed,
        p_fewer: 1.0,
        p_more: 1.0,
    }
}

/// A whole run's state: each cell's decision, which says how many trials it needs in all (the
/// baseline's from the others', [`baseline_decision`]). `outcomes[i]` are cell i's ended
/// trials in order; without a baseline, or with no other cell, cells run alone
/// ([`decide_alone`]). `paces`, where given, holds their step times for the speed stop.
pub fn plan(
    d: &Design,
    baseline: Option<usize>,
    outcomes: &[Vec<Outcome>],
    paces: Option<&Paces<'_>>,
    budget_spent: bool,
) -> Vec<Decision> {
    let b = baseline.filter(|&b| b < outcomes.len() && outcomes.len() > 1);
    let mut out: Vec<Decision> = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| match b {
            Some(b) if i != b => {
                let pace = paces.and_then(|p| p.of(i, b));
                decide(d, &outcomes[b], o, pace, budget_spent)
            }
            _ => decide_alone(d, o, budget_spent),
        })
        .collect();
    if let Some(b) = b {
        out[b] = baseline_decision(
            out.iter()
                .enumerate()
                .filter(|(i, _)| *i != b)
                .map(|(_, x)| x),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seq(fails: &[bool]) -> Vec<Outcome> {
        fails.iter().map(|f| Some(*f)).collect()
    }

    #[test]
    fn the_error_budget_is_spent_exactly_and_not_on_looks_that_cannot_reject() {
        let d = Design::new(0.95, 3, 64);
        assert_eq!(d.looks, [4, 8, 16, 32, 64]);
        let spent: f64 = (0..d.looks.len()).map(|k| 2.0 * d.alpha_at(k)).sum();
        assert!((spent - 0.05 / 3.0).abs() < 1e-12);
        // 0/4 against 4/4 is p = 1/70: more than the look at 4 could get among 3 cells.
        assert_eq!(d.alpha_at(0), 0.0);
        assert!((d.alpha_at(1) - 0.05 / 6.0 * 8.0 / 120.0).abs() < 1e-15);
        // One cell at 50% confidence, looks 4 and 8: the look at 4 can reject and keeps its share.
        let one = Design::new(0.5, 1, 8);
        assert!(one.alpha_at(0) > 0.0);
    }

    #[test]
    fn an_always_failing_baseline_finds_a_clean_fix_at_eight_and_drops_a_dud_at_four() {
        let d = Design::new(0.95, 8, 64);
        let base = seq(&[true; 64]);
        let fix = decide(&d, &base, &seq(&[false; 8]), None, false);
        assert_eq!(
            (fix.finding, fix.stop, fix.trials),
            (Finding::Fewer, Some(Stop::Decided), 8)
        );
        let dud = decide(&d, &base, &seq(&[true; 4]), None, false);
        assert_eq!(
            (dud.finding, dud.stop, dud.trials),
            (Finding::NoDifferent, Some(Stop::Futile), 4)
        );
        // After 4 clean trials the fix is not yet decided: it asks for 8.
        let early = decide(&d, &base, &seq(&[false; 4]), None, false);
        assert_eq!((early.stop, early.trials), (None, 8));
    }

    #[test]
    fn looks_use_the_first_trials_in_order_and_budget_stops_where_it_is() {
        let d = Design::new(0.95, 1, 16);
        let base = seq(&[true; 16]);
        // Only 6 ended: the look at 8 waits, unless the budget is spent.
        let cell = seq(&[false; 6]);
        assert!(decide(&d, &base, &cell, None, false).running());
        let spent = decide(&d, &base, &cell, None, true);
        assert_eq!((spent.stop, spent.trials), (Some(Stop::Budget), 6));
    }

    #[test]
    fn a_flaky_lone_cell_stops_once_it_both_passed_and_failed() {
        let d = Design::new(0.95, 1, 64);
        let x = decide_alone(&d, &seq(&[true, false, true, true]), false);
        assert_eq!((x.stop, x.trials), (Some(Stop::Decided), 4));
        let y = decide_alone(&d, &seq(&[true; 64]), false);
        assert_eq!((y.stop, y.trials), (Some(Stop::Cap), 64));
    }

    #[test]
    fn a_cell_that_fails_less_only_by_running_slower_stops_as_slower_at_the_first_look() {
        let d = Design::new(0.95, 8, 64);
        let base = seq(&[true; 8]);
        let steps = |ms: f64, n: usize| -> Vec<Vec<f64>> {
            (0..n).map(|i| vec![ms + i as f64 * 0.5; 20]).collect()
        };
        let (slow, even) = (steps(150.0, 8), steps(100.0, 8));
        let pace = |cell: &'static str, c| Pace {
            threshold: 1.15,
            cell_name: cell,
            baseline_name: "baseline",
            cell: c,
            baseline: &even,
        };
        let x = decide(
            &d,
            &base,
            &seq(&[false; 4]),
            Some(pace("slow", &slow)),
            false,
        );
        assert_eq!(
            (x.finding, x.stop, x.trials),
            (Finding::Undecided, Some(Stop::Slower), 4)
        );
        // As fast as the baseline: it runs on to be shown a fix.
        let y = decide(
            &d,
            &base,
            &seq(&[false; 4]),
            Some(pace("even", &even)),
            false,
        );
        assert_eq!((y.stop, y.trials), (None, 8));
        // Slower but failing as often: a dud, stopped as futile, not as slower.
        let z = decide(
            &d,
            &base,
            &seq(&[true; 4]),
            Some(pace("slow", &slow)),
            false,
        );
        assert_eq!(z.stop, Some(Stop::Futile));
        // No per-step times on one side: no speed stop.
        let none: Vec<Vec<f64>> = vec![Vec::new(); 8];
        let w = Pace {
            baseline: &none,
            ..pace("slow", &slow)
        };
        assert!(!w.slower_at(4));
    }

    #[test]
    fn an_errored_baseline_is_no_evidence() {
        let d = Design::new(0.95, 1, 64);
        let x = decide(&d, &[None; 4], &seq(&[false; 4]), None, false);
        assert_eq!(x.stop, Some(Stop::NoBaseline));
    }

    #[test]
    fn the_baseline_runs_as_far_as_the_furthest_cell() {
        let d = Design::new(0.95, 2, 64);
        let outcomes = vec![seq(&[true; 4]), seq(&[true; 4]), seq(&[false; 4])];
        let plan = plan(&d, Some(0), &outcomes, None, false);
        assert_eq!(plan[1].stop, Some(Stop::Futile));
        assert_eq!((plan[2].stop, plan[2].trials), (None, 8));
        assert_eq!((plan[0].stop, plan[0].trials), (None, 8));
    }

    proptest! {
        #[test]
        fn a_decision_never_rests_on_trials_that_did_not_end(
            b in proptest::collection::vec(proptest::option::of(any::<bool>()), 0..70),
            c in proptest::collection::vec(proptest::option::of(any::<bool>()), 0..70),
            m in 1u32..10,
        ) {
            let d = Design::new(0.95, m, 64);
            let x = decide(&d, &b, &c, None, false);
            if x.running() {
                prop_assert!(x.trials as usize > c.len().min(b.len()));
            } else {
                prop_assert!(x.trials as usize <= c.len().min(b.len()));
                if x.finding == Finding::Fewer || x.finding == Finding::More {
                    prop_assert!(x.p_fewer.min(x.p_more) <= d.alpha / (2.0 * f64::from(m)));
                }
            }
        }
    }
}
