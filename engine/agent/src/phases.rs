//! The two phases of a search, look by look: the baseline estimate, and the sequential test
//! of one candidate (with the matrix's speed-confound check on a candidate that wins).

use crate::log::Event;
use crate::outcome::Outcome;
use crate::probe::{cell_name, counts};
use crate::search::{CandidateVerdict, Run, Stop, Tested};
use crate::stats::{BaselineStep, CandidateStep, Counts, NotFixReason};
use aorta_engine::TrialRecord;
use aorta_report::confound;
use std::collections::BTreeMap;

impl Run<'_> {
    /// The baseline phase: double its trials until it is informative.
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
                            "the baseline failed only {} of {} trials: too rare for any candidate to reach the confidence within the trial caps; raise --max-baseline-trials / --max-trials-per-cell",
                            c.failed, c.trials
                        )),
                    ))
                }
            }
        }
        Err(Stop(Outcome::Error, Some("no baseline look".into())))
    }

    /// The sequential test of one candidate against the fixed baseline.
    pub(crate) fn candidate(&mut self, m: &str, baseline: Counts) -> Result<Tested, Stop> {
        self.axis.push(m.to_string());
        self.res.tested.push(Tested {
            mitigation: m.to_string(),
            counts: Counts::default(),
            errored: 0,
            p_value: 1.0,
            verdict: CandidateVerdict::Undecided,
            confound: "n/a".into(),
        });
        let looks = self.cfg.design.candidate_looks.clone();
        for (k, &n) in looks.iter().enumerate() {
            self.trials.insert(m.to_string(), n);
            let by_m = self.build()?;
            let recs = by_m.get(m).map(Vec::as_slice).unwrap_or_default();
            let (c, errored) = counts(recs);
            let step = if c.trials == 0 && errored > 0 {
                // The mitigation keeps the command from giving any verdict: not a fix.
                CandidateStep::NotFix {
                    p_value: 1.0,
                    reason: NotFixReason::AllErrored,
                }
            } else {
                self.cfg.design.candidate_step(k, baseline, c)
            };
            let confound = self.confound(&by_m, m);
            let t = self.res.tested.last_mut().expect("pushed above");
            t.counts = c;
            t.errored = errored;
            t.confound = confound.0.to_string();
            self.event(Event::CandidateLook {
                mitigation: m.to_string(),
                counts: c,
                step,
            })?;
            let mut why = "";
            let verdict = match step {
                CandidateStep::More { p_value, .. } => {
                    self.res.tested.last_mut().expect("pushed").p_value = p_value;
                    continue;
                }
                CandidateStep::Fix { p_value } => {
                    self.res.tested.last_mut().expect("pushed").p_value = p_value;
                    if matches!(confound.0, aorta_report::Tag::Speed { .. }) {
                        CandidateVerdict::SpeedConfound
                    } else {
                        CandidateVerdict::Fix
                    }
                }
                CandidateStep::NotFix { p_value, reason } => {
                    self.res.tested.last_mut().expect("pushed").p_value = p_value;
                    why = reason.describe();
                    CandidateVerdict::NotFix
                }
            };
            let t = self.res.tested.last_mut().expect("pushed");
            t.verdict = verdict;
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
                mitigation: m.to_string(),
                verdict: verdict.as_str().into(),
                confound: t.confound.clone(),
            })?;
            return Ok(t);
        }
        Err(Stop(Outcome::Error, Some("no candidate look".into())))
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
