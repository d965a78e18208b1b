//! The statistics of the search, pure and deterministic (no I/O, no randomness), so the agent
//! and the error-rate simulation (`tests/sim/mod.rs`) drive the same rules.
//!
//! **The question** for each candidate mitigation: is its failure rate below the baseline's?
//! The agent declares a fix only when the engine's sequential test says so.
//!
//! **The test** is `trials: auto`'s ([`aorta_report::sequential`], one implementation for
//! builds and the agent): Fisher's exact test at looks of 4, 8, 16, … trials up to the cap, on
//! the first n trials of the candidate and of the baseline, the error rate α = 1 − confidence
//! spread over the M candidates the run may test (not only those it gets to), both directions
//! and the looks. By the union bound the chance that a run declares *any* non-fix a fix is at
//! most α; `tests/simulation.rs` measures it. The baseline runs alongside each candidate, as
//! far as that candidate needs it (trials of an earlier look are store hits).
//!
//! **The baseline** is first run alone (8, 16, … up to its cap) only until it has failed often
//! enough that a candidate that never fails could be shown a fix by the cap: a failure that
//! never shows is `baseline_pass`, one too rare to test against is `policy_stop`, and testing
//! candidates against either would only burn trials.

use aorta_report::sequential::{self, Finding, Stop};
use serde::{Deserialize, Serialize};

pub use aorta_report::evidence::{fisher_less, probit, Counts};

/// The stopping rules and error budget of one agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// 1 − confidence: the bound on declaring any non-fix a fix in one run.
    pub alpha: f64,
    /// How many candidates the run may test (M): each gets α / M.
    pub candidates: u32,
    /// Baseline trial counts at which the baseline is re-assessed (8, 16, … cap).
    pub baseline_looks: Vec<u32>,
    /// Candidate trial counts at which the test is run (4, 8, … cap).
    pub candidate_looks: Vec<u32>,
}

/// What to do with the baseline after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineStep {
    /// Run it to this many trials and look again.
    More(u32),
    /// Informative enough: test candidates against it.
    Ready,
    /// The cap was reached and it never failed.
    Passes,
    /// The cap was reached with too few failures for any candidate to reach significance:
    /// the search would only burn trials.
    Uninformative,
}

/// What to do with a candidate after a look.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateStep {
    /// Its failure rate is below the baseline's at the run's confidence.
    Fix { p_value: f64 },
    /// Stop testing it: no evidence that it helps (why is in `reason`).
    NotFix { p_value: f64, reason: NotFixReason },
    /// Run it to this many trials and look again.
    More { p_value: f64, next: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotFixReason {
    /// It fails at least as often as the baseline did.
    NoReduction,
    /// Even if every remaining trial passed, the test could not reject at the cap.
    CannotReach,
    /// The last look did not reject.
    CapReached,
    /// Every trial of the look errored: the mitigation stops the command from running.
    AllErrored,
    /// It failed less often, but ran slower than the confound threshold: it stopped there
    /// (`trials: auto`'s speed stop), as a speed confound.
    Slower,
}

impl NotFixReason {
    pub fn describe(self) -> &'static str {
        match self {
            NotFixReason::NoReduction => "fails at least as often as the baseline",
            NotFixReason::CannotReach => {
                "cannot reach the confidence within the trial cap even if every further trial passes"
            }
            NotFixReason::CapReached => "no significant reduction at the trial cap",
            NotFixReason::AllErrored => "every trial errored (no pass or fail verdict)",
            NotFixReason::Slower => {
                "fails less often, but only while running slower than the confound threshold"
            }
        }
    }
}

impl Design {
    /// `confidence` in (0, 1); `candidates` ≥ 1; caps ≥ 1 (the candidate cap at least 4).
    pub fn new(confidence: f64, candidates: u32, max_baseline: u32, max_candidate: u32) -> Design {
        Design {
            alpha: 1.0 - confidence,
            candidates: candidates.max(1),
            baseline_looks: sequential::doubling(8, max_baseline),
            candidate_looks: sequential::doubling(sequential::FIRST_LOOK, max_candidate),
        }
    }

    pub fn confidence(&self) -> f64 {
        1.0 - self.alpha
    }

    pub fn max_candidate_trials(&self) -> u32 {
        self.candidate_looks.last().copied().unwrap_or(1)
    }

