//! Recipes described on the command line rather than in a file: flag mode, `aorta run`, and
//! each look of `aorta agent`. A [`RecipeRequest`] is plain, comparable data — an input of the
//! compile database, which builds the recipe from it (through the same validation as a file) —
//! so neither the CLI nor the agent assembles, parses or checks a recipe itself, and a Slurm
//! task given the same request compiles the same recipe.

use crate::flags::FlagRecipe;
use crate::load::parse_recipe;
use crate::model::{AutoTrials, Recipe};
use crate::names::segment;
use aorta_registry::Registry;
use aorta_source::{Diag, DiagKind, FieldPath, SourceFile, Syntax};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

type Res<T> = Result<T, Box<Diag>>;

/// A recipe that does not come from a file as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RecipeRequest {
    /// `aorta sweep run --workload W --mitigation-axis … --environment-axis …`.
    Flags(FlagRecipe),
    /// `aorta run --workload NAME …`: one workload, one cell.
    Run(RunRequest),
    /// One look of `aorta agent`, laid over its template recipe (if any).
    AgentLook(AgentLook),
    /// One step of `aorta bisect` / `aorta reduce`: a cell per configuration to test.
    BisectProbe(BisectProbe),
}

impl RecipeRequest {
    /// How plans and diagnostics name the recipe.
    pub fn display_name(&self) -> &'static str {
        match self {
            RecipeRequest::Flags(_) => "<flags>",
            RecipeRequest::Run(_) => "<aorta run flags>",
            RecipeRequest::AgentLook(_) => "<agent probe recipe>",
            RecipeRequest::BisectProbe(_) => "<bisect probe recipe>",
        }
    }

    /// The recipe, validated like a file. `template`: the parsed recipe file the request is
    /// laid over (only the agent has one: `aorta agent --recipe`).
    pub fn build(&self, registry: &Registry, template: Option<&Recipe>) -> Res<Recipe> {
        match self {
            RecipeRequest::Flags(f) => f.build(registry),
            RecipeRequest::Run(r) => r.build(registry),
            RecipeRequest::AgentLook(l) => l.build(registry, template),
            RecipeRequest::BisectProbe(b) => b.build(registry),
        }
    }
}

fn usage(flag: &str, message: impl Into<String>, help: impl Into<String>) -> Box<Diag> {
    Box::new(
        Diag::new(DiagKind::Usage, message)
            .with_path(&FieldPath::named(flag))
            .with_help(help),
    )
}

/// Generated recipe text goes through the file parser, so every rule of the schema applies.
fn parse_generated(name: &str, text: &impl Serialize, registry: &Registry) -> Res<Recipe> {
    let text = serde_json::to_string_pretty(text)
        .map_err(|e| Box::new(Diag::new(DiagKind::Usage, e.to_string())))?;
    parse_recipe(&SourceFile::new(name, text), Syntax::Json, registry)
}

/// `aorta run`'s flags as the user typed them; checked when the recipe is built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub workload: String,
    pub trials: i64,
    pub steps: Option<i64>,
    /// A registered environment.
    pub environment: String,
    /// Comma-separated mitigations, stacked in one cell (empty: `none`).
    pub mitigations: String,
    /// `K=V,K2=V2`.
    pub extra_env: String,
    /// The workload config as JSON text.
    pub config: Option<String>,
    /// `--collect a,b` (AORTA 0.3.0): the cell's collectors.
    #[serde(default)]
    pub collect: Option<String>,
    /// `--trial-isolation` (AORTA 0.3.0): `auto`, `in_process` or `process`.
    #[serde(default)]
    pub trial_isolation: Option<String>,
}

