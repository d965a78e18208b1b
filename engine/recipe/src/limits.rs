//! Size limits on recipes. Each value within them is legal on its own, but together they could
//! make aorta allocate without bound before printing anything: `trials: 4294967295` (the
//! largest value the schema's integer type holds) made `--dry-run` grow by ~90 MB/s computing
//! trial keys. docs/recipes.md ("Limits") lists them.

use crate::model::Recipe;

/// The largest recipe file read, in bytes (1 MiB; the largest shipped recipe is under 2 KiB).
pub const MAX_RECIPE_BYTES: u64 = 1 << 20;
/// The most cells a recipe may have (a probe recipe's axes multiply).
pub const MAX_CELLS: u64 = 10_000;
/// The most trials a recipe may plan: the sum over its cells of their trials, or of
/// `stop_after.max_trials` when a stop rule is set.
pub const MAX_PLANNED_TRIALS: u64 = 100_000;

/// The number of trials `recipe` plans (an upper bound when `stop_after` may end cells early).
pub fn planned_trials(recipe: &Recipe) -> u64 {
    recipe
        .cells
        .iter()
        .map(|c| {
            u64::from(
                recipe
                    .stop_after
                    .map_or_else(|| c.effective_trials(recipe), |s| s.max_trials),
            )
        })
        .sum()
}

/// The message for a recipe over [`MAX_PLANNED_TRIALS`], or `None` when it is within it.
pub(crate) fn too_many_trials(recipe: &Recipe) -> Option<String> {
    let total = planned_trials(recipe);
    (total > MAX_PLANNED_TRIALS).then(|| {
        let per_cell = recipe.cells.iter().map(|c| recipe.stop_after.map_or_else(|| c.effective_trials(recipe), |s| s.max_trials)).max().unwrap_or(0);
        format!("the recipe plans {total} trials ({} cells × up to {per_cell}); at most {MAX_PLANNED_TRIALS} are allowed", recipe.cells.len())
    })
}

pub(crate) const TRIALS_HELP: &str = "lower trials (or stop_after.max_trials), or split the sweep into several recipes; see \"Limits\" in docs/recipes.md";