    /// The engine's sequential test for this run: M = every candidate it may test.
    pub fn sequential(&self) -> sequential::Design {
        sequential::Design::new(
            self.confidence(),
            self.candidates,
            self.max_candidate_trials(),
        )
    }

    /// What `trials: auto` gets for this run's candidate looks.
    pub fn auto(&self) -> aorta_recipe::AutoTrials {
        aorta_recipe::AutoTrials {
            max_trials_per_cell: self.max_candidate_trials(),
            confidence: self.confidence(),
            max_walltime_sec: None,
            max_gpu_hours: None,
            comparisons: Some(self.candidates),
        }
    }

    /// After the baseline's look `k` (its counts so far): ready once it has failed often
    /// enough that a candidate that never fails could be shown a fix by the cap, were the
    /// baseline's rate at the top of its interval ([`sequential::TREND_CONFIDENCE`]).
    pub fn baseline_step(&self, k: usize, baseline: Counts) -> BaselineStep {
        let more = self.baseline_looks.get(k + 1).copied();
        if baseline.failed == 0 {
            return more.map_or(BaselineStep::Passes, BaselineStep::More);
        }
        let s = self.sequential();
        let cap = s.cap();
        let top = baseline.wilson(sequential::TREND_CONFIDENCE).1;
        let at_cap = Counts::new((top * f64::from(cap)).round() as u32, cap);
        if fisher_less(at_cap, Counts::new(0, cap)) <= s.alpha_at(s.looks.len() - 1) {
            return BaselineStep::Ready;
        }
        more.map_or(BaselineStep::Uninformative, BaselineStep::More)
    }

    /// A candidate's sequential decision as the log records it.
    pub fn candidate_step(&self, d: &sequential::Decision) -> CandidateStep {
        let p_value = d.p_fewer;
        match (d.finding, d.stop) {
            (_, None) => CandidateStep::More {
                p_value,
                next: d.trials,
            },
            (Finding::Fewer, Some(_)) => CandidateStep::Fix { p_value },
            (Finding::More | Finding::NoDifferent, Some(_)) => CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::NoReduction,
            },
            (Finding::Undecided, Some(Stop::Cap)) => CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::CapReached,
            },
            (Finding::Undecided, Some(Stop::Slower)) => CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::Slower,
            },
            (Finding::Undecided, Some(_)) => CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::CannotReach,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_is_ready_once_it_failed_and_passes_at_its_cap_without() {
        let d = Design::new(0.95, 2, 64, 32);
        assert_eq!(d.baseline_looks, [8, 16, 32, 64]);
        assert_eq!(d.candidate_looks, [4, 8, 16, 32]);
        assert_eq!(d.baseline_step(0, Counts::new(1, 8)), BaselineStep::Ready);
        // One failure in 64 is too rare for any candidate to be shown a fix by the cap.
        assert_eq!(
            d.baseline_step(3, Counts::new(1, 64)),
            BaselineStep::Uninformative
        );
        assert_eq!(
            d.baseline_step(2, Counts::new(1, 32)),
            BaselineStep::More(64)
        );
        assert_eq!(
            d.baseline_step(0, Counts::new(0, 8)),
            BaselineStep::More(16)
        );
        assert_eq!(d.baseline_step(3, Counts::new(0, 64)), BaselineStep::Passes);
    }

    #[test]
    fn one_lucky_pass_is_not_evidence() {
        // AORTA's rule would converge on this: the baseline failed its one trial, the
        // candidate passed its one trial.
        let d = Design::new(0.95, 1, 8, 4).sequential();
        let x = sequential::decide(&d, &[Some(true)], &[Some(false)], None, true);
        assert_ne!(x.finding, Finding::Fewer);
    }

    #[test]
    fn the_run_spreads_alpha_over_every_candidate_it_may_test() {
        let d = Design::new(0.95, 36, 64, 32);
        assert_eq!(d.sequential().comparisons, 36);
        assert_eq!(d.auto().comparisons, Some(36));
        // An always-failing baseline and a clean candidate: a fix at 8 trials even among 36.
        let s = d.sequential();
        let fix = sequential::decide(&s, &[Some(true); 8], &[Some(false); 8], None, false);
        assert_eq!((fix.finding, fix.trials), (Finding::Fewer, 8));
        assert!(matches!(d.candidate_step(&fix), CandidateStep::Fix { .. }));
    }
}
