//! AORTA's agent outcomes and their headlines, verbatim (§1.7).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    BaselinePass,
    Converged,
    ExhaustedCandidates,
    AgentStop,
    ApprovalRequired,
    WalltimeExhausted,
    PolicyStop,
    RegistryError,
    Error,
    DryRun,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::BaselinePass => "baseline_pass",
            Outcome::Converged => "converged",
            Outcome::ExhaustedCandidates => "exhausted_candidates",
            Outcome::AgentStop => "agent_stop",
            Outcome::ApprovalRequired => "approval_required",
            Outcome::WalltimeExhausted => "walltime_exhausted",
            Outcome::PolicyStop => "policy_stop",
            Outcome::RegistryError => "registry_error",
            Outcome::Error => "error",
            Outcome::DryRun => "dry_run",
        }
    }

    pub fn headline(self) -> &'static str {
        match self {
            Outcome::BaselinePass => "Baseline passed — no mitigation search needed.",
            Outcome::Converged => "Mitigation found — repro passes with a non-baseline cell.",
            Outcome::ExhaustedCandidates => "Search stopped — no more mitigations to try.",
            Outcome::AgentStop => "Search stopped by the agent.",
            Outcome::ApprovalRequired => "Paused — operator approval required.",
            Outcome::WalltimeExhausted => "Stopped — wall-time budget exhausted.",
            Outcome::PolicyStop => "Stopped — policy limit hit.",
            Outcome::RegistryError => "Stopped — registry error.",
            Outcome::Error => "Aborted — unexpected error; see report and agent_log.jsonl.",
            Outcome::DryRun => "Dry run — nothing executed.",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