impl RunRequest {
    fn build(&self, registry: &Registry) -> Res<Recipe> {
        let mut mitigations: Vec<&str> = self
            .mitigations
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if mitigations.is_empty() {
            mitigations.push("none");
        }
        // Named as the user typed them, not as lines of the generated recipe.
        for m in &mitigations {
            if registry.mitigation(m).is_none() {
                return Err(usage(
                    "--mitigations",
                    format!("unknown mitigation '{m}'"),
                    registry.unknown_mitigation_hint(m),
                ));
            }
        }
        if registry.environment(&self.environment).is_none() {
            return Err(usage(
                "--environment",
                format!("unknown environment '{}'", self.environment),
                registry.unknown_environment_hint(&self.environment),
            ));
        }
        let mut extra_env = BTreeMap::new();
        for pair in self
            .extra_env
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(usage(
                    "--extra-env",
                    format!("'{pair}' is not K=V"),
                    "e.g. --extra-env NCCL_DEBUG=INFO,CUDA_LAUNCH_BLOCKING=1",
                ));
            };
            extra_env.insert(k.trim().to_string(), v.to_string());
        }
        let config: serde_json::Map<String, serde_json::Value> = match &self.config {
            Some(text) => serde_json::from_str(text).map_err(|e| {
                usage(
                    "--config",
                    format!("not a JSON object: {e}"),
                    "e.g. --config '{\"model\": \"mlp\"}'",
                )
            })?,
            None => serde_json::Map::new(),
        };
        let collect = self
            .collect
            .as_deref()
            .map(crate::flags::parse_collect_flag)
            .transpose()?;
        if let Some(w) = self.trial_isolation.as_deref() {
            if crate::TrialIsolation::parse(w).is_none() {
                return Err(usage(
                    "--trial-isolation",
                    format!("unknown trial isolation '{w}'"),
                    format!("one of {}", crate::TrialIsolation::WORDS.join(", ")),
                ));
            }
        }
        #[derive(Serialize)]
        struct Cell<'a> {
            name: &'static str,
            mitigations: &'a [&'a str],
            environment: &'a str,
            extra_env: &'a BTreeMap<String, String>,
        }
        #[derive(Serialize)]
        struct Generated<'a> {
            schema_version: u32,
            workload: &'a str,
            trials: i64,
            steps: i64,
            workload_config: &'a serde_json::Map<String, serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            collect: Option<Vec<&'a str>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            trial_isolation: Option<&'a str>,
            cells: [Cell<'a>; 1],
        }
        let generated = Generated {
            schema_version: 1,
            workload: &self.workload,
            trials: self.trials,
            steps: self.steps.unwrap_or(1),
            workload_config: &config,
            collect: collect.as_ref().map(|c| c.names()),
            trial_isolation: self.trial_isolation.as_deref(),
            cells: [Cell {
                name: "run",
                mitigations: &mitigations,
                environment: &self.environment,
                extra_env: &extra_env,
            }],
        };
        parse_generated("<aorta run flags>", &generated, registry)
    }
}

/// The cell of mitigation `m` without a diagnostic, in an agent look.
pub fn agent_cell_name(m: &str) -> String {
    format!("{}-none", segment(m))
}

/// One look of the agent's search: candidates × diagnostics, with its own trial count in each
/// `<m>-none` cell. Trial keys depend neither on a cell's trial count nor on which other
/// cells exist, so every trial of an earlier look (or agent run) is a store hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentLook {
    pub ticket: Option<String>,
    /// Trials of each diagnostic cell (the template's `trials`, default 1).
    pub diagnostic_trials: u32,
    /// The mitigation axis, `none` first.
    pub mitigations: Vec<String>,
    pub diagnostics: Vec<String>,
    /// Trials of `<m>-none`, by mitigation (ignored under `auto`).
    pub trials: BTreeMap<String, u32>,
    /// `trials: auto` for every cell: each runs until its sequential test decides.
    #[serde(default)]
    pub auto: Option<AutoTrials>,
}

impl AgentLook {
    fn build(&self, registry: &Registry, template: Option<&Recipe>) -> Res<Recipe> {
        #[derive(Serialize)]
        struct Generated<'a> {
            schema_version: u32,
            mode: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            ticket: Option<&'a str>,
            trials: serde_json::Value,
            mitigation_axis: &'a [String],
            diagnostic_axis: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            max_trials_per_cell: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            confidence: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            comparisons: Option<u32>,
        }
        let generated = Generated {
            schema_version: 1,
            mode: "probe",
            ticket: self.ticket.as_deref(),
            trials: match self.auto {
                Some(_) => "auto".into(),
                None => self.diagnostic_trials.into(),
            },
            mitigation_axis: &self.mitigations,
            diagnostic_axis: &self.diagnostics,
            max_trials_per_cell: self.auto.map(|a| a.max_trials_per_cell),
            confidence: self.auto.map(|a| a.confidence),
            comparisons: self.auto.and_then(|a| a.comparisons),
        };
        let mut recipe = parse_generated("<agent probe recipe>", &generated, registry)?;
        if let (Some(t), Some(p)) = (template, recipe.probe.as_mut()) {
            if let Some(tp) = &t.probe {
                // AORTA's carried fields; not stop_after, retain, disables, tier3_vram_growth.
                p.step_time_regex = tp.step_time_regex.clone();
                p.collect_paths = tp.collect_paths.clone();
                p.timeout_per_trial = tp.timeout_per_trial;
                p.env_passthrough_mode = tp.env_passthrough_mode;
                p.custom_patterns = tp.custom_patterns.clone();
                p.hang_window_sec = tp.hang_window_sec;
                p.hang_grace_period_at_start = tp.hang_grace_period_at_start;
                p.redaction = tp.redaction.clone();
            }
            recipe.confound.threshold = t.confound.threshold;
            recipe.registry_files = t.registry_files.clone();
        }
        for cell in recipe.cells.iter_mut().filter(|_| self.auto.is_none()) {
            let n = self
                .mitigations
                .iter()
                .find(|m| cell.name == agent_cell_name(m))
                .and_then(|m| self.trials.get(m));
            if let Some(&n) = n {
                cell.trials = Some(n);
            }
        }
        Ok(recipe)
    }
}

