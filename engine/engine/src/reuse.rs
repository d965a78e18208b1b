//! Whether a stored trial may stand in for running it again, and the re-executions a user
//! forces (`--rerun`, `--rerun-cell`).
//!
//! A store hit is reused only if its verdict is a result (`pass`, `fail`, a timeout, which
//! reads `error` but is what the trial did under a limit its key holds): any other `error`
//! says the trial could not run (a missing program, an env file rejected, an infrastructure
//! fault), which an install or a retry may fix, so it is kept for the report but executed
//! again by the next build (Bazel does not cache a failed action either).

use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use aorta_store::{Key, LocalStore, Lookup};
use aorta_trial::{TrialRecord, Verdict};
use std::collections::HashSet;

/// Why a stored entry is not reused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReused {
    /// Its verdict is `error`: errors are never reused.
    Errored,
    /// A traced input changed or was removed since the trial read it (which, how).
    InputChanged(crate::traced::InputChange),
}

impl std::fmt::Display for NotReused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReused::Errored => {
                f.write_str("its stored verdict is error (errors are never reused)")
            }
            NotReused::InputChanged(what) => what.fmt(f),
        }
    }
}

/// The one rule every lookup that decides between reusing and executing applies (the local
/// scheduler, the Slurm executor's first lookup, a Slurm task's re-check, `explain`): a result,
/// not an error, whose traced inputs still hold.
pub(crate) fn reusable(
    record: &TrialRecord,
    store: &LocalStore,
    inputs: &crate::traced::Inputs,
) -> std::result::Result<(), NotReused> {
    // A timeout's verdict is `error` (AORTA's tier1:timeout), but it is what the trial did
    // under its limit, and the limit is in the key: a result.
    if record.verdict == Verdict::Error && !record.timed_out {
        return Err(NotReused::Errored);
    }
    inputs
        .verify(store, record.inputs.as_ref())
        .map_err(NotReused::InputChanged)
}

/// Which stored results a build executes again although they are reusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RerunWhat {
    /// Every trial of the selected cells.
    #[default]
    All,
    /// Trials whose stored verdict is not `pass` (fail; errors always run again).
    Failed,
}

/// `--rerun all|failed` and `--rerun-cell NAME…`: empty asks for nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rerun {
    pub what: Option<RerunWhat>,
    /// Only these cells (empty with `what`: every cell).
    pub cells: Vec<String>,
}

impl Rerun {
    pub fn is_empty(&self) -> bool {
        self.what.is_none() && self.cells.is_empty()
    }

    /// The stored entries of `c` this request re-executes, forgotten from the local store so
    /// that every executor (local slots, a Slurm task's re-check, Buck2's `trial exec`) misses
    /// them; the build then stores the new results in their place. The keys are returned so
    /// the remote tier is not asked for them either.
    pub(crate) fn apply(&self, store: &LocalStore, c: &Compiled) -> Result<HashSet<Key>> {
        self.apply_to(store, c, c.planned())
    }

    /// [`Rerun::apply`] to some of `c`'s planned trials (`aorta trial exec`: its one).
    pub(crate) fn apply_to(
        &self,
        store: &LocalStore,
        c: &Compiled,
        planned: &[aorta_graph::PlannedTrial],
    ) -> Result<HashSet<Key>> {
        let mut cells = Vec::new();
        for name in &self.cells {
            cells.push(c.cell_index(name)?);
        }
        let what = self.what.unwrap_or_default();
        let mut forced = HashSet::new();
        for p in planned {
            if !cells.is_empty() && !cells.contains(&p.cell) {
                continue;
            }
            if forced.contains(&p.key) {
                continue;
            }
            let stored = match store.lookup_as::<TrialRecord>(&p.key) {
                Ok(Lookup::Hit(m)) => Some(m.trial),
                Ok(Lookup::Miss | Lookup::Corrupt { .. }) => None,
                Err(e) => {
                    return Err(EngineError::infra(format!(
                        "store lookup of {} failed: {e}",
                        p.key
                    )))
                }
            };
            let Some(record) = stored else {
                continue;
            };
            if what == RerunWhat::Failed && record.verdict == Verdict::Pass {
                continue;
            }
            store
                .invalidate(&p.key)
                .map_err(|e| EngineError::infra(e.to_string()))?;
            forced.insert(p.key.clone());
        }
        Ok(forced)
    }
}
