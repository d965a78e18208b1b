//! What the three commands share: a search over the engine ([`Search`]: its two ends checked
//! first, every probe a [`Judge`] call recorded as a row, ddmin and the calls a ddmin answer
//! rests on) and what it found ([`Found`]), which the terminal, `--json` and the reports render.
//! The commands: `bisect_env`, `bisect_range`, `reduce`.

use crate::ddmin::{ddmin, Outcome};
use crate::judge::{Call, EndpointProblem, Judge, Verdict};
use crate::probe::{Config, EngineTrials, Work};
use crate::sources::{Difference, NotCompared, Untestable};
use aorta_engine::EngineError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The statistics' settings, shared by the three commands.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Settings {
    /// Each probe's call is wrong with probability at most 1 − confidence.
    pub confidence: f64,
    /// The most trials one configuration runs (the last look).
    pub cap: u32,
}

/// One probe as the report lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRow {
    /// `endpoint`, `search`, `boundary` or `minimality`.
    pub role: &'static str,
    /// How far the search had narrowed when it made this probe (ddmin: the reductions so far;
    /// range: 0): the tree's indentation.
    pub depth: u32,
    /// What was applied: `{A=1, B=2}`, a point's line, a sub-stack.
    pub what: String,
    pub cell: String,
    #[serde(flatten)]
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The answer is shown at the reported confidence.
    Found,
    /// A call the answer needs stayed undecided at the cap: the answer is partial.
    Undecided,
    /// The two ends do not differ: there is nothing to search.
    EndsDoNotDiffer,
}

/// What a search found; the terminal, `--json` and bisect.md render it.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    pub command: &'static str,
    pub status: Status,
    /// The verdict in one sentence, first in the terminal.
    pub answer: String,
    /// The culprit: variables with their bad values, the first bad point, the mitigations.
    pub result: Vec<String>,
    /// 1 − the sum of the p-values of the calls the answer rests on.
    pub confidence: Option<f64>,
    /// The size of the search space (differences, points, mitigations).
    pub size: usize,
    /// Configurations the search itself probed (the two ends not counted).
    pub search_probes: usize,
    /// The algorithm's bound on `search_probes` (ddmin's (n²+7n)/2; ⌈log2 n⌉ + 3 points).
    pub bound: usize,
    pub probes: Vec<ProbeRow>,
    pub untestable: Vec<Untestable>,
    /// Fields only one kind of file records (`bisect env` with AORTA's env.json): said, not
    /// compared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_compared: Vec<NotCompared>,
    pub settings: Settings,
    /// Whether the good end never failed (then one failure calls a probe bad).
    pub good_never_failed: bool,
    pub work: Work,
    pub run_dir: Option<PathBuf>,
}

/// `{A=1, B=2}`; past six entries the rest as a count, so a probe stays one line.
pub(crate) fn show(env: &BTreeMap<String, String>) -> String {
    let mut parts: Vec<String> = env
        .iter()
        .take(6)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if env.len() > 6 {
        parts.push(format!("… +{}", env.len() - 6));
    }
    format!("{{{}}}", parts.join(", "))
}

pub(crate) fn diff_str(d: &Difference) -> String {
    match &d.bad {
        Some(v) => format!("{}={v}", d.var),
        None => format!("{} unset", d.var),
    }
}

fn ends_problem(p: EndpointProblem, good: &str, bad: &str) -> String {
    match p {
        EndpointProblem::BadNeverFails { bad: b, .. } if b.trials == 0 => format!(
            "every trial of {bad} errored (no pass or fail): look at the trials' logs in the run directory"
        ),
        EndpointProblem::BadNeverFails { bad: b, .. } => {
            format!("{bad} never failed in {} trial(s): there is no failure to explain", b.trials)
        }
        EndpointProblem::NoDifference { good: g, bad: b } => format!(
            "{good} failed {} of {} and {bad} {} of {}: not different at the confidence, so no change can be blamed",
            g.failed, g.trials, b.failed, b.trials
        ),
    }
}

pub(crate) struct Search<'s, 'a> {
    pub(crate) trials: &'s mut EngineTrials<'a>,
    pub(crate) judge: Judge<Config>,
    pub(crate) rows: Vec<ProbeRow>,
    /// The ends' p-value (the good end fails less often than the bad one): every answer rests
    /// on it, so it is in every confidence.
    pub(crate) ends_p: f64,
    /// The reductions ddmin has made so far.
    pub(crate) depth: u32,
}

impl Search<'_, '_> {
    pub(crate) fn call(
        &mut self,
        role: &'static str,
        what: String,
        c: &Config,
    ) -> Result<Verdict, EngineError> {
        let v = self.judge.call(self.trials, c)?;
        self.rows.push(ProbeRow {
            role,
            depth: self.depth,
            what,
            cell: c.name(),
            verdict: v,
        });
        Ok(v)
    }

