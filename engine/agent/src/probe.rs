//! What the agent reads back from a look's trials. The look's recipe itself is an
//! [`aorta_recipe::AgentLook`] request, built by the engine's compile database.

use crate::proposer::CellSummary;
use crate::stats::Counts;
pub use aorta_recipe::agent_cell_name as cell_name;
use aorta_recipe::Verdict;
use aorta_trial::TrialRecord;

/// Failures among pass/fail trials, and the errored ones (no evidence either way).
pub fn counts(records: &[TrialRecord]) -> (Counts, u32) {
    let failed = records
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .count() as u32;
    let passed = records
        .iter()
        .filter(|r| r.verdict == Verdict::Pass)
        .count() as u32;
    let errored = records.len() as u32 - failed - passed;
    (Counts::new(failed, failed + passed), errored)
}

/// AORTA's cell summary: `pass` only if every trial passed, else the first non-pass verdict;
/// the union of failure detectors.
pub fn summarize(name: &str, records: &[TrialRecord]) -> CellSummary {
    let verdict = records
        .iter()
        .find(|r| r.verdict != Verdict::Pass)
        .map_or("pass", |r| r.verdict.as_str());
    let mut detectors: Vec<String> = records
        .iter()
        .flat_map(|r| r.failure_detectors_fired.iter().cloned())
        .collect();
    detectors.sort();
    detectors.dedup();
    let (c, _) = counts(records);
    CellSummary {
        cell: name.to_string(),
        verdict: if records.is_empty() { "error" } else { verdict }.to_string(),
        failed: c.failed,
        trials: records.len() as u32,
        failure_detectors: detectors,
    }
}
