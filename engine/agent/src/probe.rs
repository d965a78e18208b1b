//! The probe recipe each look builds: generated as an ordinary schema_version 1 probe recipe
//! (validated by the recipe crate like any file), the template's settings carried over as
//! AORTA carries them, and each cell's trial count set for this look. Trial keys do not
//! depend on the cell's trial count or on which other cells exist, so every trial of an
//! earlier look (or an earlier agent run) is a store hit.

use crate::proposer::CellSummary;
use crate::stats::Counts;
use aorta_recipe::{segment, Recipe, Verdict};
use aorta_registry::Registry;
use aorta_source::{Diag, SourceFile, Syntax};
use aorta_trial::TrialRecord;
use serde::Serialize;
use std::collections::BTreeMap;

/// The generated recipe's text (JSON, which is YAML).
#[derive(Serialize)]
struct Generated<'a> {
    schema_version: u32,
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ticket: Option<&'a str>,
    trials: u32,
    mitigation_axis: &'a [String],
    diagnostic_axis: &'a [String],
}

/// The cell name of mitigation `m` without diagnostic.
pub fn cell_name(m: &str) -> String {
    format!("{}-none", segment(m))
}

/// What stays the same for every look.
pub struct Template {
    pub ticket: Option<String>,
    /// The template recipe (`--recipe`), if any: its probe settings and confound threshold.
    pub recipe: Option<Recipe>,
    /// Trials for diagnostic cells (the template's `trials`, default 1).
    pub diagnostic_trials: u32,
}

impl Template {
    /// The recipe for one look: `axis × diagnostics`, with `trials[m]` trials in `<m>-none`.
    pub fn recipe(
        &self,
        registry: &Registry,
        axis: &[String],
        diagnostics: &[String],
        trials: &BTreeMap<String, u32>,
    ) -> Result<Recipe, Box<Diag>> {
        let text = serde_json::to_string(&Generated {
            schema_version: 1,
            mode: "probe",
            ticket: self.ticket.as_deref(),
            trials: self.diagnostic_trials,
            mitigation_axis: axis,
            diagnostic_axis: diagnostics,
        })
        .map_err(|e| Box::new(Diag::new(aorta_source::DiagKind::Usage, e.to_string())))?;
        let file = SourceFile::new("<agent probe recipe>", text);
        let mut recipe = aorta_recipe::parse_recipe(&file, Syntax::Json, registry)?;
        if let (Some(t), Some(p)) = (&self.recipe, recipe.probe.as_mut()) {
            if let Some(tp) = &t.probe {
                // AORTA's carried fields; not stop_after, retain, disables, tier3_vram_growth.
                p.step_time_regex = tp.step_time_regex.clone();
                p.collect_paths = tp.collect_paths.clone();
                p.timeout_per_trial = tp.timeout_per_trial;
                p.env_passthrough_mode = tp.env_passthrough_mode;
                p.custom_patterns = tp.custom_patterns.clone();
                p.hang_window_sec = tp.hang_window_sec;
                p.hang_grace_period_at_start = tp.hang_grace_period_at_start;
                p.redaction = tp.redaction.clone();
            }
            recipe.confound.threshold = t.confound.threshold;
            recipe.registry_files = t.registry_files.clone();
        }
        for cell in &mut recipe.cells {
            let m = axis
                .iter()
                .find(|m| cell.name == cell_name(m))
                .and_then(|m| trials.get(m));
            if let Some(&n) = m {
                cell.trials = Some(n);
            }
        }
        Ok(recipe)
    }
}

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
