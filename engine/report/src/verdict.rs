//! The run's answer: which cells change the failure rate against the baseline, how sure that
//! is, and what to do next. Computed once from the matrix's cells ([`Answer::of`], called by
//! `Matrix::new`); the terminal summary, matrix.md, matrix.json and report.html all show this
//! one value.
//!
//! **The test** is the agent's ([`crate::evidence`]): Fisher's exact test on each cell's
//! failed/passed counts against the baseline's, here two-sided (a mitigation may make things
//! worse), with Holm's step-down correction across the cells so that the chance of any false
//! call in the run stays at or below 1 − confidence. Trials whose verdict is `error` are no
//! evidence either way. A cell that fails less often but runs slower beyond the confound
//! threshold is never called a fix: slowing a job down can hide a race.
//!
//! Under `trials: auto` the calls are the sequential test's instead
//! ([`crate::sequential::decide`], replayed on the cells' trials in order, exactly as the
//! scheduler decided when to stop): a fixed-N test applied to trials whose number depended on
//! what they showed would overstate the confidence.

use crate::evidence::{fisher_less, Counts};
use crate::sequential::{self, Finding, Outcome, Stop};
use crate::stats::pct;
use aorta_recipe::AutoTrials;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The confidence every verdict is stated at.
pub const CONFIDENCE: f64 = 0.95;

/// Trials per cell beyond which "how many would decide it" is not worth saying.
const MAX_TRIALS_SUGGESTED: u32 = 1000;

/// How one cell compares with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// The cell every other is compared with.
    Baseline,
    /// Fails less often than the baseline at the run's confidence, and is not slower.
    Fixes,
    /// Fails less often, but runs slower beyond the confound threshold: it may only hide the
    /// failure by slowing the job. Never called a fix.
    SpeedConfounded,
    /// Fails more often than the baseline at the run's confidence.
    Worse,
    /// The trials do not tell it apart from the baseline.
    Inconclusive,
    /// `trials: auto` stopped it as futile: it fails about as often as the baseline.
    NoDifferent,
    /// No trial gave a pass or a fail (the cell errored, or did not run).
    NoEvidence,
}

impl Call {
    /// The call as matrix.json spells it (and report.html's CSS class).
    pub fn slug(self) -> &'static str {
        match self {
            Call::Baseline => "baseline",
            Call::Fixes => "fixes",
            Call::SpeedConfounded => "speed_confounded",
            Call::Worse => "worse",
            Call::Inconclusive => "inconclusive",
            Call::NoDifferent => "no_different",
            Call::NoEvidence => "no_evidence",
        }
    }

    /// The marker shown beside the cell wherever a colour also says it.
    pub fn label(self) -> &'static str {
        match self {
            Call::Baseline => "baseline",
            Call::Fixes => "fixes",
            Call::SpeedConfounded => "speed confound",
            Call::Worse => "worse",
            Call::Inconclusive => "inconclusive",
            Call::NoDifferent => "no different",
            Call::NoEvidence => "no evidence",
        }
    }
}

/// Whether a cell's judged trials passed, failed or both: a flaky cell reproduces the failure
/// intermittently (the normal case for a race), which is not the same as always failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    Pass,
    Fail,
    Flaky,
    /// No trial passed or failed.
    None,
}

impl Stability {
    pub fn of(c: Counts) -> Stability {
        match (c.failed, c.trials - c.failed) {
            (0, 0) => Stability::None,
            (0, _) => Stability::Pass,
            (_, 0) => Stability::Fail,
            _ => Stability::Flaky,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Stability::Pass => "pass",
            Stability::Fail => "fail",
            Stability::Flaky => "flaky",
            Stability::None => "—",
        }
    }
}

/// `trials: auto`: how far a cell's sequential test went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AutoStop {
    /// The trials its verdict rests on.
    pub trials: u32,
    /// Why it stopped.
    pub stop: Stop,
}

/// One cell's evidence and call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellCall {
    pub cell: String,
    /// The mitigations the cell applies (how the answer names a fix).
    pub mitigations: Vec<String>,
    pub call: Call,
    pub failed: u32,
    /// Trials that passed or failed (errors excluded).
    pub trials: u32,
    /// The failure rate's Wilson interval at [`CONFIDENCE`].
    pub interval: (f64, f64),
    /// The two-sided Fisher p-value against the baseline, before the correction.
    pub p_value: f64,
    /// For an inconclusive cell whose rate differs from the baseline's: the trials per cell
    /// (in it and in the baseline) that would decide it if the observed rates held.
    pub trials_to_decide: Option<u32>,
    /// Passed, failed, or both (flaky).
    pub stability: Stability,
    /// `trials: auto`: where its sequential test stopped and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoStop>,
}

