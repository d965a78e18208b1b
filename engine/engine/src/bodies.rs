//! What a compiled recipe's trials run: per cell, the trial body (the user's command under the
//! probe's classifier, or a workload) and how a planned trial becomes the spec the executor
//! runs. Shared by the local build, `aorta trial exec` and the Slurm executor.

use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use crate::execute::process::{Body, CommandSettings, TrialSpec, WorkloadSettings};
use crate::schedule::MakeSpec;
use crate::session::Session;
use crate::workloads::WorkloadError;
use aorta_classify::{ClassifierConfig, CustomDetector};
use aorta_exec::HangConfig;
use aorta_graph::PlannedTrial;
use aorta_recipe::{Mode, Recipe};
use std::sync::Arc;
use std::time::Duration;

/// A probe recipe's settings that do not make a classifier or a trial's settings. The recipe
/// crate checks them when it parses, so only a recipe built around it gets here.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("not a probe recipe")]
    NotProbe,
    #[error("custom pattern {id}: {source}")]
    Pattern {
        id: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("step_time_regex: {0}")]
    StepTimeRegex(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The classifier a probe recipe's trials use: its custom patterns, VRAM check and disables.
/// A workload (triage) recipe has none of these, so it gets the built-in classifier.
pub fn classifier_config(recipe: &Recipe) -> std::result::Result<ClassifierConfig, SettingsError> {
    let Some(p) = recipe.probe.as_ref() else {
        return Ok(ClassifierConfig::default());
    };
    let mut custom = Vec::new();
    for c in &p.custom_patterns {
        let on = match c.on_match {
            aorta_recipe::OnMatch::Fail => aorta_classify::OnMatch::Fail,
            aorta_recipe::OnMatch::Warn => aorta_classify::OnMatch::Warn,
            aorta_recipe::OnMatch::Info => aorta_classify::OnMatch::Info,
        };
        custom.push(
            CustomDetector::new(
                c.id.clone(),
                &c.regex,
                c.condition.as_deref(),
                on,
                c.required_for_pass,
            )
            .map_err(|e| SettingsError::Pattern {
                id: c.id.clone(),
                source: e.into(),
            })?,
        );
    }
    Ok(ClassifierConfig {
        custom,
        tier3_vram_growth: p.tier3_vram_growth,
        disables: p.disables.clone(),
    })
}

fn command_settings(
    recipe: &Recipe,
    argv: &[String],
    inputs: &[(std::path::PathBuf, String)],
    kill_on_hang: bool,
    tracing: crate::execute::process::Tracing,
) -> std::result::Result<CommandSettings, SettingsError> {
    let p = recipe.probe.as_ref().ok_or(SettingsError::NotProbe)?;
    let classifier = classifier_config(recipe)?;
    let hang = (!p.disables.tier_disabled(aorta_classify::Tier::Tier2)
        && !p.disables.detector_disabled("tier2:hang"))
    .then(|| HangConfig {
        window: Duration::from_secs_f64(p.hang_window_sec),
        grace: Duration::from_secs_f64(p.hang_grace_period_at_start),
        kill_on_hang,
        ..HangConfig::default()
    });
    Ok(CommandSettings {
        argv: argv.to_vec(),
        timeout: p.timeout_per_trial.map(Duration::from_secs_f64),
        passthrough: p.env_passthrough_mode,
        hang,
        classifier,
        dmesg_unavailable: Default::default(),
        // One reader of /dev/kmsg per build; where it cannot be opened, dmesg per trial.
        kernel_log: if p.disables.tier_disabled(aorta_classify::Tier::Tier3) {
            None
        } else {
            aorta_classify::KernelLog::open().ok()
        },
        step_time_regex: p
            .step_time_regex
            .as_deref()
            .map(aorta_recipe::compile_regex)
            .transpose()
            .map_err(|e| SettingsError::StepTimeRegex(e.into()))?,
        inputs: inputs.to_vec(),
        work_dir: std::env::current_dir().ok(),
        tracing,
        profilers: crate::profilers::Profiler::from_recipe(&recipe.collect),
    })
}

/// Per cell, how to turn a planned trial into the spec the executor runs.
fn spec_maker(
    cell: &aorta_recipe::Cell,
    body: impl Fn() -> Body + Send + Sync + 'static,
) -> MakeSpec {
    let env = cell.resolved_env.clone();
    let name = cell.name.clone();
    let sanitizer = cell.sanitizer;
    Arc::new(move |p: &PlannedTrial| TrialSpec {
        key: p.key.clone(),
        cell: name.clone(),
        index: p.index,
        env: env.clone(),
        sanitizer,
        body: body(),
    })
}

/// The trial bodies per cell; a cell whose workload cannot run gets its error instead.
pub(crate) fn bodies(
    session: &Session,
    c: &Compiled,
) -> Result<Vec<std::result::Result<MakeSpec, WorkloadError>>> {
    let recipe = &c.recipe;
    let mut out = Vec::new();
    match recipe.mode {
        Mode::Probe => {
            let argv = c.argv.as_deref().filter(|a| !a.is_empty()).ok_or_else(|| {
                // The hint names the target as it can be typed: its label, else its file.
                let file = c.recipe.source.as_ref().map(|s| s.path.display().to_string());
                let target = match (&c.target_label, file) {
                    (Some(l), _) if l.starts_with("//") => l.clone(),
                    (_, Some(f)) => f,
                    (l, None) => l.clone().unwrap_or_else(|| c.label.clone()),
                };
                EngineError::usage(
                    format!("{}: a probe recipe needs a command: give it after -- or as the target's `command` in BUCK", c.label),
                    format!("aorta build {target} -- bash launch.sh"),
                )
            })?;
            let settings = Arc::new(
                command_settings(
                    recipe,
                    argv,
                    &c.input_digests,
                    session.opts.kill_on_hang,
                    session.tracing(),
                )
                .map_err(|e| {
                    EngineError::usage(
                        format!("{}: {e}", c.label),
                        "see docs/recipes.md for custom patterns and step_time_regex",
                    )
                })?,
            );
            for cell in &recipe.cells {
                let settings = settings.clone();
                out.push(Ok(spec_maker(cell, move || {
                    Body::Command(settings.clone())
                })));
            }
        }
        Mode::Triage => {
            for cell in &recipe.cells {
                let w = match &c.workload {
                    Some(Ok(w)) => w.clone(),
                    Some(Err(e)) => {
                        out.push(Err(e.clone()));
                        continue;
                    }
                    None => {
                        out.push(Err(WorkloadError::Unresolved(recipe.workload.clone())));
                        continue;
                    }
                };
                let settings = Arc::new(WorkloadSettings {
                    profilers: crate::profilers::Profiler::from_recipe(
                        cell.effective_collect(recipe),
                    ),
                    workload: w,
                    steps: cell.effective_steps(recipe),
                    config: cell.effective_workload_config(recipe),
                    timeout: session.workload_timeout(),
                });
                out.push(Ok(spec_maker(cell, move || {
                    Body::Workload(settings.clone())
                })));
            }
        }
    }
    Ok(out)
}
