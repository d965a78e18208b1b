//! The assembled matrix: aggregated cells, the post-run baseline and each cell's confound
//! verdict, rendered as matrix.json (AORTA schema_version 1 plus aorta's fields).

use crate::aggregate::CellStats;
use crate::confound::{self, Baseline, Verdict};
use crate::layout;
use crate::verdict::{Answer, Evidence};
use aorta_recipe::Recipe;

/// What matrix.json and matrix.md say beyond the recipe and the trial records. Both are
/// artifacts keyed by their inputs, so whatever goes in here must be part of that key (the
/// warnings) or be allowed to go stale with a cached artifact (the timestamp).
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// `YYYY-MM-DDTHH-MM-SS` (UTC): when this matrix was rendered.
    pub run_timestamp: String,
    /// Warnings gathered during the run (partial env probes, placeholders, …), in order.
    pub warnings: Vec<String>,
    /// `aorta doctor`'s verdict on the node the run was built on (its doctor.json), `None`
    /// when it was not checked. matrix.md and report.html show it (it is in their keys);
    /// matrix.json does not.
    pub doctor: Option<aorta_doctor::NodeVerdict>,
}

/// A cell and its confound verdict.
#[derive(Debug, Clone)]
pub struct Row {
    pub stats: CellStats,
    pub confound: Verdict,
}

/// Everything matrix.md, matrix.json and the summary are rendered from.
#[derive(Debug, Clone)]
pub struct Matrix<'r> {
    pub recipe: &'r Recipe,
    pub rows: Vec<Row>,
    pub baseline: Baseline,
    /// The run's warnings, then the baseline's.
    pub warnings: Vec<String>,
    pub run_timestamp: String,
    /// The run's answer, computed once here: every rendering shows this value.
    pub answer: Answer,
    /// The doctor's verdict on the node ([`RunInfo::doctor`]).
    pub doctor: Option<aorta_doctor::NodeVerdict>,
}

impl<'r> Matrix<'r> {
    /// Resolves the baseline after the run (§6.1.2) and classifies every cell against it.
    pub fn new(recipe: &'r Recipe, cells: Vec<CellStats>, run: RunInfo) -> Matrix<'r> {
        let baseline = confound::resolve_run_baseline(recipe, &cells);
        let threshold = recipe.confound.threshold;
        let base = cells.iter().find(|c| c.name == baseline.name).cloned();
        let rows: Vec<Row> = cells
            .into_iter()
            .map(|stats| Row {
                confound: confound::classify(&stats, base.as_ref(), threshold),
                stats,
            })
            .collect();
        let mut warnings = run.warnings;
        warnings.extend(baseline.warnings.iter().cloned());
        let evidence: Vec<Evidence> = rows
            .iter()
            .map(|r| Evidence {
                name: &r.stats.name,
                mitigations: &r.stats.mitigations,
                failed: r.stats.failed_count,
                passed: r.stats.passed_count,
                slower: matches!(r.confound.tag, confound::Tag::Speed { .. }),
                outcomes: &r.stats.outcomes,
                steps: &r.stats.step_times_by_trial,
            })
            .collect();
        let answer = Answer::of(&baseline.name, &evidence, recipe.auto.as_ref(), threshold);
        Matrix {
            recipe,
            rows,
            baseline,
            warnings,
            run_timestamp: run.run_timestamp,
            answer,
            doctor: run.doctor,
        }
    }

    /// Why the run should not be trusted as a comparison (the CLI then exits 1), if it shouldn't.
    pub fn incomplete_reason(&self) -> Option<&str> {
        self.baseline.incomplete_reason.as_deref()
    }

    pub fn baseline_row(&self) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.stats.name == self.baseline.name)
    }

    /// `stop_after.max_trials` under a stop rule, else the recipe's trials.
    pub fn trials_per_cell(&self) -> u32 {
        self.recipe
            .stop_after
            .map_or(self.recipe.trials, |s| s.max_trials)
    }

    pub fn cell_dir(&self, cell: &str) -> String {
        layout::cell_dir(self.recipe.mode, cell)
    }
}
