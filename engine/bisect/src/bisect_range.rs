//! `aorta bisect range`: the first bad point of an ordered list (or of commits), through
//! [`crate::range::first_bad`].

use crate::judge::Judge;
use crate::probe::{Config, EngineTrials};
use crate::range::first_bad;
use crate::search::{finish, percent, Found, Head, ProbeRow, Search, Settings, Status, Tail};
use crate::sources;
use aorta_engine::EngineError;

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
    let head = Head {
        command: "bisect range",
        size: n,
        bound,
        untestable: vec![],
        not_compared: vec![],
        settings,
    };
    if let Some(problem) = s.ends(&label(0), &label(n - 1))? {
        let answer = format!("Answer: no boundary: {problem}");
        return Ok(finish(s, head, Tail::ends_do_not_differ(answer, 2)));
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
        head,
        Tail {
            status,
            answer,
            result,
            confidence,
            search_probes: b.points_probed,
        },
    ))
}
