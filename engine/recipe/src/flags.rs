//! Recipes from command-line flags (AORTA §2.7) and CLI overlays on loaded recipes (§2.8).

use crate::blocks::COLLECTORS;
use crate::cells::auto_baseline;
use crate::limits::{too_many_settings, too_many_trials, MAX_CELLS};
use crate::model::*;
use crate::names::{inline_environment_name, valid_cell_name};
use aorta_registry::Registry;
use aorta_source::{Diag, DiagKind, FieldPath};
use std::collections::BTreeMap;

type Res<T> = Result<T, Box<Diag>>;

fn usage(flag: &str, message: impl Into<String>, help: impl Into<String>) -> Box<Diag> {
    Box::new(
        Diag::new(DiagKind::Usage, message)
            .with_path(&FieldPath::named(flag))
            .with_help(help),
    )
}

/// `aorta sweep run --workload W --mitigation-axis a,b --environment-axis local,image:R …`
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FlagRecipe {
    pub workload: Option<String>,
    pub mitigation_axis: Option<String>,
    pub environment_axis: Option<String>,
    pub trials: Option<i64>,
    /// `--trials auto`: run each cell until its answer is known (`trials` is then unset).
    #[serde(default)]
    pub trials_auto: bool,
    /// `--max-trials-per-cell N` with `--trials auto`.
    #[serde(default)]
    pub max_trials_per_cell: Option<i64>,
    /// `--max-walltime 2h` with `--trials auto`: the run's budget, as the recipe's `max_walltime`.
    #[serde(default)]
    pub max_walltime: Option<String>,
    /// `--max-gpu-hours H` with `--trials auto`.
    #[serde(default)]
    pub max_gpu_hours: Option<f64>,
    pub steps: Option<i64>,
    pub ticket: Option<String>,
    pub baseline_cell: Option<String>,
    pub confound_threshold: Option<f64>,
    pub collect: Option<String>,
}

fn split_axis(flag: &str, value: &str) -> Res<Vec<String>> {
    let items: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if items.is_empty() {
        return Err(usage(
            flag,
            "the axis is empty",
            format!("pass a comma-separated list, e.g. {flag} none,tf32_off"),
        ));
    }
    Ok(items)
}

fn positive(flag: &str, v: Option<i64>) -> Res<u32> {
    let v = v.ok_or_else(|| {
        usage(
            flag,
            format!("{flag} is required in flag mode"),
            format!("pass {flag} N"),
        )
    })?;
    u32::try_from(v).ok().filter(|v| *v >= 1).ok_or_else(|| {
        usage(
            flag,
            format!("must be an integer >= 1, got {v}"),
            format!("pass {flag} N with N >= 1"),
        )
    })
}

/// Parses `--collect a,b`: names only, validated, de-duplicated in order.
pub fn parse_collect_flag(value: &str) -> Res<Collect> {
    let mut c = Collect::default();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !COLLECTORS.contains(&name) {
            return Err(usage(
                "--collect",
                format!("unknown collector '{name}'"),
                format!("valid collectors: {}", COLLECTORS.join(", ")),
            ));
        }
        if !c.collectors.iter().any(|(n, _)| n == name) {
            c.collectors.push((name.to_string(), BTreeMap::new()));
        }
    }
    Ok(c)
}

