//! The failure classifier's catalogue: tiers, detector ids and built-in log patterns.
//!
//! This crate is the single source of truth for detector ids, so recipes (which may disable
//! detectors), `aorta sweep list-patterns` and the classifier agree on one vocabulary.

mod catalogue;
mod disables;

pub use catalogue::{detector_ids, Pattern, PatternFlags, Tier, PATTERN_LIBRARY_VERSION, TIER3_LOG_PATTERNS, TIER4_PATTERNS};
pub use disables::{Disables, DisableError};