/// The run's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Answer {
    pub confidence: f64,
    /// `trials: auto`: the calls are the sequential test's (see the module's doc).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sequential: bool,
    /// The baseline's name and evidence (`None`: it has none, so nothing can be compared).
    pub baseline: Option<CellCall>,
    /// Every other cell, in the matrix's order.
    pub cells: Vec<CellCall>,
    /// One sentence: the fix (or why there is none yet).
    pub headline: String,
    /// What to do next.
    pub next_step: String,
}

/// What the answer needs of one cell.
pub(crate) struct Evidence<'a> {
    pub name: &'a str,
    pub mitigations: &'a [String],
    pub failed: usize,
    pub passed: usize,
    /// Slower than the baseline beyond the confound threshold (its `speed` tag).
    pub slower: bool,
    /// Every trial's outcome by index (`trials: auto` replays its test on them).
    pub outcomes: &'a [Outcome],
    /// Every trial's per-step times by index (`trials: auto`'s speed stop replays on them).
    pub steps: &'a [Vec<f64>],
}

fn counts(e: &Evidence) -> Counts {
    let n = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
    let failed = n(e.failed);
    Counts::new(failed, failed.saturating_add(n(e.passed)))
}

/// Two-sided Fisher p-value, and whether the cell fails less often than the baseline.
fn two_sided(baseline: Counts, cell: Counts) -> (f64, bool) {
    let less = fisher_less(baseline, cell);
    let more = fisher_less(cell, baseline);
    ((2.0 * less.min(more)).min(1.0), less <= more)
}

