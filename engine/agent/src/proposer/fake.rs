//! AORTA's deterministic proposer: the category from the last cell's failure detectors (then
//! the symptom's words), and the first untried candidate with confidence 0.5.

use super::{ProposeError, Proposer, StepContext};
use crate::policy::AgentStep;
use aorta_registry::Registry;

pub struct Fake;

/// AORTA's keyword rules over lower-cased text, first match wins.
fn rule(text: &str) -> Option<&'static str> {
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if has(&["tier2", "hang", "rccl"]) {
        Some("rccl_hang")
    } else if has(&["oom", "137"]) {
        Some("oom_fragment")
    } else if has(&["hip_error", "illegal", "memory"]) {
        Some("illegal_mem")
    } else if has(&["checkpoint", "barrier"]) {
        Some("checkpoint_race")
    } else if has(&["tier1:exit", "launch"]) {
        Some("launch_error")
    } else {
        None
    }
}

/// The category from the detectors, else from the symptom, else `unknown`.
pub fn categorize(detectors: &[String], symptom: Option<&str>) -> &'static str {
    rule(&detectors.join(" ").to_lowercase())
        .or_else(|| symptom.and_then(|s| rule(&s.to_lowercase())))
        .unwrap_or("unknown")
}

impl Proposer for Fake {
    fn backend(&self) -> &'static str {
        "fake"
    }

    fn step(&mut self, cx: &StepContext, _: &Registry) -> Result<AgentStep, ProposeError> {
        let detectors = cx
            .cell_summaries
            .last()
            .map(|c| c.failure_detectors.as_slice())
            .unwrap_or_default();
        let category = categorize(detectors, cx.symptom);
        if cx.baseline_passed {
            return Ok(AgentStep::stop(category, "baseline_pass"));
        }
        let Some(next) = cx.candidates.first() else {
            return Ok(AgentStep::stop(category, "exhausted_candidates"));
        };
        Ok(AgentStep {
            category: category.into(),
            hypothesis: format!("{category}: try {next}"),
            next_mitigations: vec![next.clone()],
            diagnostics: Vec::new(),
            confidence: 0.5,
            stop: false,
            stop_reason: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aortas_category_rules() {
        let d = |s: &str| vec![s.to_string()];
        assert_eq!(categorize(&d("tier2:hang"), None), "rccl_hang");
        assert_eq!(categorize(&d("tier1:exit_code_137"), None), "oom_fragment");
        assert_eq!(categorize(&d("tier4:hip_error"), None), "illegal_mem");
        assert_eq!(
            categorize(&d("tier5:barrier_timeout"), None),
            "checkpoint_race"
        );
        assert_eq!(categorize(&d("tier1:exit"), None), "launch_error");
        assert_eq!(categorize(&[], Some("Checkpoint save hangs")), "rccl_hang");
        assert_eq!(categorize(&[], Some("wrong numbers")), "unknown");
    }
}
