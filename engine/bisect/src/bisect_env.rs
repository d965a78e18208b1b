//! `aorta bisect env`: ddmin over the appliable differences of two environments, forward
//! (the fewest applied to GOOD that fail) or `--reverse` (the fewest reverted from BAD that pass).

use crate::ddmin::worst_case_probes;
use crate::judge::{Call, Judge};
use crate::probe::{Config, EngineTrials};
use crate::search::{diff_str, show};
use crate::search::{finish, percent, Found, Head, Search, Settings, Status, Tail};
use crate::sources;
use aorta_engine::EngineError;

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
    let sources::Differences {
        appliable: diffs,
        untestable,
        not_compared,
    } = sources::differences(&good, &bad);
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
    let head = Head {
        command: "bisect env",
        size: n,
        bound: worst_case_probes(n),
        untestable,
        not_compared,
        settings,
    };
    // The judge's ends are GOOD (passes) and BAD (fails) in either direction.
    if let Some(problem) = s.ends("GOOD", "BAD")? {
        let answer = format!("Answer: no culprit: {problem}");
        return Ok(finish(s, head, Tail::ends_do_not_differ(answer, 0)));
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
        head,
        Tail {
            status,
            answer,
            result,
            confidence,
            search_probes: probes,
        },
    ))
}
