//! From a resolved recipe to every trial's key inputs.

use crate::key::{
    canonical_json, EnvironmentDescriptor, HashError, KeyInputs, WorkloadIdentity,
    KEY_SCHEMA_VERSION,
};
use aorta_recipe::{Cell, Mode, Recipe};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A planned trial: its cell, its index and its key inputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlannedTrial {
    pub cell: usize,
    pub index: u32,
    pub key: aorta_store::Key,
    pub inputs: KeyInputs,
}

/// Facts from outside the recipe that keys depend on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct KeyContext {
    /// The environment snapshot's key under the recipe's `env_key` rules (`aorta env key`).
    pub env_snapshot: String,
    /// The subprocess flow's command.
    pub argv: Option<Vec<String>>,
    /// Content hashes (blake3 hex) of input files, by the path as written.
    pub input_hashes: BTreeMap<String, String>,
    /// Resolved workload executables by name (workload flow).
    pub workloads: BTreeMap<String, (String, Option<String>)>,
}

/// What the subprocess flow's verdict depends on besides the command and env: timeouts and
/// every classifier setting. Retention, redaction, stop_after and confound are not in it:
/// they change what is kept or how it is summarised, not a trial's result. Hashed as canonical
/// JSON, so a field's name is part of every probe-mode key.
#[derive(serde::Serialize)]
struct ProbeKeyConfig<'a> {
    timeout_per_trial: Option<f64>,
    env_passthrough_mode: &'a aorta_recipe::PassthroughMode,
    custom_patterns: &'a [aorta_recipe::CustomPattern],
    hang_window_sec: f64,
    hang_grace_period_at_start: f64,
    tier3_vram_growth: bool,
    disables: &'a aorta_classify::Disables,
    step_time_regex: &'a Option<String>,
    collect_paths: &'a [String],
    classifier_library: &'static str,
}

fn probe_config(recipe: &Recipe) -> Result<String, HashError> {
    let Some(p) = &recipe.probe else {
        return Ok("{}".into());
    };
    canonical_json(&ProbeKeyConfig {
        timeout_per_trial: p.timeout_per_trial,
        env_passthrough_mode: &p.env_passthrough_mode,
        custom_patterns: &p.custom_patterns,
        hang_window_sec: p.hang_window_sec,
        hang_grace_period_at_start: p.hang_grace_period_at_start,
        tier3_vram_growth: p.tier3_vram_growth,
        disables: &p.disables,
        step_time_regex: &p.step_time_regex,
        collect_paths: &p.collect_paths,
        classifier_library: aorta_classify::PATTERN_LIBRARY_VERSION,
    })
}

/// The workload's identity. A workload recipe whose workload was not resolved keys as
/// `"unresolved"`: such a cell cannot run (its error is reported), and every entry point gets
/// its context from the engine's one resolver, so plan, explain and build agree.
fn workload_identity(recipe: &Recipe, ctx: &KeyContext) -> WorkloadIdentity {
    match recipe.mode {
        Mode::Probe => WorkloadIdentity::Command {
            argv: ctx.argv.clone().unwrap_or_default(),
            inputs: ctx.input_hashes.clone(),
        },
        Mode::Triage => {
            let (version, exe) = ctx
                .workloads
                .get(&recipe.workload)
                .cloned()
                .unwrap_or_else(|| ("unresolved".into(), None));
            WorkloadIdentity::Workload {
                name: recipe.workload.clone(),
                version,
                executable_blake3: exe,
            }
        }
    }
}

fn cell_config(recipe: &Recipe, cell: &Cell) -> Result<String, HashError> {
    match recipe.mode {
        Mode::Probe => probe_config(recipe),
        Mode::Triage => {
            let mut cfg = cell.effective_workload_config(recipe);
            cfg.insert("steps".into(), cell.effective_steps(recipe).into());
            let collect: Vec<serde_json::Value> = cell
                .effective_collect(recipe)
                .collectors
                .iter()
                .map(|(n, o)| serde_json::json!({"name": n, "options": o}))
                .collect();
            if !collect.is_empty() {
                cfg.insert("_collect".into(), collect.into());
            }
            canonical_json(&serde_json::Value::Object(cfg))
        }
    }
}

/// The number of trials a cell may run: its own count, or the stop_after cap.
pub fn trial_count(recipe: &Recipe, cell: &Cell) -> u32 {
    recipe
        .stop_after
        .map_or_else(|| cell.effective_trials(recipe), |s| s.max_trials)
}

pub fn trial_inputs(recipe: &Recipe, ctx: &KeyContext) -> Result<Vec<PlannedTrial>, HashError> {
    let workload = Arc::new(workload_identity(recipe, ctx));
    let env_snapshot: Arc<str> = ctx.env_snapshot.as_str().into();
    let mut out = Vec::new();
    for (ci, cell) in recipe.cells.iter().enumerate() {
        let config: Arc<str> = cell_config(recipe, cell)?.into();
        let env = Arc::new(cell.resolved_env.clone());
        let environment = Arc::new(EnvironmentDescriptor {
            docker: cell.environment.docker.clone(),
            venv: cell.environment.venv.clone(),
            buck_target: cell.environment.buck_target.clone(),
        });
        let shared = KeyInputs {
            key_schema: KEY_SCHEMA_VERSION,
            workload: workload.clone(),
            config: config.clone(),
            env: env.clone(),
            environment: environment.clone(),
            env_snapshot: env_snapshot.clone(),
            trial_index: 0,
        };
        let keyer = shared.keyer()?;
        for index in 0..trial_count(recipe, cell) {
            let inputs = KeyInputs {
                trial_index: index,
                ..shared.clone()
            };
            out.push(PlannedTrial {
                cell: ci,
                index,
                key: keyer.key(index)?,
                inputs,
            });
        }
    }
    Ok(out)
}