impl FlagRecipe {
    pub fn build(&self, registry: &Registry) -> Res<Recipe> {
        let missing: Vec<&str> = [
            ("--workload", self.workload.is_none()),
            ("--mitigation-axis", self.mitigation_axis.is_none()),
            ("--environment-axis", self.environment_axis.is_none()),
            ("--trials", self.trials.is_none() && !self.trials_auto),
            ("--steps", self.steps.is_none()),
        ]
        .into_iter()
        .filter_map(|(f, m)| m.then_some(f))
        .collect();
        if !missing.is_empty() {
            return Err(Box::new(
                Diag::new(
                    DiagKind::Usage,
                    format!("flag mode requires: {}", missing.join(", ")),
                )
                .with_help("pass them all, or use --recipe FILE instead"),
            ));
        }
        let workload = self.workload.clone().unwrap_or_default();
        if workload.trim().is_empty() {
            return Err(usage(
                "--workload",
                "must not be empty",
                "e.g. --workload training",
            ));
        }
        if !self.trials_auto {
            for (flag, set) in [
                ("--max-walltime", self.max_walltime.is_some()),
                ("--max-gpu-hours", self.max_gpu_hours.is_some()),
            ] {
                if set {
                    return Err(usage(
                        flag,
                        "applies only to --trials auto",
                        format!("pass --trials auto, or drop {flag}"),
                    ));
                }
            }
        }
        let max_walltime_sec = match &self.max_walltime {
            None => None,
            Some(w) => Some(crate::common::parse_duration(w).ok_or_else(|| {
                usage(
                    "--max-walltime",
                    format!("'{w}' is not a duration"),
                    crate::common::DURATION_HELP,
                )
            })?),
        };
        let max_gpu_hours = match self.max_gpu_hours {
            Some(h) if !(h > 0.0 && h.is_finite()) => {
                return Err(usage(
                    "--max-gpu-hours",
                    format!("must be a positive number of GPU-hours, got {h}"),
                    "e.g. --max-gpu-hours 4",
                ))
            }
            h => h,
        };
        let auto = match (self.trials_auto, self.max_trials_per_cell) {
            (false, Some(_)) => {
                return Err(usage(
                    "--max-trials-per-cell",
                    "applies only to --trials auto",
                    "pass --trials auto, or drop --max-trials-per-cell",
                ))
            }
            (false, None) => None,
            (true, cap) => {
                let cap = match cap {
                    None => AutoTrials::DEFAULT_MAX_TRIALS_PER_CELL,
                    Some(c) => u32::try_from(c).ok().filter(|c| *c >= 4).ok_or_else(|| {
                        usage(
                            "--max-trials-per-cell",
                            format!("must be >= 4 (the first look is at 4 trials), got {c}"),
                            "the default is 64",
                        )
                    })?,
                };
                Some(AutoTrials {
                    max_trials_per_cell: cap,
                    confidence: AutoTrials::DEFAULT_CONFIDENCE,
                    max_walltime_sec,
                    max_gpu_hours,
                    comparisons: None,
                })
            }
        };
        let trials = match auto {
            Some(a) => a.max_trials_per_cell,
            None => positive("--trials", self.trials)?,
        };
        let steps = positive("--steps", self.steps)?;
        let threshold = self.confound_threshold.unwrap_or(1.15);
        if threshold <= 0.0 || !threshold.is_finite() {
            return Err(usage(
                "--confound-threshold",
                format!("must be a number > 0, got {threshold}"),
                "the default is 1.15",
            ));
        }
        if let Some(t) = &self.ticket {
            if t.trim().is_empty() {
                return Err(usage(
                    "--ticket",
                    "must not be empty",
                    "omit --ticket to write under _no_ticket_",
                ));
            }
        }
        let mitigations = split_axis(
            "--mitigation-axis",
            self.mitigation_axis.as_deref().unwrap_or(""),
        )?;
        let envs = split_axis(
            "--environment-axis",
            self.environment_axis.as_deref().unwrap_or(""),
        )?;
        let mut inline: Vec<InlineEnvironment> = Vec::new();
        let mut env_refs = Vec::new();
        for item in &envs {
            if let Some(r) = item.strip_prefix("image:") {
                if r.trim().is_empty() {
                    return Err(usage(
                        "--environment-axis",
                        "'image:' needs an image reference",
                        "e.g. image:rocm/pytorch:latest",
                    ));
                }
                let name = inline_environment_name(r);
                if !inline.iter().any(|e| e.name == name) {
                    inline.push(InlineEnvironment {
                        name: name.clone(),
                        docker: r.to_string(),
                    });
                }
                env_refs.push(EnvironmentRef {
                    name,
                    docker: Some(r.to_string()),
                    venv: None,
                    buck_target: None,
                    inline: true,
                });
            } else {
                let env = registry.environment(item).ok_or_else(|| {
                    usage(
                        "--environment-axis",
                        format!("unknown environment '{item}'"),
                        registry.unknown_environment_hint(item),
                    )
                })?;
                env_refs.push(EnvironmentRef {
                    name: env.name.clone(),
                    docker: env.docker.clone(),
                    venv: env.venv.clone(),
                    buck_target: env.buck_target.clone(),
                    inline: false,
                });
            }
        }
        let n_cells = mitigations.len() as u64 * envs.len() as u64;
        if n_cells > MAX_CELLS {
            return Err(usage(
                "--mitigation-axis",
                format!(
                    "the axes make {} × {} = {n_cells} cells; at most {MAX_CELLS} are allowed",
                    mitigations.len(),
                    envs.len()
                ),
                "shorten an axis; see \"Limits\" in docs/recipes.md",
            ));
        }
        let mut cells: Vec<Cell> = Vec::new();
        for m in &mitigations {
            let mit = registry.mitigation(m).ok_or_else(|| {
                usage(
                    "--mitigation-axis",
                    format!("unknown mitigation '{m}'"),
                    registry.unknown_mitigation_hint(m),
                )
            })?;
            for env in &env_refs {
                let name = format!("{m}-{}", env.name);
                if !valid_cell_name(&name) {
                    return Err(usage(
                        "--mitigation-axis",
                        format!("cell name '{name}' is not allowed"),
                        "mitigation and environment names must make a valid directory name",
                    ));
                }
                if cells.iter().any(|c| c.name == name) {
                    return Err(usage(
                        "--mitigation-axis",
                        format!("duplicate cell '{name}'"),
                        "list each mitigation and environment once",
                    ));
                }
                let origin = mit.env.keys().map(|k| (k.clone(), m.clone())).collect();
                cells.push(Cell {
                    name,
                    mitigations: vec![m.clone()],
                    environment: env.clone(),
                    extra_env: BTreeMap::new(),
                    trials: None,
                    steps: None,
                    workload_config: None,
                    collect: None,
                    resolved_env: mit.env.clone(),
                    env_origin: origin,
                    resources: Resources::default(),
                    sanitizer: None,
                });
            }
        }
        let resolved_baseline = match &self.baseline_cell {
            Some(b) if cells.iter().any(|c| &c.name == b) => b.clone(),
            Some(b) => {
                let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
                return Err(usage(
                    "--baseline-cell",
                    format!("'{b}' is not a cell"),
                    format!("cells: {}", names.join(", ")),
                ));
            }
            None => auto_baseline(&cells).ok_or_else(|| {
                usage(
                    "--baseline-cell",
                    "cannot choose a baseline cell",
                    "include 'none' in --mitigation-axis or pass --baseline-cell",
                )
            })?,
        };
        let collect = match &self.collect {
            Some(c) => parse_collect_flag(c)?,
            None => Collect::default(),
        };
        let recipe = Recipe {
            source: None,
            mode: Mode::Triage,
            ticket: self.ticket.clone(),
            workload,
            trials,
            steps,
            save_logs: false,
            workload_config: JsonMap::new(),
            collect,
            extra_env: Default::default(),
            trial_isolation: TrialIsolation::Auto,
            confound: Confound {
                threshold,
                baseline_cell: self.baseline_cell.clone(),
                resolved_baseline,
            },
            stop_after: None,
            auto,
            env_key: EnvKeyRules::default(),
            inputs: Vec::new(),
            ignore_inputs: Vec::new(),
            resources: Resources::default(),
            doctor: None,
            cells,
            inline_environments: inline,
            probe: None,
            registry_files: registry.sidecars().to_vec(),
        };
        if let Some(message) =
            too_many_trials(&recipe).or_else(|| too_many_settings(&recipe).map(|(m, _)| m))
        {
            return Err(usage(
                "--trials",
                message,
                "pass a smaller --trials or shorter axes; see \"Limits\" in docs/recipes.md",
            ));
        }
        Ok(recipe)
    }
}