/// One configuration of a bisect probe: mitigations stacked in order, then `env` on top.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectCell {
    /// Named from its content by the caller (names are never in a key).
    pub name: String,
    pub mitigations: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub trials: u32,
}

/// One step of `aorta bisect` or `aorta reduce`: a probe recipe over the user's command with
/// one cell per configuration. A cell's env is its resolved values, so a configuration's
/// trials have the same keys whichever step (or run) asks for them: every probe is a store hit
/// the second time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectProbe {
    pub ticket: Option<String>,
    pub cells: Vec<BisectCell>,
    /// `timeout_per_trial`, seconds.
    pub timeout_per_trial: Option<f64>,
}

impl BisectProbe {
    fn build(&self, registry: &Registry) -> Res<Recipe> {
        #[derive(Serialize)]
        struct Generated<'a> {
            schema_version: u32,
            mode: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            ticket: Option<&'a str>,
            trials: u32,
            mitigation_axis: [&'static str; 1],
            diagnostic_axis: [&'static str; 1],
            #[serde(skip_serializing_if = "Option::is_none")]
            timeout_per_trial: Option<f64>,
        }
        if self.cells.is_empty() {
            return Err(usage("bisect", "a bisect probe needs a configuration", ""));
        }
        let generated = Generated {
            schema_version: 1,
            mode: "probe",
            ticket: self.ticket.as_deref(),
            trials: self.cells.iter().map(|c| c.trials).max().unwrap_or(1),
            mitigation_axis: ["none"],
            diagnostic_axis: ["none"],
            timeout_per_trial: self.timeout_per_trial,
        };
        let mut recipe = parse_generated("<bisect probe recipe>", &generated, registry)?;
        let template = recipe.cells[0].clone();
        let mut cells = Vec::with_capacity(self.cells.len());
        for c in &self.cells {
            if !crate::valid_cell_name(&c.name)
                || cells.iter().any(|x: &crate::Cell| x.name == c.name)
            {
                return Err(usage(
                    "bisect",
                    format!("bad or repeated cell name '{}'", c.name),
                    "",
                ));
            }
            let mut cell = template.clone();
            cell.name = c.name.clone();
            cell.trials = Some(c.trials.max(1));
            cell.resolved_env.clear();
            cell.env_origin.clear();
            for m in c.mitigations.iter().filter(|m| *m != "none") {
                let Some(found) = registry.mitigation(m) else {
                    return Err(usage(
                        "--mitigations",
                        format!("unknown mitigation '{m}'"),
                        registry.unknown_mitigation_hint(m),
                    ));
                };
                for (k, v) in &found.env {
                    cell.resolved_env.insert(k.clone(), v.clone());
                    cell.env_origin.insert(k.clone(), m.clone());
                }
            }
            for (k, v) in &c.env {
                if !aorta_registry::is_posix_env_name(k) || v.contains('\0') {
                    return Err(usage(
                        "bisect",
                        format!("'{k}' cannot be set as an environment variable"),
                        "names are [A-Za-z_][A-Za-z0-9_]*; values hold no NUL byte",
                    ));
                }
                cell.resolved_env.insert(k.clone(), v.clone());
                cell.env_origin.insert(k.clone(), "bisect".into());
            }
            cell.mitigations = if c.mitigations.is_empty() {
                vec!["none".into()]
            } else {
                c.mitigations.clone()
            };
            cell.extra_env = c.env.clone();
            cells.push(cell);
        }
        let planned: u64 = cells.iter().map(|c| u64::from(c.trials.unwrap_or(1))).sum();
        if planned > crate::MAX_PLANNED_TRIALS {
            return Err(usage(
                "bisect",
                format!("a bisect step would plan {planned} trials"),
                "lower --max-trials-per-probe",
            ));
        }
        recipe.confound.resolved_baseline = cells[0].name.clone();
        recipe.cells = cells;
        Ok(recipe)
    }
}
