//! The statistics of the search, pure and deterministic (no I/O, no randomness), so the agent
//! and the error-rate simulation (`tests/sim/mod.rs`) drive the same rules.
//!
//! **The question** for each candidate mitigation: is its failure rate below the baseline's?
//! H0: it is not (q ≥ p). The agent declares a fix only when H0 is rejected.
//!
//! **The test**: Fisher's exact test, one-sided, on the 2×2 table (baseline failed/passed,
//! candidate failed/passed). It conditions on the total number of failures, so it is exact
//! for any sample sizes and needs no large-sample approximation (the counts here are small).
//!
//! **Sequential looks and error control**: a candidate is tested at looks of 4, 8, 16, …
//! trials up to a cap; look k may reject at level α_k, with Σ_k α_k = α_c, spending more of
//! the budget at later looks (α_k ∝ trials at look k). Across candidates, α_c = α / M where M
//! is the number of candidates the run may test. By the union bound the probability that a
//! run declares *any* non-fix a fix is at most α = 1 − confidence for a baseline of fixed
//! size, whatever the candidates' stopping decisions; futility stops only remove chances to
//! reject, so they cannot raise it. The baseline's size is adaptive (below), which the bound
//! does not cover, so `tests/simulation.rs` measures the whole procedure's rate against α.
//!
//! **The baseline** is estimated first, doubling its trials (8, 16, … up to a cap) until it
//! is informative: until a candidate that never failed could reach significance by its
//! second-to-last look. A baseline with no failure at the cap is `baseline_pass`.

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
        }
    }
}

fn doubling(first: u32, cap: u32) -> Vec<u32> {
    let mut looks = Vec::new();
    let mut n = first.min(cap).max(1);
    loop {
        looks.push(n);
        if n >= cap {
            return looks;
        }
        n = (n * 2).min(cap);
    }
}

impl Design {
    /// `confidence` in (0, 1); `candidates` ≥ 1; caps ≥ 1.
    pub fn new(confidence: f64, candidates: u32, max_baseline: u32, max_candidate: u32) -> Design {
        Design {
            alpha: 1.0 - confidence,
            candidates: candidates.max(1),
            baseline_looks: doubling(8, max_baseline),
            candidate_looks: doubling(4, max_candidate),
        }
    }

    pub fn confidence(&self) -> f64 {
        1.0 - self.alpha
    }

    /// α / M: one candidate's share of the error budget.
    pub fn alpha_per_candidate(&self) -> f64 {
        self.alpha / f64::from(self.candidates)
    }

    /// The level of look `k` (alpha spending proportional to the look's trial count).
    pub fn alpha_at(&self, k: usize) -> f64 {
        let total: u32 = self.candidate_looks.iter().sum();
        let n = self.candidate_looks.get(k).copied().unwrap_or(0);
        self.alpha_per_candidate() * f64::from(n) / f64::from(total)
    }

    pub fn max_candidate_trials(&self) -> u32 {
        self.candidate_looks.last().copied().unwrap_or(1)
    }

    /// After the baseline's look `k` (its counts so far).
    pub fn baseline_step(&self, k: usize, baseline: Counts) -> BaselineStep {
        let last = k + 1 >= self.baseline_looks.len();
        // Informative: a candidate that never failed would be a fix by its second-to-last look.
        let probe_look = self.candidate_looks.len().saturating_sub(2);
        let perfect = Counts::new(0, self.candidate_looks[probe_look]);
        if baseline.failed > 0 && fisher_less(baseline, perfect) <= self.alpha_at(probe_look) {
            return BaselineStep::Ready;
        }
        if !last {
            return BaselineStep::More(self.baseline_looks[k + 1]);
        }
        if baseline.failed == 0 {
            return BaselineStep::Passes;
        }
        let best = Counts::new(0, self.max_candidate_trials());
        if fisher_less(baseline, best) <= self.alpha_at(self.candidate_looks.len() - 1) {
            BaselineStep::Ready
        } else {
            BaselineStep::Uninformative
        }
    }

    /// After a candidate's look `k` (its counts so far) against the fixed baseline.
    pub fn candidate_step(&self, k: usize, baseline: Counts, candidate: Counts) -> CandidateStep {
        let p_value = fisher_less(baseline, candidate);
        if p_value <= self.alpha_at(k) {
            return CandidateStep::Fix { p_value };
        }
        let last = self.candidate_looks.len() - 1;
        if k >= last {
            return CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::CapReached,
            };
        }
        if candidate.trials > 0 && candidate.rate() >= baseline.rate() {
            return CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::NoReduction,
            };
        }
        // Curtailment: the most favourable future is every remaining trial passing.
        let best = Counts::new(
            candidate.failed,
            self.max_candidate_trials().max(candidate.trials),
        );
        if fisher_less(baseline, best) > self.alpha_at(last) {
            return CandidateStep::NotFix {
                p_value,
                reason: NotFixReason::CannotReach,
            };
        }
        CandidateStep::More {
            p_value,
            next: self.candidate_looks[k + 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_error_budget_is_spent_exactly() {
        let d = Design::new(0.95, 3, 64, 32);
        assert_eq!(d.candidate_looks, [4, 8, 16, 32]);
        assert_eq!(d.baseline_looks, [8, 16, 32, 64]);
        let spent: f64 = (0..d.candidate_looks.len()).map(|k| d.alpha_at(k)).sum();
        assert!((spent - 0.05 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn an_always_failing_baseline_is_ready_at_once_and_a_clean_candidate_wins_early() {
        let d = Design::new(0.95, 2, 64, 32);
        assert_eq!(d.baseline_step(0, Counts::new(8, 8)), BaselineStep::Ready);
        assert!(matches!(
            d.candidate_step(1, Counts::new(8, 8), Counts::new(0, 8)),
            CandidateStep::Fix { .. }
        ));
        // The same candidate failing as often as the baseline stops at the first look.
        assert!(matches!(
            d.candidate_step(0, Counts::new(8, 8), Counts::new(4, 4)),
            CandidateStep::NotFix {
                reason: NotFixReason::NoReduction,
                ..
            }
        ));
    }

    #[test]
    fn a_baseline_that_never_fails_passes_only_at_the_cap() {
        let d = Design::new(0.95, 2, 64, 32);
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
        let d = Design::new(0.95, 1, 1, 1);
        assert!(matches!(
            d.candidate_step(0, Counts::new(1, 1), Counts::new(0, 1)),
            CandidateStep::NotFix { .. }
        ));
    }

    proptest! {
        #[test]
        fn every_look_decides_something_sane(
            k in 0usize..4, fb in 0u32..64, fc in 0u32..32, m in 1u32..25
        ) {
            let d = Design::new(0.95, m, 64, 32);
            let b = Counts::new(fb, 64);
            let c = Counts::new(fc.min(d.candidate_looks[k]), d.candidate_looks[k]);
            match d.candidate_step(k, b, c) {
                CandidateStep::Fix { p_value } => prop_assert!(p_value <= d.alpha_per_candidate()),
                CandidateStep::More { next, .. } => prop_assert_eq!(next, d.candidate_looks[k + 1]),
                CandidateStep::NotFix { .. } => {}
            }
        }
    }
}
