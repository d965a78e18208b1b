//! The three commands over the engine: `bisect env` (ddmin over the appliable differences of
//! two environments), `bisect range` (the first bad point of a list) and `reduce` (ddmin over a
//! stack of mitigations that fixes the failure). Each checks its two ends first, searches with
//! [`Judge`] calls, then re-reads the calls its answer rests on (store hits) for the report.

use crate::ddmin::{ddmin, worst_case_probes, Outcome};
use crate::judge::{Call, EndpointProblem, Judge, Verdict};
use crate::probe::{Config, EngineTrials, Work};
use crate::range::first_bad;
use crate::sources::{self, Difference, Untestable};
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
    pub settings: Settings,
    /// Whether the good end never failed (then one failure calls a probe bad).
    pub good_never_failed: bool,
    pub work: Work,
    pub run_dir: Option<PathBuf>,
}

/// `{A=1, B=2}`; past six entries the rest as a count, so a probe stays one line.
fn show(env: &BTreeMap<String, String>) -> String {
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

fn diff_str(d: &Difference) -> String {
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

struct Search<'s, 'a> {
    trials: &'s mut EngineTrials<'a>,
    judge: Judge<Config>,
    rows: Vec<ProbeRow>,
    /// The ends' p-value (the good end fails less often than the bad one): every answer rests
    /// on it, so it is in every confidence.
    ends_p: f64,
    /// The reductions ddmin has made so far.
    depth: u32,
}

impl Search<'_, '_> {
    fn call(
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
    fn ends(&mut self, good: &str, bad: &str) -> Result<Option<String>, EngineError> {
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
    fn ddmin(
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

    /// The calls a ddmin answer rests on: the set itself shows `hit`, each removal does not.
    /// Returns the confidence (None when one of them is not as needed) and the culprit removals.
    fn minimality(
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
struct Head {
    command: &'static str,
    size: usize,
    bound: usize,
    untestable: Vec<Untestable>,
    settings: Settings,
}

/// What the search found.
struct Tail {
    status: Status,
    answer: String,
    result: Vec<String>,
    confidence: Option<f64>,
    search_probes: usize,
}

fn finish(s: Search, h: Head, t: Tail) -> Found {
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
        settings: h.settings,
        work: s.trials.work,
        run_dir: s.trials.run_dir.clone(),
    }
}

fn percent(c: Option<f64>) -> String {
    c.map_or("not shown".into(), |c| format!("{:.2}%", 100.0 * c))
}

/// `aorta bisect env --good G --bad B -- COMMAND`.
pub fn bisect_env(
    trials: &mut EngineTrials,
    good_path: &std::path::Path,
    bad_path: &std::path::Path,
    reverse: bool,
    settings: Settings,
) -> Result<Found, EngineError> {
    let good = sources::load_side(good_path)?;
    let bad = sources::load_side(bad_path)?;
    let (diffs, untestable) = sources::differences(&good, &bad);
    if diffs.is_empty() {
        return Err(EngineError::usage(
            format!(
                "{} and {} set the same variables: nothing a run can apply differs ({} other field(s) do)",
                good_path.display(),
                bad_path.display(),
                untestable.len()
            ),
            "aorta env diff GOOD BAD shows every difference",
        ));
    }
    let n = diffs.len();
    // Forward: the differences applied to GOOD. Reverse: the differences reverted from BAD,
    // which is GOOD with every other difference applied; either way ddmin's set is what is
    // changed from its start, and the ends are GOOD and BAD.
    let applied = |s: &[usize]| -> Vec<usize> {
        match reverse {
            false => s.to_vec(),
            true => (0..n).filter(|i| !s.contains(i)).collect(),
        }
    };
    let config = |s: &[usize]| Config::env(sources::apply(&good, &diffs, &applied(s)));
    let value = |i: usize| {
        let v = if reverse {
            &diffs[i].good
        } else {
            &diffs[i].bad
        };
        v.clone().unwrap_or_else(|| "(unset)".into())
    };
    let (start, end) = if reverse {
        ("BAD", "GOOD")
    } else {
        ("GOOD", "BAD")
    };
    let what = |s: &[usize]| match s.len() {
        0 => start.to_string(),
        k if k == n => end.to_string(),
        k => format!(
            "{start} + {} ({k} of {n})",
            show(
                &s.iter()
                    .map(|&i| (diffs[i].var.clone(), value(i)))
                    .collect()
            )
        ),
    };
    let hit = if reverse { Call::Passes } else { Call::Fails };
    let mut s = Search {
        judge: Judge::new(
            settings.confidence,
            settings.cap,
            Config::env(sources::apply(&good, &diffs, &[])),
            Config::env(sources::apply(&good, &diffs, &(0..n).collect::<Vec<_>>())),
        ),
        trials,
        rows: Vec::new(),
        ends_p: 1.0,
        depth: 0,
    };
    // The judge's ends are GOOD (passes) and BAD (fails) in either direction.
    if let Some(problem) = s.ends("GOOD", "BAD")? {
        let answer = format!("Answer: no culprit: {problem}");
        return Ok(finish(
            s,
            Head {
                command: "bisect env",
                size: n,
                bound: worst_case_probes(n),
                untestable,
                settings,
            },
            Tail {
                status: Status::EndsDoNotDiffer,
                answer,
                result: vec![],
                confidence: None,
                search_probes: 0,
            },
        ));
    }
    let (set, probes) = s.ddmin(n, hit, &config, &what)?;
    let confidence = s.minimality(&set, n, hit, &config, &what)?;
    let result: Vec<String> = match reverse {
        false => set.iter().map(|&i| diff_str(&diffs[i])).collect(),
        true => set
            .iter()
            .map(|&i| format!("{}={}", diffs[i].var, value(i)))
            .collect(),
    };
    let status = if confidence.is_some() {
        Status::Found
    } else {
        Status::Undecided
    };
    let never = if s.judge.good_never_failed() {
        ", GOOD never failed"
    } else {
        ""
    };
    let answer = match reverse {
        false => format!(
            "Answer: the failure needs {{{}}} ({} of {n} difference(s); the set fails and each removal passes, confidence {}{never})",
            result.join(", "),
            set.len(),
            percent(confidence),
        ),
        true => format!(
            "Answer: BAD passes with {{{}}} reverted to GOOD's values ({} of {n} difference(s); reverting the set passes and reverting any less fails, confidence {}{never})",
            result.join(", "),
            set.len(),
            percent(confidence),
        ),
    };
    Ok(finish(
        s,
        Head {
            command: "bisect env",
            size: n,
            bound: worst_case_probes(n),
            untestable,
            settings,
        },
        Tail {
            status,
            answer,
            result,
            confidence,
            search_probes: probes,
        },
    ))
}

/// `aorta bisect range --list FILE -- COMMAND` (or `--rev A..B`: `points` already read).
pub fn bisect_range(
    trials: &mut EngineTrials,
    points: Vec<sources::Point>,
    settings: Settings,
) -> Result<Found, EngineError> {
    let n = points.len();
    let config = |i: usize| Config::env(points[i].env.clone());
    let label = |i: usize| format!("#{} {}", i, points[i].text);
    let bound = (n as f64).log2().ceil() as usize + 3;
    let mut s = Search {
        judge: Judge::new(settings.confidence, settings.cap, config(0), config(n - 1)),
        trials,
        rows: Vec::new(),
        ends_p: 1.0,
        depth: 0,
    };
    if let Some(problem) = s.ends(&label(0), &label(n - 1))? {
        let answer = format!("Answer: no boundary: {problem}");
        return Ok(finish(
            s,
            Head {
                command: "bisect range",
                size: n,
                bound,
                untestable: vec![],
                settings,
            },
            Tail {
                status: Status::EndsDoNotDiffer,
                answer,
                result: vec![],
                confidence: None,
                search_probes: 2,
            },
        ));
    }
    let b = first_bad(&mut s.judge, s.trials, n, config)?;
    // Rows in the order the calls were made are the search's; the map keeps each point's last.
    for (&i, v) in &b.calls {
        s.rows.push(ProbeRow {
            depth: 0,
            role: if i == b.last_good || Some(i) == b.first_bad {
                "boundary"
            } else {
                "search"
            },
            what: label(i),
            cell: config(i).name(),
            verdict: *v,
        });
    }
    let confidence = (b.confidence - s.ends_p).max(0.0);
    let (status, answer, result, confidence) = match b.first_bad {
        Some(i) => (
            Status::Found,
            format!(
                "Answer: the first bad point is #{i} ({}, line {}): #{} passes and #{i} fails, confidence {}{}",
                points[i].text,
                points[i].line,
                b.last_good,
                percent(Some(confidence)),
                if b.reversals > 0 { format!("; {} call(s) reversed on re-check", b.reversals) } else { String::new() },
            ),
            vec![points[i].text.clone()],
            Some(confidence),
        ),
        None => (
            Status::Undecided,
            format!(
                "Answer: undecided: the first bad point is after #{} and at or before #{} (a call reached the cap of {} trials)",
                b.last_good, b.first_bad_bound, settings.cap
            ),
            vec![],
            None,
        ),
    };
    Ok(finish(
        s,
        Head {
            command: "bisect range",
            size: n,
            bound,
            untestable: vec![],
            settings,
        },
        Tail {
            status,
            answer,
            result,
            confidence,
            search_probes: b.points_probed,
        },
    ))
}

/// `aorta reduce --mitigations a,b,… -- COMMAND`: `stack` fixes the failure; which part of it?
pub fn reduce(
    trials: &mut EngineTrials,
    stack: &[String],
    settings: Settings,
) -> Result<Found, EngineError> {
    let n = stack.len();
    let config = |s: &[usize]| Config {
        mitigations: s.iter().map(|&i| stack[i].clone()).collect(),
        env: BTreeMap::new(),
    };
    let what = |s: &[usize]| match s.len() {
        0 => "no mitigation".to_string(),
        _ => format!(
            "[{}]",
            s.iter()
                .map(|&i| stack[i].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let all: Vec<usize> = (0..n).collect();
    let mut s = Search {
        judge: Judge::new(settings.confidence, settings.cap, config(&all), config(&[])),
        trials,
        rows: Vec::new(),
        ends_p: 1.0,
        depth: 0,
    };
    if let Some(problem) = s.ends(&what(&all), "no mitigation")? {
        let answer = format!("Answer: nothing to reduce: {problem}");
        return Ok(finish(
            s,
            Head {
                command: "reduce",
                size: n,
                bound: worst_case_probes(n),
                untestable: vec![],
                settings,
            },
            Tail {
                status: Status::EndsDoNotDiffer,
                answer,
                result: vec![],
                confidence: None,
                search_probes: 0,
            },
        ));
    }
    // ddmin's sets are the mitigations kept; its property: the stack still fixes.
    let (set, probes) = s.ddmin(n, Call::Passes, &config, &what)?;
    let confidence = s.minimality(&set, n, Call::Passes, &config, &what)?;
    let result: Vec<String> = set.iter().map(|&i| stack[i].clone()).collect();
    let status = if confidence.is_some() {
        Status::Found
    } else {
        Status::Undecided
    };
    let answer = format!(
        "Answer: [{}] is enough ({} of {n} mitigation(s): the sub-stack fixes and dropping any one of it does not, confidence {})",
        result.join(", "),
        set.len(),
        percent(confidence),
    );
    Ok(finish(
        s,
        Head {
            command: "reduce",
            size: n,
            bound: worst_case_probes(n),
            untestable: vec![],
            settings,
        },
        Tail {
            status,
            answer,
            result,
            confidence,
            search_probes: probes,
        },
    ))
}
