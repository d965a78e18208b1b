//! `aorta agent`: AORTA's closed-loop mitigation search (§10.2) with evidence behind
//! `converged`.
//!
//! - [`stats`]: the sequential test (pure; its error rates are measured in
//!   `tests/simulation.rs`).
//! - [`search`]: the loop. Each look builds a generated probe recipe through the engine's
//!   [`aorta_engine::Session`], so trials are store hits across looks and agent runs.
//! - [`proposer`]: `fake` (AORTA's deterministic rules) and `openai` (a chat endpoint), both
//!   validated by [`policy`].
//! - [`log`]: `agent_log.jsonl`, append-only, and the replay that makes a killed run resumable.
//! - [`report`] renders `agent_report.md`.

mod config;
pub mod log;
pub mod outcome;
mod phases;
pub mod policy;
pub mod probe;
pub mod proposer;
pub mod report;
pub mod search;
pub mod stats;

pub use config::AgentRequest;
pub use outcome::Outcome;
pub use search::{dry_run, run, run_dir, AgentConfig, AgentResult, CandidateVerdict, Tested};
pub use stats::{Counts, Design};
