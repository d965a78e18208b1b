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

/// How likely mitigation `name` is to bear on a failure of `category` (the fake proposer's
/// categories, from the baseline's detectors): 0 the usual suspects, 1 related, 2 unrelated.
/// The search tries candidates in this order, platform order within each rank, so the
/// mitigation a GPU engineer would try first for an illegal address is tried first.
pub fn relevance(category: &str, name: &str) -> u8 {
    let any = |words: &[&str]| words.iter().any(|w| name.contains(w));
    let (first, then): (&[&str], &[&str]) = match category {
        "illegal_mem" => (
            &["launch_blocking"],
            &[
                "memory_caching",
                "alloc",
                "max_connections_1",
                "xnack",
                "sdma",
                "dynamic_queues",
            ],
        ),
        "launch_error" => (&["launch_blocking", "module_loading"], &["max_connections"]),
        "rccl_hang" => (
            &["nccl", "rccl"],
            &["max_connections", "hw_queues", "launch_blocking"],
        ),
        "oom_fragment" => (
            &["alloc_expandable", "memory_caching"],
            &["scratch_reclaim", "cublas_workspace"],
        ),
        "checkpoint_race" => (
            &["nccl_blocking_wait", "launch_blocking"],
            &["nccl", "rccl"],
        ),
        _ => (&[], &[]),
    };
    if any(first) {
        0
    } else if any(then) {
        1
    } else {
        2
    }
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
    fn the_failures_usual_suspects_come_first() {
        assert_eq!(relevance("illegal_mem", "cuda_launch_blocking"), 0);
        assert_eq!(
            relevance("illegal_mem", "pytorch_no_cuda_memory_caching"),
            1
        );
        assert_eq!(relevance("illegal_mem", "nccl_algo_ring"), 2);
        assert_eq!(relevance("rccl_hang", "nccl_p2p_disable"), 0);
        assert_eq!(
            relevance("oom_fragment", "pytorch_alloc_expandable_segments"),
            0
        );
        // An unknown failure keeps the platform order: everything ranks alike.
        assert_eq!(relevance("unknown", "cuda_launch_blocking"), 2);
        assert_eq!(relevance("unknown", "tf32_off"), 2);
    }

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