/// `--collect a,b` on a triage recipe: replaces the recipe's collectors, keeps options of names
/// still enabled, and clears per-cell overrides (AORTA §1.1.1).
pub fn override_collect(recipe: &mut Recipe, value: &str) -> Res<()> {
    let mut new = parse_collect_flag(value)?;
    for (name, opts) in &mut new.collectors {
        if let Some((_, old)) = recipe.collect.collectors.iter().find(|(n, _)| n == name) {
            *opts = old.clone();
        }
    }
    recipe.collect = new;
    for cell in &mut recipe.cells {
        cell.collect = None;
    }
    Ok(())
}

/// Command-line settings laid over a recipe file (`aorta sweep run --recipe r.yaml --ticket T
/// …`): an input of the compile database, applied right after the file is parsed, so a
/// recipe reaches the engine by one route whatever the flags (and a Slurm task, given the
/// same overlays, compiles the same recipe).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Overlays {
    /// The subprocess flow's flags (probe recipes).
    #[serde(default)]
    pub probe: ProbeOverlays,
    /// `--collect a,b` (triage recipes): replaces the recipe's collectors.
    #[serde(default)]
    pub collect: Option<String>,
}

impl Overlays {
    pub fn is_empty(&self) -> bool {
        *self == Overlays::default()
    }