/// The smallest number of trials per cell that would decide `cell` against `baseline` at
/// `alpha` if the observed rates held; `None` if the rates are equal or it is beyond reason.
fn trials_to_decide(baseline: Counts, cell: Counts, alpha: f64) -> Option<u32> {
    if baseline.trials == 0 || cell.trials == 0 || baseline.rate() == cell.rate() {
        return None;
    }
    let at = |n: u32| {
        let scaled = |c: Counts| Counts::new((c.rate() * f64::from(n)).round() as u32, n);
        two_sided(scaled(baseline), scaled(cell)).0 <= alpha
    };
    let start = baseline.trials.max(cell.trials).max(2);
    let mut n = start;
    while !at(n) {
        n = n.checked_mul(2)?;
        if n > MAX_TRIALS_SUGGESTED * 2 {
            return None;
        }
    }
    // Refine between the last failing doubling and n.
    let (mut lo, mut hi) = ((n / 2).max(start), n);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if at(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let n = if at(lo) { lo } else { hi };
    (n <= MAX_TRIALS_SUGGESTED).then_some(n)
}

/// Shown values are rounded (a p-value of 0.999999999999999 says nothing 1.0 does not); the
/// calls are made on the exact ones.
fn round(x: f64, scale: f64) -> f64 {
    (x * scale).round() / scale
}

impl Answer {
    /// The run's answer over `cells` against the one named `baseline` (see the module's doc).
    /// `threshold` is the recipe's confound threshold (the speed stop's, under `trials: auto`).
    pub(crate) fn of(
        baseline_name: &str,
        cells: &[Evidence],
        auto: Option<&AutoTrials>,
        threshold: f64,
    ) -> Answer {
        let confidence = auto.map_or(CONFIDENCE, |a| a.confidence);
        let alpha = 1.0 - confidence;
        let base_row = cells.iter().find(|e| e.name == baseline_name);
        let base = base_row.map(counts).filter(|c| c.trials > 0);
        let evidence = |row: &Evidence| {
            let c = counts(row);
            let (lo, hi) = c.wilson(confidence);
            CellCall {
                cell: row.name.to_string(),
                mitigations: row.mitigations.to_vec(),
                call: Call::NoEvidence,
                failed: c.failed,
                trials: c.trials,
                interval: (round(lo, 1e4), round(hi, 1e4)),
                p_value: 1.0,
                trials_to_decide: None,
                stability: Stability::of(c),
                auto: None,
            }
        };
        let baseline = base_row.filter(|_| base.is_some()).map(|r| CellCall {
            call: Call::Baseline,
            ..evidence(r)
        });
        let others: Vec<&Evidence> = cells.iter().filter(|e| e.name != baseline_name).collect();
        let mut calls: Vec<CellCall> = others.iter().map(|r| evidence(r)).collect();
        if let (Some(a), Some(b), Some(base_row)) = (auto, base, base_row) {
            let design = sequential::Design::new(
                a.confidence,
                a.comparisons_for(others.len()),
                a.max_trials_per_cell,
            );
            for (i, row) in others.iter().enumerate() {
                // The run is over: an undecided cell stopped where it is.
                let pace = sequential::Pace {
                    threshold,
                    cell_name: row.name,
                    baseline_name: base_row.name,
                    cell: row.steps,
                    baseline: base_row.steps,
                };
                let d =
                    sequential::decide(&design, base_row.outcomes, row.outcomes, Some(pace), true);
                let stop = d.stop.unwrap_or(Stop::Budget);
                let c = counts(row);
                calls[i].p_value = round(2.0 * d.p_fewer.min(d.p_more), 1e6).min(1.0);
                calls[i].auto = Some(AutoStop {
                    trials: d.trials,
                    stop,
                });
                calls[i].call = match d.finding {
                    _ if c.trials == 0 => Call::NoEvidence,
                    _ if stop == Stop::Slower => Call::SpeedConfounded,
                    Finding::Fewer if row.slower => Call::SpeedConfounded,
                    Finding::Fewer => Call::Fixes,
                    Finding::More => Call::Worse,
                    Finding::NoDifferent => Call::NoDifferent,
                    Finding::Undecided => Call::Inconclusive,
                };
                if calls[i].call == Call::Inconclusive {
                    calls[i].trials_to_decide =
                        trials_to_decide(b, c, alpha / others.len().max(1) as f64);
                }
            }
        } else if let Some(b) = base {
            // Holm's step-down over the cells that have evidence.
            let mut tested: Vec<(usize, f64, bool)> = Vec::new();
            for (i, row) in others.iter().enumerate() {
                let c = counts(row);
                if c.trials == 0 {
                    continue;
                }
                let (p, fewer) = two_sided(b, c);
                calls[i].p_value = round(p, 1e6);
                tested.push((i, p, fewer));
            }
            tested.sort_by(|a, b| a.1.total_cmp(&b.1));
            let m = tested.len();
            let mut still = true;
            for (rank, &(i, p, fewer)) in tested.iter().enumerate() {
                still &= p <= alpha / (m - rank) as f64;
                calls[i].call = match (still, fewer) {
                    (true, true) if others[i].slower => Call::SpeedConfounded,
                    (true, true) => Call::Fixes,
                    (true, false) => Call::Worse,
                    (false, _) => Call::Inconclusive,
                };
                if calls[i].call == Call::Inconclusive {
                    calls[i].trials_to_decide =
                        trials_to_decide(b, counts(others[i]), alpha / m as f64);
                }
            }
        }
        let (headline, next_step) = say(baseline_name, baseline.as_ref(), &calls, confidence);
        Answer {
            confidence,
            sequential: auto.is_some(),
            baseline,
            cells: calls,
            headline,
            next_step,
        }
    }
}

/// The headline and the next step, from the calls.
fn say(
    baseline_name: &str,
    baseline: Option<&CellCall>,
    cells: &[CellCall],
    confidence: f64,
) -> (String, String) {
    let conf = pct(confidence);
    let sequential = cells.iter().any(|c| c.auto.is_some());
    let Some(b) = baseline else {
        return (
                format!(
                    "No answer: the baseline cell {} has no passing or failing trial to compare against.",
                    baseline_name
                ),
                "Make the baseline run (see its cell's error and stderr.log), then build again: its trials are run, the others reused.".into(),
            );
    };
    let vs = |c: &CellCall| {
        format!(
            "{}/{} failed vs {}/{} for the baseline {}",
            c.failed, c.trials, b.failed, b.trials, b.cell
        )
    };
    let named = |call: Call| cells.iter().filter(move |c| c.call == call);
    let comparisons = cells.iter().filter(|c| c.trials > 0).count();
    let mut fixes: Vec<&CellCall> = named(Call::Fixes).collect();
    fixes.sort_by(|x, y| x.interval.1.total_cmp(&y.interval.1));
    if let Some(best) = fixes.first() {
        let mut head = format!(
            "{} fixes it at {conf} confidence: {} (failure rate {}–{}).",
            best.what(),
            vs(best),
            pct(best.interval.0),
            pct(best.interval.1)
        );
        if fixes.len() > 1 {
            let rest: Vec<String> = fixes[1..].iter().map(|c| c.what()).collect();
            let _ = write!(head, " Also fixing it: {}.", rest.join(", "));
        }
        let next = match description_of(best) {
            Some((m, d)) => format!(
                "{m}: {d}. That is where the cause likely is; confirm the fix on the real job."
            ),
            None => format!(
                "Confirm {} on the real job; what it changes points at the cause.",
                best.what()
            ),
        };
        return (head, next);
    }
    if b.failed == 0 {
        let worse: Vec<&str> = named(Call::Worse).map(|c| c.cell.as_str()).collect();
        let failing: Vec<&str> = cells
            .iter()
            .filter(|c| c.failed > 0)
            .map(|c| c.cell.as_str())
            .collect();
        let mut head = format!(
            "The baseline {} did not fail in {} trial(s): there is no failure to fix in this run",
            b.cell, b.trials
        );
        if !worse.is_empty() {
            let _ = write!(head, "; worse than it at {conf}: {}", worse.join(", "));
        } else if !failing.is_empty() {
            let _ = write!(
                head,
                "; {} failed (not shown worse at {conf})",
                failing.join(", ")
            );
        }
        head.push('.');
        let next = match failing.first() {
                Some(c) => format!(
                    "Look at why {c} fails where the baseline does not (its logs, matrix.md's failure hints): what its mitigation changes is where to look."
                ),
                None => "Reproduce the failure first: more trials (`trials:`), the failing environment, or the job's real settings.".into(),
            };
        return (head, next);
    }
    let confounded: Vec<&str> = named(Call::SpeedConfounded)
        .map(|c| c.cell.as_str())
        .collect();
    let mut inconclusive: Vec<&CellCall> = named(Call::Inconclusive)
        .filter(|c| c.failed * b.trials < b.failed * c.trials)
        .collect();
    inconclusive.sort_by(|x, y| {
        let needed = |c: &CellCall| c.trials_to_decide.unwrap_or(u32::MAX);
        x.p_value
            .total_cmp(&y.p_value)
            .then(needed(x).cmp(&needed(y)))
    });
    let head = match inconclusive.first() {
            Some(c) => format!(
                "No cell is shown to fix it at {conf} confidence yet: closest is {}, {} (p = {:.3} before the correction for {comparisons} comparison(s)).",
                c.what(),
                vs(c),
                c.p_value
            ),
            None if !confounded.is_empty() => format!(
                "No fix: {} fail(s) less often but run slower, which can hide the failure rather than fix it.",
                confounded.join(", ")
            ),
            None => format!(
                "No cell fails less often than the baseline {} ({}/{} failed).",
                b.cell, b.failed, b.trials
            ),
        };
    let next = match inconclusive.first() {
            Some(c) => match c.trials_to_decide {
                Some(n) if sequential => format!(
                    "Raise max_trials_per_cell to {} or more to decide {} if the observed rates hold; the trials run so far are reused and the test continues where it stopped.",
                    n.next_power_of_two(),
                    c.cell
                ),
                Some(n) => format!(
                    "Run {n} trials per cell (`trials: {n}`, or `trials: auto` to run each cell only until it is decided) to decide {} if the observed rates hold; the trials run so far are reused.",
                    c.cell
                ),
                None => format!(
                    "{} trials cannot decide {} at these rates; run many more, or try other mitigations.",
                    c.trials, c.cell
                ),
            },
            None => "Try other mitigations (`aorta mitigations list`), or let `aorta agent` search them.".into(),
        };
    (head, next)
}

/// The built-in registry's one-line description of a cell's single mitigation.
fn description_of(c: &CellCall) -> Option<(String, String)> {
    let applied = c.applied();
    let [m] = applied.as_slice() else {
        return None;
    };
    let d = aorta_registry::Registry::builtin()
        .mitigation(m)
        .map(|m| m.description.clone())
        .filter(|d| !d.is_empty())?;
    Some((m.to_string(), d))
}

impl CellCall {
    /// The mitigations (and diagnostics) the cell really applies: not `none`.
    pub fn applied(&self) -> Vec<&str> {
        self.mitigations
            .iter()
            .map(String::as_str)
            .filter(|m| *m != "none")
            .collect()
    }

    /// The cell as the answer names it: what it applies, and the cell.
    pub fn what(&self) -> String {
        match self.applied().as_slice() {
            [] => self.cell.clone(),
            ms => format!("{} (cell {})", ms.join(" + "), self.cell),
        }
    }
}

impl Answer {
    /// The call of cell `name` (`None` for the baseline or an unknown cell).
    pub fn call_of(&self, name: &str) -> Option<&CellCall> {
        self.cells.iter().find(|c| c.cell == name)
    }

    /// The answer as terminal lines: the headline, then the next step.
    pub fn lines(&self) -> [String; 2] {
        [
            format!("Answer: {}", self.headline),
            format!("Next: {}", self.next_step),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_trials_cannot_decide_and_six_can() {
        let (b, c) = (Counts::new(3, 3), Counts::new(0, 3));
        // One-sided 1/20, two-sided 0.1: not at 95%.
        assert!((two_sided(b, c).0 - 0.1).abs() < 1e-9);
        assert_eq!(trials_to_decide(b, c, 0.05), Some(4));
        // Equal rates are never decided.
        assert_eq!(
            trials_to_decide(Counts::new(2, 4), Counts::new(2, 4), 0.05),
            None
        );
    }

    #[test]
    fn a_worse_cell_is_worse() {
        let (p, fewer) = two_sided(Counts::new(0, 10), Counts::new(9, 10));
        assert!(p < 0.01 && !fewer);
    }
}
