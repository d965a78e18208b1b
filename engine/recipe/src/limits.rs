//! Size limits on recipes. Each value within them is legal on its own, but together they could
//! make aorta allocate without bound before printing anything: `trials: 4294967295` (the
//! largest value the schema's integer type holds) made `--dry-run` grow by ~90 MB/s computing
//! trial keys. docs/recipes.md ("Limits") lists them.

use crate::model::{Cell, Recipe};

/// The largest recipe file read, in bytes (1 MiB; the largest shipped recipe is under 2 KiB).
pub const MAX_RECIPE_BYTES: u64 = 1 << 20;
/// The most cells a recipe may have (a probe recipe's axes multiply).
pub const MAX_CELLS: u64 = 10_000;
/// The most trials a recipe may plan: the sum over its cells of their trials, or of
/// `stop_after.max_trials` when a stop rule is set.
pub const MAX_PLANNED_TRIALS: u64 = 100_000;

/// The most bytes of cell settings a recipe may expand to: over all cells, the compact JSON of
/// the cell's settings (triage: its effective `workload_config`; probe: the classifier
/// settings) plus its env vars. Recipe-level settings are copied into every cell (and its plan
/// and trial keys), so 64 KiB of `workload_config` over 10,000 cells would be 640 MB to plan.
/// At 16 MiB a dry run took 8 s (debug build, loaded machine); at 4 MiB about 2 s.
pub const MAX_CELL_SETTINGS_BYTES: u64 = 4 << 20;

fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    serde_json::to_vec(value).map_or(0, |v| v.len() as u64)
}

/// What every cell's key carries besides its own settings: the recipe-level `workload_config`
/// (triage) or the classifier settings (probe).
pub(crate) fn shared_settings_bytes(recipe: &Recipe) -> u64 {
    match &recipe.probe {
        Some(p) => json_len(&(
            &p.custom_patterns,
            &p.collect_paths,
            &p.step_time_regex,
            &p.disables,
        )),
        None if recipe.workload_config.is_empty() => 0,
        None => json_len(&recipe.workload_config),
    }
}

pub(crate) fn cell_settings_bytes(cell: &Cell) -> u64 {
    let own = cell
        .workload_config
        .as_ref()
        .filter(|c| !c.is_empty())
        .map_or(0, json_len);
    own + cell
        .resolved_env
        .iter()
        .map(|(k, v)| (k.len() + v.len() + 2) as u64)
        .sum::<u64>()
}

/// The message for a recipe whose cells expand to more than [`MAX_CELL_SETTINGS_BYTES`] of
/// settings, with the index of the heaviest cell (`None`: the shared settings weigh most).
pub(crate) fn too_many_settings(recipe: &Recipe) -> Option<(String, Option<usize>)> {
    let shared = shared_settings_bytes(recipe);
    let cells = recipe.cells.len() as u64;
    let own: Vec<u64> = recipe.cells.iter().map(cell_settings_bytes).collect();
    let own_total = own.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let total = shared.saturating_mul(cells).saturating_add(own_total);
    (total > MAX_CELL_SETTINGS_BYTES).then(|| {
        let what = if recipe.probe.is_some() { "the classifier settings (custom_patterns, collect_paths, step_time_regex)" } else { "the recipe-level workload_config" };
        let message = format!(
            "the {cells} cells' settings (workload_config and env vars as JSON, per cell) add up to {total} bytes; at most {MAX_CELL_SETTINGS_BYTES} are allowed{}",
            if shared > 0 { format!("; {what} ({shared} bytes) is copied into every cell") } else { String::new() }
        );
        let heaviest = own.iter().enumerate().max_by_key(|(_, b)| **b).map(|(i, _)| i);
        (message, if shared.saturating_mul(cells) >= own_total { None } else { heaviest })
    })
}

/// The message when cells built so far already hold more than [`MAX_CELL_SETTINGS_BYTES`] of
/// their own settings (checked while cells are built, so a registry bundle of 100,000 env vars
/// used by 10,000 cells stops at the limit instead of being copied 10,000 times first).
pub(crate) fn own_settings_past_limit(own_total: u64, cells_so_far: usize) -> Option<String> {
    (own_total > MAX_CELL_SETTINGS_BYTES).then(|| format!("the first {cells_so_far} cells' settings (workload_config and env vars as JSON, per cell) already add up to {own_total} bytes; at most {MAX_CELL_SETTINGS_BYTES} are allowed"))
}

pub(crate) const SETTINGS_HELP: &str = "settings are copied into every cell and every trial's key: keep workload_config, env vars and patterns to what the trials need, or split the sweep; see \"Limits\" in docs/recipes.md";

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