    /// The ends' check, as two rows; an error string when they do not differ.
    pub(crate) fn ends(&mut self, good: &str, bad: &str) -> Result<Option<String>, EngineError> {
        let checked = self.judge.check_endpoints(self.trials)?;
        let (g, b) = match &checked {
            Ok(c) => *c,
            Err(
                EndpointProblem::BadNeverFails { good, bad }
                | EndpointProblem::NoDifference { good, bad },
            ) => (*good, *bad),
        };
        for (what, c, counts, call) in [
            (good, self.judge.good.clone(), g, Call::Passes),
            (bad, self.judge.bad.clone(), b, Call::Fails),
        ] {
            self.rows.push(ProbeRow {
                depth: 0,
                role: "endpoint",
                what: what.to_string(),
                cell: c.name(),
                verdict: Verdict {
                    call: if checked.is_ok() {
                        call
                    } else {
                        Call::Undecided
                    },
                    counts,
                    good: g,
                    bad: b,
                    p: aorta_report::evidence::fisher_less(b, g),
                    good_never_failed: false,
                },
            });
        }
        self.ends_p = aorta_report::evidence::fisher_less(b, g);
        Ok(checked.err().map(|p| ends_problem(p, good, bad)))
    }

    /// ddmin over `n` changes; `hit` says which call shows the property.
    pub(crate) fn ddmin(
        &mut self,
        n: usize,
        hit: Call,
        config: &dyn Fn(&[usize]) -> Config,
        what: &dyn Fn(&[usize]) -> String,
    ) -> Result<(Vec<usize>, usize), EngineError> {
        let m = ddmin(n, |s| {
            let v = self.call("search", what(s), &config(s))?;
            Ok::<_, EngineError>(match v.call {
                c if c == hit => {
                    // ddmin narrows to the first subset that shows the property.
                    self.depth += 1;
                    Outcome::Hit
                }
                Call::Undecided => Outcome::Undecided,
                _ => Outcome::Miss,
            })
        })?;
        self.depth = 0;
        Ok((m.subset, m.probes))
    }

    /// The calls a ddmin answer rests on, made again (store hits) as `minimality` rows: the set
    /// itself shows `hit`, each removal of one element does not. The confidence, 1 − the sum of
    /// their p-values and the ends'; None when one of them is not as needed (undecided).
    pub(crate) fn minimality(
        &mut self,
        set: &[usize],
        n: usize,
        hit: Call,
        config: &dyn Fn(&[usize]) -> Config,
        what: &dyn Fn(&[usize]) -> String,
    ) -> Result<Option<f64>, EngineError> {
        let mut p = self.ends_p;
        let mut shown = true;
        if set.len() < n {
            let v = self.call("minimality", what(set), &config(set))?;
            shown &= v.call == hit;
            p += v.p;
        }
        let miss = if hit == Call::Fails {
            Call::Passes
        } else {
            Call::Fails
        };
        for i in 0..set.len() {
            let mut less = set.to_vec();
            less.remove(i);
            if less.is_empty() {
                continue;
            }
            let v = self.call("minimality", what(&less), &config(&less))?;
            shown &= v.call == miss;
            p += v.p;
        }
        Ok(shown.then(|| (1.0 - p).max(0.0)))
    }
}

/// What a command knows before searching.
pub(crate) struct Head {
    pub(crate) command: &'static str,
    pub(crate) size: usize,
    pub(crate) bound: usize,
    pub(crate) untestable: Vec<Untestable>,
    pub(crate) not_compared: Vec<NotCompared>,
    pub(crate) settings: Settings,
}

/// What the search found.
pub(crate) struct Tail {
    pub(crate) status: Status,
    pub(crate) answer: String,
    pub(crate) result: Vec<String>,
    pub(crate) confidence: Option<f64>,
    pub(crate) search_probes: usize,
}

impl Tail {
    /// The search stopped before it began: its two ends behave alike.
    pub(crate) fn ends_do_not_differ(answer: String, search_probes: usize) -> Tail {
        Tail {
            status: Status::EndsDoNotDiffer,
            answer,
            result: vec![],
            confidence: None,
            search_probes,
        }
    }
}

pub(crate) fn finish(s: Search, h: Head, t: Tail) -> Found {
    Found {
        command: h.command,
        status: t.status,
        answer: t.answer,
        result: t.result,
        confidence: t.confidence,
        size: h.size,
        search_probes: t.search_probes,
        bound: h.bound,
        good_never_failed: s.judge.good_never_failed(),
        probes: s.rows,
        untestable: h.untestable,
        not_compared: h.not_compared,
        settings: h.settings,
        work: s.trials.work,
        run_dir: s.trials.run_dir.clone(),
    }
}

pub(crate) fn percent(c: Option<f64>) -> String {
    match c {
        None => "not shown".into(),
        // Never "100.00%": the bound is a sum of p-values, not zero.
        Some(c) if c >= 0.99995 => "> 99.99%".into(),
        Some(c) => format!("{:.2}%", 100.0 * c),
    }
}
