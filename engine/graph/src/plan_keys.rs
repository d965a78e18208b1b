//! From a resolved recipe to every trial's key inputs.

use crate::key::{
    canonical_json, EnvironmentDescriptor, ExecutionKey, HashError, KeyInputs, KeyedResources,
    WorkloadIdentity, KEY_SCHEMA_VERSION,
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
    /// The recipe's workload as resolved (workload flow), if it was.
    pub workload: Option<ResolvedWorkload>,
    /// The invocation's settings that can change a verdict (`--kill-on-hang`, …); each cell's
    /// keyed resources are filled in from the recipe.
    pub execution: ExecutionKey,
}

/// A workload executable as the engine found it: what of it enters the keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedWorkload {
    pub name: String,
    /// What its `describe` says.
    pub version: String,
    pub executable_blake3: String,
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
    /// The tool a sanitizer cell runs its command under (absent otherwise, so other cells'
    /// keys are unchanged); with the sanitizer's report parser version.
    #[serde(skip_serializing_if = "Option::is_none")]
    sanitizer: Option<(&'static str, u32)>,
    /// Kernel profilers the command runs under (absent when none: other keys unchanged).
    /// A profiler serialises kernels and slows them, so it can change a verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    collect: Vec<&'a str>,
}

fn probe_config(recipe: &Recipe, cell: &Cell) -> Result<String, HashError> {
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
        sanitizer: cell.sanitizer.map(|t| {
            (
                t.tool(),
                match t.vendor() {
                    aorta_registry::SanitizerVendor::Cuda => {
                        aorta_classify::SANITIZER_PARSER_VERSION
                    }
                    aorta_registry::SanitizerVendor::Rocm => {
                        aorta_classify::ROCJITSU_PARSER_VERSION
                    }
                },
            )
        }),
        collect: recipe.collect.names(),
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
            let (version, exe) = match &ctx.workload {
                Some(w) if w.name == recipe.workload => {
                    (w.version.clone(), Some(w.executable_blake3.clone()))
                }
                _ => ("unresolved".into(), None),
            };
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
        Mode::Probe => probe_config(recipe, cell),
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
            // A failing workload trial's logs are classified (its detectors are in its record).
            cfg.insert(
                "_classifier_library".into(),
                aorta_classify::PATTERN_LIBRARY_VERSION.into(),
            );
            canonical_json(&serde_json::Value::Object(cfg))
        }
    }
}

