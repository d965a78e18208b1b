//! `aorta reduce`: ddmin over a stack of mitigations that fixes the failure, for the fewest
//! that still fix it.

use crate::ddmin::worst_case_probes;
use crate::judge::{Call, Judge};
use crate::probe::{Config, EngineTrials};
use crate::search::{finish, percent, Found, Head, Search, Settings, Status, Tail};
use aorta_engine::EngineError;
use std::collections::BTreeMap;

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
    let head = Head {
        command: "reduce",
        size: n,
        bound: worst_case_probes(n),
        untestable: vec![],
        not_compared: vec![],
        settings,
    };
    if let Some(problem) = s.ends(&what(&all), "no mitigation")? {
        let answer = format!("Answer: nothing to reduce: {problem}");
        return Ok(finish(s, head, Tail::ends_do_not_differ(answer, 0)));
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
