//! The trial records of a built target, read back from the store by key: what a caller that
//! decides on verdicts (the agent) needs after a build, whether the build executed the trials,
//! reused them, or found the whole run directory already in place (the cached fast path,
//! which reports no per-trial events).

use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use crate::session::Session;
use aorta_store::Lookup;
use aorta_trial::TrialRecord;

impl Session {
    /// Per cell (recipe order), the records of its planned trials that the store holds, by
    /// trial index. A trial that never ran (cancelled, refused) is simply absent.
    pub fn trial_records(&self, c: &Compiled) -> Result<Vec<Vec<TrialRecord>>> {
        let store = self.store()?;
        let mut out = Vec::with_capacity(c.recipe.cells.len());
        for cell in 0..c.recipe.cells.len() {
            let mut records = Vec::new();
            for i in c.dag.cell_trials(cell) {
                let key = &c.planned()[i].key;
                match store.lookup_as::<TrialRecord>(key) {
                    Ok(Lookup::Hit(m)) => records.push(m.trial),
                    Ok(Lookup::Miss | Lookup::Corrupt { .. }) => {}
                    Err(e) => {
                        return Err(EngineError::infra(format!(
                            "store lookup of {key} failed: {e}"
                        )))
                    }
                }
            }
            records.sort_by_key(|r| r.trial_index);
            out.push(records);
        }
        Ok(out)
    }
}
