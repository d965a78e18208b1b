//! Who proposes the next mitigation: the deterministic `fake` proposer (AORTA's category
//! rules) or an OpenAI-compatible chat endpoint (`openai`). Both return a validated
//! [`AgentStep`]; the loop applies the candidate-set and approval rules on top.

mod fake;
mod openai;

pub use fake::{categorize, relevance, Fake};
pub use openai::{OpenAi, OpenAiSettings};

use crate::policy::{AgentStep, Violation};
use aorta_registry::Registry;
use serde::Serialize;

/// One cell as the proposer sees it (AORTA's cell summary, plus the counts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellSummary {
    pub cell: String,
    /// `pass` only if every trial passed, else the first non-pass verdict (AORTA's rule).
    pub verdict: String,
    pub failed: u32,
    pub trials: u32,
    /// Failure detectors fired in any trial, sorted.
    pub failure_detectors: Vec<String>,
}

/// What a proposer is told before each step.
#[derive(Debug, Clone, Serialize)]
pub struct StepContext<'a> {
    pub symptom: Option<&'a str>,
    pub cell_summaries: &'a [CellSummary],
    /// Candidates not tried yet, in order.
    pub candidates: &'a [String],
    pub already_tried: &'a [String],
    #[serde(skip)]
    pub baseline_passed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error(transparent)]
    Violation(#[from] Violation),
    /// The endpoint could not be asked (connection, HTTP status, oversized reply).
    #[error("{0}")]
    Transport(String),
}

pub trait Proposer {
    /// `fake` or `openai`, as logged.
    fn backend(&self) -> &'static str;
    fn step(&mut self, cx: &StepContext, registry: &Registry) -> Result<AgentStep, ProposeError>;
}
