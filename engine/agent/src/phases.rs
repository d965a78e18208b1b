//! The two phases of a search: the baseline alone until it has failed, then each iteration's
//! candidates as one `trials: auto` build (with the matrix's speed-confound check on a
//! candidate that wins).

use crate::log::Event;
use crate::outcome::Outcome;
use crate::probe::{cell_name, counts};
use crate::search::{CandidateVerdict, Run, Stop, Tested};
use crate::stats::{BaselineStep, CandidateStep, Counts, NotFixReason};
use aorta_engine::TrialRecord;
use aorta_report::{confound, sequential};
use std::collections::BTreeMap;

impl Run<'_> {
    /// The baseline phase: double its trials until it has failed once.
    pub(crate) fn baseline(&mut self) -> Result<Counts, Stop> {
        let looks = self.cfg.design.baseline_looks.clone();
        for (k, &n) in looks.iter().enumerate() {
            self.trials.insert("none".into(), n);
            let by_m = self.build()?;
            let (c, errored) = counts(by_m.get("none").map(Vec::as_slice).unwrap_or_default());
            self.res.baseline = c;
            self.res.baseline_errored = errored;
            if c.trials == 0 {
                // Errored trials are no evidence: a command that cannot run is not a pass.
                return Err(Stop(
                    Outcome::Error,
                    Some(format!(
                        "none of the baseline's {errored} trial(s) passed or failed (verdict error): check that the command runs; see the trial logs in the run directory"
                    )),
                ));
            }
            let step = self.cfg.design.baseline_step(k, c);
            let interval = c.wilson(self.cfg.design.confidence());
            self.say(format!(
                "baseline: {} of {} trials failed ({:.0}%–{:.0}%)",
                c.failed,
                c.trials,
                interval.0 * 100.0,
                interval.1 * 100.0
            ));
            self.event(Event::BaselineLook {
                counts: c,
                interval,
                step,
            })?;
            match step {
                BaselineStep::More(_) => {}
                BaselineStep::Ready => return Ok(c),
                BaselineStep::Passes => return Err(Stop(Outcome::BaselinePass, None)),
                BaselineStep::Uninformative => {
                    return Err(Stop(
                        Outcome::PolicyStop,
                        Some(format!(
                            "the baseline failed only {} of {} trials: too rare to test candidates against",
                            c.failed, c.trials
                        )),
                    ))
                }
            }
        }
        Err(Stop(Outcome::Error, Some("no baseline look".into())))
    }

    /// One iteration's fresh candidates, tested together: a build with `trials: auto` (every
    /// earlier candidate's trials are store hits, so their decisions replay unchanged), each
    /// candidate run until the engine's sequential test decides it. The first fix, in the
    /// proposer's order, wins.
    pub(crate) fn candidates(&mut self, fresh: &[String]) -> Result<Option<Tested>, Stop> {
        for m in fresh {
            self.axis.push(m.clone());
            self.res.tested.push(Tested {
                mitigation: m.clone(),
                counts: Counts::default(),
                errored: 0,
                p_value: 1.0,
                verdict: CandidateVerdict::Undecided,
                confound: "n/a".into(),
            });
        }
        self.auto = true;
        let by_m = self.build()?;
        let design = self.cfg.design.sequential();
        let outcomes = |m: &str| {
            sequential::outcomes_of(
                by_m.get(m)
                    .into_iter()
                    .flatten()
                    .map(|r| (r.trial_index, r.verdict)),
            )
        };
        let base = outcomes("none");
        // Per-step times by trial, for the speed stop the build's scheduler applied.
        let steps = |m: &str| {
            sequential::steps_of(
                by_m.get(m)
                    .into_iter()
                    .flatten()
                    .map(|r| (r.trial_index, r.result.step_times_ms.as_slice())),
            )
        };
        let (base_steps, base_name) = (steps("none"), cell_name("none"));
        let threshold = self
            .look
            .as_deref()
            .map_or(f64::INFINITY, |r| r.confound.threshold);
        let mut used_of_baseline = 0;
        let mut winner = None;
        for m in fresh {
            let seen = outcomes(m);
            let (seen_steps, name) = (steps(m), cell_name(m));
            let pace = sequential::Pace {
                threshold,
                cell_name: &name,
                baseline_name: &base_name,
                cell: &seen_steps,
                baseline: &base_steps,
            };
            // The run is over for this look: an undecided candidate stopped where it is.
            let d = sequential::decide(&design, &base, &seen, Some(pace), true);
            used_of_baseline = used_of_baseline.max(d.trials);
            let c = sequential::counts(&seen, d.trials);
            let errored = d.trials.min(seen.len() as u32) - c.trials;
            let step = if c.trials == 0 && errored > 0 {
                // The mitigation keeps the command from giving any verdict: not a fix.
                CandidateStep::NotFix {
                    p_value: 1.0,
                    reason: NotFixReason::AllErrored,
                }
            } else {
                self.cfg.design.candidate_step(&d)
            };
            let confound = self.confound(&by_m, m);
            self.event(Event::CandidateLook {
                mitigation: m.clone(),
                counts: c,
                step,
            })?;
            let (verdict, why) = match step {
                CandidateStep::Fix { .. }
                    if matches!(confound.0, aorta_report::Tag::Speed { .. }) =>
                {
                    (CandidateVerdict::SpeedConfound, "")
                }
                CandidateStep::NotFix {
                    reason: NotFixReason::Slower,
                    ..
                } => (
                    CandidateVerdict::SpeedConfound,
                    NotFixReason::Slower.describe(),
                ),
                CandidateStep::Fix { .. } => (CandidateVerdict::Fix, ""),
                CandidateStep::NotFix { reason, .. } => {
                    (CandidateVerdict::NotFix, reason.describe())
                }
                CandidateStep::More { .. } => (CandidateVerdict::Undecided, ""),
            };
            let t = self
                .res
                .tested
                .iter_mut()
                .find(|t| t.mitigation == *m)
                .expect("pushed above");
            t.counts = c;
            t.errored = errored;
            t.p_value = d.p_fewer;
            t.verdict = verdict;
            t.confound = confound.0.to_string();
            let t = t.clone();
            self.say(format!(
                "{m}: {} of {} trials failed, p = {:.4}: {}{}{} (confound: {})",
                c.failed,
                c.trials,
                t.p_value,
                verdict.as_str(),
                if why.is_empty() { "" } else { ": " },
                why,
                t.confound
            ));
            self.event(Event::CandidateVerdict {
                mitigation: m.clone(),
                verdict: verdict.as_str().into(),
                confound: t.confound.clone(),
            })?;
            if verdict == CandidateVerdict::Fix && winner.is_none() {
                winner = Some(t);
            }
        }
        // The baseline as the decisions used it (its first n trials, n the furthest look).
        let n = used_of_baseline.max(self.res.baseline.trials + self.res.baseline_errored);
        let b = sequential::counts(&base, n);
        self.res.baseline = b;
        self.res.baseline_errored = n.min(base.len() as u32) - b.trials;
        // Every distinct trial the search used: the baseline's and each candidate's, up to
        // where its test stopped (store hits past that point are not the search's).
        self.res.trials_used = u64::from(n)
            + self
                .res
                .tested
                .iter()
                .map(|t| u64::from(t.counts.trials + t.errored))
                .sum::<u64>();
        Ok(winner)
    }

    /// The matrix's speed-confound verdict of `<m>-none` against `none-none`.
    fn confound(
        &self,
        by_m: &BTreeMap<String, Vec<TrialRecord>>,
        m: &str,
    ) -> (aorta_report::Tag, Option<f64>) {
        // Rebuild the cells' aggregates exactly as the matrix does.
        let Some(recipe) = self.look.as_deref() else {
            return (aorta_report::Tag::NotApplicable, None);
        };
        let stats = |name: &str| {
            let cell = recipe.cells.iter().find(|c| c.name == cell_name(name))?;
            Some(aorta_report::CellStats::aggregate(
                cell,
                recipe,
                by_m.get(name)?,
                None,
            ))
        };
        match (stats("none"), stats(m)) {
            (Some(b), Some(c)) => {
                let v = confound::classify(&c, Some(&b), recipe.confound.threshold);
                (v.tag, v.ratio)
            }
            _ => (aorta_report::Tag::NotApplicable, None),
        }
    }
}
