//! What a run reports: the matrix as pure functions of the recipe and the trial records, and
//! report.html from them plus what the run directory holds (logs, env snapshots; [`render_page`]).
//!
//! - [`CellStats::aggregate`] folds one cell's [`aorta_trial::TrialRecord`]s into AORTA's
//!   `CellStats` (§3.5), a pure function of the cell, the recipe and the records.
//! - [`confound`] is AORTA's speed-confound rule ([`confound::aorta_compat`]) and aorta's
//!   interval-aware version ([`confound::classify`], seeded [`bootstrap`]).
//! - [`Matrix`] resolves the baseline after the run and renders matrix.json
//!   ([`Matrix::write_json`] streams the typed [`MatrixJson`]), matrix.md
//!   ([`Matrix::to_markdown`]), report.html ([`Matrix::to_html`]: inline SVG plots, Wilson
//!   intervals, no network) and the end-of-run summary ([`Matrix::summary`]).
//! - [`resolved_recipe_yaml`] writes recipe.resolved.yaml for both modes, reloadable by
//!   `aorta_recipe::parse_recipe`.
//!
//! Nothing here writes files: callers write the returned text atomically.

mod aggregate;
pub mod bootstrap;
pub mod confound;
mod doctor;
pub mod evidence;
mod html;
pub mod json;
pub mod kernels;
mod layout;
mod markdown;
mod matrix;
mod page;
mod resolved;
pub mod sequential;
mod stats;
mod summary;
mod svg;
mod verdict;
mod yaml;

pub use aggregate::{
    CellStats, MetricSamples, Outcome, StepStats, StepTimeSource, WorkloadMetric,
    LOGITS_DISAGREE_HINT,
};
pub use confound::{Baseline, Tag};
pub use html::{AgentCandidate, AgentPage, DetectorLine, EnvDiff, HtmlContext, TrialRow, TrialXid};
pub use json::{CellJson, MatrixJson};
pub use layout::{cell_dir, trial_path};
pub use matrix::{Matrix, Row, RunInfo};
pub use page::{render as render_page, render_run_dir, EnvSection, PageInputs, RunDirError};
pub use resolved::resolved_recipe_yaml;
pub use summary::SummaryOptions;
pub use svg::wilson;
pub use verdict::{Answer, AutoStop, Call, CellCall, Stability, CONFIDENCE};
