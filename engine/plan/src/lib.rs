//! The plan of a recipe: what `--dry-run` prints and `--json` emits. It lists every cell with
//! its resolved env vars (and which mitigation set each one), its trials, and the inputs each
//! trial's cache key will be built from, so a user can see what a change would invalidate
//! before running anything.

mod render;

use aorta_graph::PlannedTrial;
use aorta_recipe::{
    Cell, EnvironmentRef, JsonMap, Mode, PassthroughMode, Recipe, Resources, StopAfter,
};
use serde::Serialize;
use std::path::PathBuf;

pub use aorta_graph::KEY_SCHEMA_VERSION;

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub label: Option<String>,
    pub recipe_path: Option<PathBuf>,
    pub recipe_blake3: Option<String>,
    pub mode: Mode,
    pub ticket: Option<String>,
    pub workload: String,
    /// The user's command in the subprocess flow, forwarded byte-for-byte.
    pub argv: Option<Vec<String>>,
    pub env_passthrough_mode: Option<PassthroughMode>,
    pub timeout_per_trial: Option<f64>,
    pub disabled_tiers: Vec<String>,
    pub disabled_detectors: Vec<String>,
    pub stop_after: Option<StopAfter>,
    pub baseline_cell: String,
    pub baseline_explicit: bool,
    pub confound_threshold: f64,
    pub recipe_workload_config: JsonMap,
    pub inline_environments: Vec<(String, String)>,
    pub registry_files: Vec<PathBuf>,
    pub cells: Vec<CellPlan>,
    /// Upper bound on trials (stop_after may end cells earlier).
    pub total_trials: u64,
    /// `trials: auto`: the cap, confidence and budget (cells' `trials` are then the cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<aorta_recipe::AutoTrials>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CellPlan {
    pub name: String,
    pub mitigations: Vec<String>,
    pub environment: EnvironmentRef,
    pub env: Vec<EnvVar>,
    pub extra_env_keys: Vec<String>,
    pub trials: u32,
    pub steps: u32,
    pub workload_config: JsonMap,
    /// Whether `workload_config` differs from the recipe-level one (the cell overrides keys).
    pub workload_config_overridden: bool,
    pub collect: Vec<String>,
    pub collect_overridden: bool,
    /// What each trial takes of a machine (`gpus_per_trial`, ...): placement, not key input.
    #[serde(skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
    /// The compute-sanitizer tool a sanitizer cell's command runs under (keyed in `config`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<aorta_registry::Sanitizer>,
    pub key_inputs: KeyInputs,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnvVar {
    pub key: String,
    pub value: String,
    /// The mitigation that set it, or `extra_env`.
    pub origin: String,
}

/// What every trial key of the cell is made of; trials differ only in `trial_index`.
#[derive(Debug, Clone, Serialize)]
pub struct KeyInputs {
    pub key_schema: u32,
    /// `workload:<name>` or `argv:[...]` for the subprocess flow.
    pub workload_identity: String,
    /// blake3 of the canonical JSON of the effective workload config.
    pub config_blake3: String,
    /// blake3 of the resolved env vars as sorted `K=V\n` lines.
    pub env_blake3: String,
    /// The environment descriptor (name, docker, venv, buck_target).
    pub environment: String,
    /// The environment snapshot's key under the recipe's `env_key` rules.
    pub env_snapshot: String,
    /// The trial keys, by trial index.
    pub trial_keys: Vec<String>,
}

fn short_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex()[..16].to_string()
}

fn describe_environment(e: &EnvironmentRef) -> String {
    let mut parts = vec![e.name.clone()];
    for (k, v) in [
        ("docker", &e.docker),
        ("venv", &e.venv),
        ("buck_target", &e.buck_target),
    ] {
        if let Some(v) = v {
            parts.push(format!("{k}={v}"));
        }
    }
    parts.join(" ")
}

