//! One probe's decision: does a configuration fail like the bad endpoint or pass like the good
//! one? Both endpoints run beside every probe (their trials are store hits after the first
//! look), and the probe is compared with each on the first n trials of all three at the looks
//! of [`aorta_report::sequential::Design`] (4, 8, 16, … the cap), with its alpha spending:
//!
//! - **fails** when Fisher's one-sided test says it fails more often than the good endpoint at
//!   the look's level, or — only while the good endpoint has run to the cap and never failed
//!   in any of its trials — as soon as it fails once (a configuration that fails at all is not
//!   the good one: the rule assumes the good configuration cannot fail);
//! - **passes** when the test says it fails less often than the bad endpoint;
//! - **undecided** at the cap.
//!
//! Each direction may err with probability at most α/2 per probe (the design's bound with one
//! comparison); the answer's confidence sums the p-values of the probes it rests on.

use aorta_report::evidence::{fisher_less, Counts};
use aorta_report::sequential::{counts, Design, Outcome};
use serde::Serialize;

/// Where configurations' trials come from: an engine build, or a simulation.
pub trait Trials {
    type Config: Clone + Ord + std::fmt::Debug;
    type Error;
    /// The first `n` outcomes of each `(config, n)`, running whatever is not stored yet.
    fn first(&mut self, wanted: &[(Self::Config, u32)]) -> Result<Vec<Vec<Outcome>>, Self::Error>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    Fails,
    Passes,
    Undecided,
}

impl Call {
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Fails => "fails",
            Call::Passes => "passes",
            Call::Undecided => "undecided",
        }
    }
}

/// How a probe was decided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Verdict {
    pub call: Call,
    /// The probe's failures among the trials the call rests on.
    pub counts: Counts,
    /// The endpoints' on the same number of trials.
    pub good: Counts,
    pub bad: Counts,
    /// The one-sided p-value behind the call: against the good endpoint for `fails` (0 when
    /// called by the never-failing good endpoint's rule), against the bad one for `passes`.
    pub p: f64,
    /// Called because the good endpoint never failed and the probe did.
    pub good_never_failed: bool,
}

/// The endpoints and the design every probe of one search is judged with.
pub struct Judge<C> {
    pub design: Design,
    pub good: C,
    pub bad: C,
    /// The most trials of the good endpoint seen, and whether any failed.
    good_seen: u32,
    good_failed: bool,
}

/// Why a search cannot start.
#[derive(Debug, Clone, PartialEq)]
pub enum EndpointProblem {
    /// The bad endpoint never failed.
    BadNeverFails { good: Counts, bad: Counts },
    /// The good endpoint does not fail less often than the bad one at the confidence.
    NoDifference { good: Counts, bad: Counts },
}

impl<C: Clone + Ord + std::fmt::Debug> Judge<C> {
    pub fn new(confidence: f64, cap: u32, good: C, bad: C) -> Judge<C> {
        Judge {
            design: Design::new(confidence, 1, cap),
            good,
            bad,
            good_seen: 0,
            good_failed: false,
        }
    }

    /// Whether the good endpoint has run to the cap and never failed in any trial seen so far
    /// (0 of 64 puts its rate below 4.6% at 95%; a rarer failure is the rule's assumption).
    pub fn good_never_failed(&self) -> bool {
        self.good_seen >= self.design.cap() && !self.good_failed
    }

    fn note_good(&mut self, good: &[Outcome]) {
        self.good_seen = self.good_seen.max(good.len() as u32);
        self.good_failed |= good.contains(&Some(true));
    }

    /// Runs both endpoints until the good one is shown to fail less often than the bad one.
    pub fn check_endpoints<T: Trials<Config = C>>(
        &mut self,
        trials: &mut T,
    ) -> Result<Result<(Counts, Counts), EndpointProblem>, T::Error> {
        let mut last = (Counts::default(), Counts::default());
        for (k, &n) in self.design.looks.clone().iter().enumerate() {
            let o = trials.first(&[(self.good.clone(), n), (self.bad.clone(), n)])?;
            self.note_good(&o[0]);
            let (g, b) = (counts(&o[0], n), counts(&o[1], n));
            last = (g, b);
            if b.trials == 0 {
                // Every trial of the bad end errored: more looks only run it again.
                break;
            }
            if fisher_less(b, g) <= self.design.alpha_at(k) {
                if g.failed == 0 {
                    // Is it a good end that never fails? Only the cap's worth of trials says.
                    let o = trials.first(&[(self.good.clone(), self.design.cap())])?;
                    self.note_good(&o[0]);
                }
                return Ok(Ok((g, b)));
            }
        }
        let (good, bad) = last;
        Ok(Err(if bad.failed == 0 {
            EndpointProblem::BadNeverFails { good, bad }
        } else {
            EndpointProblem::NoDifference { good, bad }
        }))
    }

    /// Decides one configuration (see the module's doc).
    pub fn call<T: Trials<Config = C>>(
        &mut self,
        trials: &mut T,
        c: &C,
    ) -> Result<Verdict, T::Error> {
        self.call_from(trials, c, 0)
    }

    /// As [`Judge::call`], looking only at looks of at least `min_trials` (a re-check: more
    /// trials than the first decision rested on; the skipped looks' levels go unspent).
    pub fn call_from<T: Trials<Config = C>>(
        &mut self,
        trials: &mut T,
        c: &C,
        min_trials: u32,
    ) -> Result<Verdict, T::Error> {
        let looks = self.design.looks.clone();
        let last = looks.len() - 1;
        for (k, &n) in looks.iter().enumerate() {
            if n < min_trials && k < last {
                continue;
            }
            let o = trials.first(&[
                (c.clone(), n),
                (self.good.clone(), n),
                (self.bad.clone(), n),
            ])?;
            self.note_good(&o[1]);
            let (cc, g, b) = (counts(&o[0], n), counts(&o[1], n), counts(&o[2], n));
            let level = self.design.alpha_at(k);
            let verdict = |call, p, rule| Verdict {
                call,
                counts: cc,
                good: g,
                bad: b,
                p,
                good_never_failed: rule,
            };
            if cc.trials == 0 {
                // Every trial errored (an error is no evidence and is never reused): stop.
                return Ok(verdict(Call::Undecided, 1.0, false));
            }
            let p_more = fisher_less(cc, g);
            if cc.failed > 0 && self.good_never_failed() {
                return Ok(verdict(Call::Fails, 0.0, true));
            }
            if p_more <= level {
                return Ok(verdict(Call::Fails, p_more, false));
            }
            let p_fewer = fisher_less(b, cc);
            if p_fewer <= level {
                return Ok(verdict(Call::Passes, p_fewer, false));
            }
            if k == last {
                return Ok(verdict(Call::Undecided, p_fewer.min(p_more), false));
            }
        }
        unreachable!("the last look always returns")
    }
}
