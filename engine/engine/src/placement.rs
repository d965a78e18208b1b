//! Putting a trial's directory in its place in the run directory: where it goes, what of it
//! the recipe's retention keeps, one rename. Used as each executed trial finishes (schedule.rs)
//! and for the rest when the build materialises (outputs.rs).

use crate::fsutil::replace_dir;
use aorta_recipe::Recipe;
use std::path::Path;

/// Where trial `index` of `cell` goes, relative to the run directory.
pub(crate) fn trial_rel(recipe: &Recipe, cell: &str, index: u32) -> String {
    format!("{}trial_{index}", aorta_report::cell_dir(recipe.mode, cell))
}

/// The recipe's retention rule for trial directories, if any.
pub(crate) fn retain(recipe: &Recipe) -> Option<&aorta_recipe::Retain> {
    recipe.probe.as_ref().and_then(|p| p.retain.as_ref())
}

/// Puts a trial directory written in staging at `dest`: `retain` applied first, its outcome
/// stamped into the directory's result.json (deletions or not, as AORTA does), then one rename
/// over whatever `dest` held ([`replace_dir`]).
pub(crate) fn place_trial(
    staged: &Path,
    dest: &Path,
    retain: Option<&aorta_recipe::Retain>,
    record: &aorta_trial::TrialRecord,
) -> Result<(), String> {
    if let Some(retain) = retain {
        let outcome = crate::retention::apply(staged, retain, record.verdict);
        let mut record = record.clone();
        record.capture.retention = Some(outcome);
        let json = serde_json::to_vec_pretty(&record)
            .map_err(|e| format!("cannot encode result.json: {e}"))?;
        std::fs::write(staged.join("result.json"), &json)
            .map_err(|e| format!("cannot write result.json: {e}"))?;
    }
    replace_dir(staged, dest).map_err(|e| e.to_string())
}