/// Builds the plan from the trials the engine compiled (the very keys a build stores);
/// `argv` is the wrapped command of a probe recipe.
pub fn plan(
    recipe: &Recipe,
    label: Option<&str>,
    argv: Option<&[String]>,
    planned: &[PlannedTrial],
) -> Plan {
    let mut by_cell: Vec<Vec<&PlannedTrial>> = vec![Vec::new(); recipe.cells.len()];
    for p in planned {
        if let Some(v) = by_cell.get_mut(p.cell) {
            v.push(p);
        }
    }
    let cells: Vec<CellPlan> = recipe
        .cells
        .iter()
        .zip(&by_cell)
        .map(|(c, mine)| cell_plan(recipe, c, argv, mine))
        .collect();
    let total_trials = cells.iter().map(|c| u64::from(c.trials)).sum();
    let probe = recipe.probe.as_ref();
    Plan {
        label: label.map(str::to_string),
        recipe_path: recipe.source.as_ref().map(|s| s.path.clone()),
        recipe_blake3: recipe.source.as_ref().map(|s| s.blake3.clone()),
        mode: recipe.mode,
        ticket: recipe.ticket.clone(),
        workload: recipe.workload.clone(),
        argv: argv.map(<[String]>::to_vec),
        env_passthrough_mode: probe.map(|p| p.env_passthrough_mode),
        timeout_per_trial: probe.and_then(|p| p.timeout_per_trial),
        disabled_tiers: probe
            .map(|p| {
                p.disables
                    .tiers
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        disabled_detectors: probe
            .map(|p| p.disables.detectors.clone())
            .unwrap_or_default(),
        stop_after: recipe.stop_after,
        baseline_cell: recipe.confound.resolved_baseline.clone(),
        baseline_explicit: recipe.confound.baseline_cell.is_some(),
        confound_threshold: recipe.confound.threshold,
        recipe_workload_config: recipe.workload_config.clone(),
        inline_environments: recipe
            .inline_environments
            .iter()
            .map(|e| (e.name.clone(), e.docker.clone()))
            .collect(),
        registry_files: recipe.registry_files.clone(),
        cells,
        total_trials,
        auto: recipe.auto,
    }
}

fn cell_plan(
    recipe: &Recipe,
    cell: &Cell,
    argv: Option<&[String]>,
    mine: &[&PlannedTrial],
) -> CellPlan {
    let trials = match recipe.stop_after {
        Some(s) => s.max_trials,
        None => cell.effective_trials(recipe),
    };
    let workload_config = cell.effective_workload_config(recipe);
    let env: Vec<EnvVar> = cell
        .resolved_env
        .iter()
        .map(|(k, v)| EnvVar {
            key: k.clone(),
            value: v.clone(),
            origin: cell.env_origin.get(k).cloned().unwrap_or_default(),
        })
        .collect();
    let env_lines: String = env
        .iter()
        .map(|e| format!("{}={}\n", e.key, e.value))
        .collect();
    let config_json = mine
        .first()
        .map(|p| p.inputs.config.to_string())
        .unwrap_or_default();
    let env_snapshot = mine
        .first()
        .map(|p| p.inputs.env_snapshot.to_string())
        .unwrap_or_default();
    let workload_identity = match (recipe.mode, argv) {
        (Mode::Probe, Some(a)) => format!("argv:{}", serde_json::to_string(a).unwrap_or_default()),
        (Mode::Probe, None) => "argv:(given after --)".to_string(),
        // The version and executable hash are in the trial keys; the name is what reads well.
        (Mode::Triage, _) => format!("workload:{}", recipe.workload),
    };
    let collect = cell
        .effective_collect(recipe)
        .names()
        .into_iter()
        .map(str::to_string)
        .collect();
    CellPlan {
        name: cell.name.clone(),
        mitigations: cell.mitigations.clone(),
        environment: cell.environment.clone(),
        extra_env_keys: cell.extra_env.keys().cloned().collect(),
        env,
        trials,
        steps: cell.effective_steps(recipe),
        workload_config_overridden: cell.workload_config.as_ref().is_some_and(|w| !w.is_empty()),
        workload_config,
        collect,
        collect_overridden: cell.collect.is_some(),
        resources: cell.effective_resources(recipe),
        sanitizer: cell.sanitizer,
        key_inputs: KeyInputs {
            key_schema: KEY_SCHEMA_VERSION,
            workload_identity,
            config_blake3: short_hash(config_json.as_bytes()),
            env_blake3: short_hash(env_lines.as_bytes()),
            environment: describe_environment(&cell.environment),
            env_snapshot,
            trial_keys: mine.iter().map(|p| p.key.to_string()).collect(),
        },
    }
}
