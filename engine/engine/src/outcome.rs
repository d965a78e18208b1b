//! What a build reports: its counts, its summary and each cell's outcome.

use std::path::PathBuf;

/// What a build did.
#[derive(Debug, Clone)]
pub struct BuildOutcome {
    pub run_dir: PathBuf,
    /// Trials executed by this build, and trials served from the store or the remote.
    pub executed: usize,
    pub reused: usize,
    /// Artifacts rendered, restored from the store, and already in place.
    pub rendered: usize,
    pub restored: usize,
    pub unchanged: usize,
    /// Trials that could not run (the store refused them, a claim failed).
    pub failed_to_run: Vec<String>,
    /// Whether any of `failed_to_run` was the store's or the run directory's doing (a full
    /// disk, …): an infrastructure failure, not the trial's own.
    pub unrecorded_infrastructure: bool,
    pub cancelled: bool,
    /// Trials left running on the cluster (`--executor slurm --detach`).
    pub detached: usize,
    /// Stored trials re-run because their outputs no longer read back (a corrupt or missing
    /// blob): the store healed.
    pub healed: usize,
    /// Paths in the run directory (relative) that an earlier matrix left and this build
    /// removed: trial or cell directories no longer in the recipe.
    pub pruned: Vec<String>,
    /// The end-of-run summary (AORTA's lines).
    pub summary: String,
    /// Set when the matrix could not name a usable baseline.
    pub incomplete: Option<String>,
    pub cells: Vec<CellOutcome>,
    /// The run's answer (each cell's call against the baseline), once the matrix is folded.
    pub answer: Option<aorta_report::Answer>,
    /// What the run's pages say about the node (this build's preflight, else the record an
    /// earlier one left): `--json` carries it so CI can read a marked node without parsing
    /// env.json.
    pub doctor: Option<aorta_doctor::NodeVerdict>,
}

/// One cell's outcome, for exit codes and one-line reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CellOutcome {
    pub name: String,
    pub trials: usize,
    pub passed: usize,
    /// Trials whose verdict is `error` (they could not say pass or fail).
    pub errored: usize,
    /// Trials that ended without a result (not run or not recorded): not in `trials`.
    #[serde(default)]
    pub unrecorded: usize,
    /// Why the cell could not run at all (an unknown workload, a workload that cannot start).
    pub error: Option<String>,
}

impl BuildOutcome {
    /// Cells that errored (a cell error, or every trial's verdict `error`) or never ran a
    /// trial: `--strict` fails the build on them.
    pub fn unfinished_cells(&self) -> Vec<&CellOutcome> {
        self.cells
            .iter()
            .filter(|c| c.error.is_some() || c.trials == 0 || c.errored == c.trials)
            .collect()
    }
}