    pub fn apply(&self, recipe: &mut Recipe) -> Res<()> {
        if self.probe != ProbeOverlays::default() {
            self.probe.apply(recipe)?;
        }
        if let Some(c) = &self.collect {
            override_collect(recipe, c)?;
        }
        Ok(())
    }
}

/// Subprocess-flow flags that overlay a probe recipe (AORTA §2.8).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ProbeOverlays {
    pub ticket: Option<String>,
    pub env_passthrough_mode: Option<PassthroughMode>,
    pub stop_after_events: Option<i64>,
    pub max_trials: Option<i64>,
    pub disable_detector: Vec<String>,
}

impl ProbeOverlays {
    pub fn apply(&self, recipe: &mut Recipe) -> Res<()> {
        if let Some(t) = &self.ticket {
            if t.trim().is_empty() {
                return Err(usage(
                    "--ticket",
                    "must not be empty",
                    "omit --ticket to keep the recipe's ticket",
                ));
            }
            recipe.ticket = Some(t.clone());
        }
        if self.stop_after_events.is_some() || self.max_trials.is_some() {
            let recipe_rule = recipe.stop_after;
            let events = match (self.stop_after_events, recipe_rule) {
                (Some(e), _) => e,
                (None, Some(r)) => i64::from(r.events),
                (None, None) => {
                    return Err(usage(
                        "--max-trials",
                        "--max-trials requires --stop-after-events",
                        "pass --stop-after-events K too",
                    ))
                }
            };
            let cap = match (self.max_trials, recipe_rule) {
                (Some(m), _) => m,
                (None, Some(r)) => i64::from(r.max_trials),
                (None, None) => {
                    return Err(usage(
                        "--stop-after-events",
                        "--stop-after-events requires --max-trials (the loop needs a hard cap)",
                        "pass --max-trials N",
                    ))
                }
            };
            let events = u32::try_from(events)
                .ok()
                .filter(|v| *v >= 1)
                .ok_or_else(|| {
                    usage(
                        "--stop-after-events",
                        format!("must be >= 1, got {events}"),
                        "pass --stop-after-events K with K >= 1",
                    )
                })?;
            let cap = u32::try_from(cap).ok().filter(|v| *v >= 1).ok_or_else(|| {
                usage(
                    "--max-trials",
                    format!("must be >= 1, got {cap}"),
                    "pass --max-trials N with N >= 1",
                )
            })?;
            if cap < events {
                return Err(usage(
                    "--max-trials",
                    format!("the cap ({cap}) must be >= the events ({events})"),
                    "raise --max-trials",
                ));
            }
            let event_verdict = recipe_rule.map_or(Verdict::Fail, |r| r.event_verdict);
            recipe.stop_after = Some(StopAfter {
                events,
                max_trials: cap,
                event_verdict,
            });
            if let Some(message) =
                too_many_trials(recipe).or_else(|| too_many_settings(recipe).map(|(m, _)| m))
            {
                return Err(usage(
                    "--max-trials",
                    message,
                    "pass a smaller --max-trials; see \"Limits\" in docs/recipes.md",
                ));
            }
        }
        if let Some(probe) = &mut recipe.probe {
            if let Some(m) = self.env_passthrough_mode {
                probe.env_passthrough_mode = m;
            }
            for token in &self.disable_detector {
                probe
                    .disables
                    .add_cli_token(token)
                    .map_err(|e| usage("--disable-detector", e.message, e.hint))?;
            }
        } else if !self.disable_detector.is_empty() || self.env_passthrough_mode.is_some() {
            return Err(usage(
                "--disable-detector",
                "detector and passthrough flags apply only to probe recipes",
                "set 'mode: probe' in the recipe",
            ));
        }
        Ok(())
    }
}