/// What of the invocation's settings and the cell's resources can change this cell's verdicts:
/// a setting that does not apply to the recipe's flow is left out, so it re-runs nothing.
fn execution_key(recipe: &Recipe, cell: &Cell, invocation: &ExecutionKey) -> ExecutionKey {
    let r = cell.effective_resources(recipe);
    ExecutionKey {
        resources: KeyedResources {
            gpus_per_trial: r.gpus_per_trial,
            cpus_per_trial: r.cpus_per_trial,
            mem_per_trial: r.mem_per_trial,
            time_limit_secs: r.time_limit_secs,
            partition: r.partition,
            constraint: r.constraint,
            sbatch_args: r.sbatch_args,
        },
        kill_on_hang: recipe.mode == Mode::Probe && invocation.kill_on_hang,
        workload_timeout_ms: match recipe.mode {
            Mode::Triage => invocation.workload_timeout_ms,
            Mode::Probe => None,
        },
        containment_off: invocation.containment_off,
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
        let execution = Arc::new(execution_key(recipe, cell, &ctx.execution));
        let shared = KeyInputs {
            key_schema: KEY_SCHEMA_VERSION,
            workload: workload.clone(),
            config: config.clone(),
            env: env.clone(),
            environment: environment.clone(),
            env_snapshot: env_snapshot.clone(),
            execution,
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

/// Every recipe field and what it does to a trial's key, checked against the structs: a new
/// field that is not classified here does not compile (the destructuring is exhaustive), and
/// one missing from docs/cache-keys.md's table fails the test.
#[cfg(test)]
mod classification {
    use aorta_recipe::{Cell, ProbeSettings, Recipe, Resources};

    macro_rules! classified {
        ($fname:ident: $ty:ident { $($field:ident => $class:literal),* $(,)? }) => {
            fn $fname(v: Option<&$ty>) -> Vec<(&'static str, &'static str)> {
                if let Some($ty { $($field: _),* }) = v {}
                vec![$((stringify!($field), $class)),*]
            }
        };
    }

    classified!(recipe_fields: Recipe {
        source => "not keyed: where the recipe was read from",
        mode => "keyed: decides the workload identity (command or workload)",
        ticket => "not keyed: a label",
        workload => "keyed: workload",
        trials => "keyed as trial_index: raising it runs only the new trials",
        steps => "keyed: config (workload flow)",
        save_logs => "not keyed: what is kept",
        workload_config => "keyed: config (workload flow)",
        collect => "keyed: config (workload flow's collectors; a probe recipe's kernel profilers)",
        extra_env => "keyed through env: folded into every cell's env",
        trial_isolation => "not keyed: every trial runs as a process of its own whatever it says",
        confound => "not keyed: how cells are summarised",
        stop_after => "not keyed: how many trials run",
        auto => "not keyed: how many trials run (trials: auto)",
        env_key => "keyed: the rules that make env_snapshot",
        inputs => "keyed: workload.inputs (the files its globs match)",
        ignore_inputs => "not keyed: which traced paths reuse verifies",
        cells => "keyed per cell: env, environment, execution",
        resources => "keyed: execution.resources (all but account)",
        doctor => "not keyed: a precondition on the node (aorta doctor), never a trial input",
        inline_environments => "keyed: environment (the docker reference)",
        probe => "keyed: config (subprocess flow), see ProbeSettings",
        registry_files => "keyed through env: the values they resolve to",
    });
    classified!(cell_fields: Cell {
        name => "not keyed: a label",
        mitigations => "keyed through env: their resolved values, not their names",
        environment => "keyed: environment (docker, venv, buck_target; not the name)",
        extra_env => "keyed through env",
        trials => "keyed as trial_index",
        steps => "keyed: config (workload flow)",
        workload_config => "keyed: config (workload flow)",
        collect => "keyed: config (workload flow)",
        resolved_env => "keyed: env",
        env_origin => "not keyed: which mitigation set a variable",
        resources => "keyed: execution.resources",
        sanitizer => "keyed: config (subprocess flow: the tool and its report parser's version)",
    });
    classified!(probe_fields: ProbeSettings {
        mitigation_axis => "keyed through env",
        diagnostic_axis => "keyed through env",
        step_time_regex => "keyed: config",
        collect_paths => "keyed: config",
        timeout_per_trial => "keyed: config",
        env_passthrough_mode => "keyed: config",
        custom_patterns => "keyed: config",
        hang_window_sec => "keyed: config",
        hang_grace_period_at_start => "keyed: config",
        tier3_vram_growth => "keyed: config",
        disables => "keyed: config",
        retain => "not keyed: what is kept",
        redaction => "not keyed: what is kept",
    });
    classified!(resource_fields: Resources {
        gpus_per_trial => "keyed: execution.resources",
        cpus_per_trial => "keyed: execution.resources",
        mem_per_trial => "keyed: execution.resources",
        time_limit_secs => "keyed: execution.resources",
        partition => "keyed: execution.resources (picks the hardware)",
        account => "not keyed: who pays",
        constraint => "keyed: execution.resources (picks the hardware)",
        sbatch_args => "keyed: execution.resources",
    });

    #[test]
    fn every_recipe_field_is_classified_in_docs_cache_keys() {
        let doc = include_str!("../../../docs/cache-keys.md");
        let mut missing = Vec::new();
        for (ty, fields) in [
            ("Recipe", recipe_fields(None)),
            ("Cell", cell_fields(None)),
            ("ProbeSettings", probe_fields(None)),
            ("Resources", resource_fields(None)),
        ] {
            for (field, class) in fields {
                assert!(class.starts_with("keyed") || class.starts_with("not keyed"));
                if !doc.contains(&format!("`{ty}.{field}`")) {
                    missing.push(format!("{ty}.{field} ({class})"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "docs/cache-keys.md's field table lacks: {}",
            missing.join(", ")
        );
    }
}
