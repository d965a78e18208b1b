//! Putting a trial's directory in its place in the run directory: where it goes, what of it
//! the recipe's retention keeps, one rename. Used as each executed trial finishes (schedule.rs)
//! and for the rest when the build materialises (outputs.rs).

use crate::dirs::replace_dir;
use aorta_recipe::Recipe;
use std::path::{Path, PathBuf};

/// Where trial `index` of `cell` goes, relative to the run directory.
pub(crate) fn trial_rel(recipe: &Recipe, cell: &str, index: u32) -> String {
    format!("{}trial_{index}", aorta_report::cell_dir(recipe.mode, cell))
}

/// The recipe's retention rule for trial directories, if any.
pub(crate) fn retain(recipe: &Recipe) -> Option<&aorta_recipe::Retain> {
    recipe.probe.as_ref().and_then(|p| p.retain.as_ref())
}

/// A trial directory written in staging, and whether the recipe's retention was applied to it
/// already (a placement that failed after trimming it: applied again, it would find nothing
/// to delete and stamp an outcome that lists no deletions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StagedDir {
    pub dir: PathBuf,
    pub trimmed: bool,
}

impl StagedDir {
    pub(crate) fn new(dir: PathBuf) -> Self {
        StagedDir {
            dir,
            trimmed: false,
        }
    }
}

/// Puts a trial directory written in staging at `dest`: `retain` applied first (once), its
/// outcome stamped into the directory's result.json (deletions or not, as AORTA does), then
/// one rename over whatever `dest` held ([`replace_dir`]).
pub(crate) fn place_trial(
    staged: &mut StagedDir,
    dest: &Path,
    retain: Option<&aorta_recipe::Retain>,
    record: &aorta_trial::TrialRecord,
) -> Result<(), PlaceTrialError> {
    if let Some(retain) = retain.filter(|_| !staged.trimmed) {
        let outcome = crate::retention::apply(&staged.dir, retain, record.verdict);
        let mut record = record.clone();
        record.capture.retention = Some(outcome);
        let json = serde_json::to_vec_pretty(&record).map_err(PlaceTrialError::Encode)?;
        std::fs::write(staged.dir.join("result.json"), &json).map_err(PlaceTrialError::Write)?;
        staged.trimmed = true;
    }
    replace_dir(&staged.dir, dest).map_err(PlaceTrialError::Rename)
}

/// Why a trial directory was not placed (it stays in staging; the build says so).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlaceTrialError {
    #[error("cannot encode result.json: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot write result.json: {0}")]
    Write(#[source] std::io::Error),
    #[error("{0}")]
    Rename(#[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use aorta_recipe::{Retain, RetainLevel};

    #[test]
    fn a_trial_placed_again_after_a_failed_rename_keeps_its_retention_outcome() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("staged");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("stdout.log"), "out\n").unwrap();
        let mut record = aorta_trial::TrialRecord::unjudged(
            "k".into(),
            "none-none".into(),
            0,
            "_subprocess".into(),
            None,
            Default::default(),
        );
        record.verdict = aorta_trial::Verdict::Pass;
        record.exit_status = aorta_trial::ExitStatus::Ok;
        std::fs::write(
            dir.join("result.json"),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        let retain = Retain {
            on_pass: RetainLevel::None,
            on_fail: RetainLevel::None,
            on_error: RetainLevel::None,
        };
        // The destination's parent is a file: the rename fails after the trim.
        std::fs::write(tmp.path().join("blocked"), "").unwrap();
        let mut staged = StagedDir::new(dir);
        let failed = place_trial(
            &mut staged,
            &tmp.path().join("blocked/trial_0"),
            Some(&retain),
            &record,
        );
        assert!(failed.is_err());
        assert!(staged.trimmed);
        let dest = tmp.path().join("run/trial_0");
        place_trial(&mut staged, &dest, Some(&retain), &record).unwrap();
        let placed: aorta_trial::TrialRecord =
            serde_json::from_slice(&std::fs::read(dest.join("result.json")).unwrap()).unwrap();
        let outcome = placed.capture.retention.expect("stamped");
        assert_eq!(
            outcome.deleted,
            ["stdout.log"],
            "the first trim's deletions, not an empty list"
        );
        assert!(!dest.join("stdout.log").exists());
    }
}
