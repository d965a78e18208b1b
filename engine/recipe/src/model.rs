//! The validated recipe: one type for both modes, with everything resolved that can be
//! resolved at load time (cells, env bundles, inline environments, baseline).

use aorta_classify::Disables;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub type JsonMap = serde_json::Map<String, serde_json::Value>;

/// A workload config value with object keys sorted at every level (serde_json keeps insertion
/// order here), so equal configs compare and hash equally: the one canonical form that keys
/// (`aorta_graph::canonical_json`) and matrix.md's config column both use.
pub fn sorted_json(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_json(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_json).collect()),
        other => other.clone(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Cells listed explicitly; the trial body is a workload.
    Triage,
    /// Cells are mitigation_axis × diagnostic_axis; the trial body is the user's command.
    Probe,
}

/// AORTA 0.3.0's `trial_isolation`: a trial in the runner's own process (`in_process`) or a
/// fresh one (`process`), `auto` by the workload. aorta runs every trial as a process of its
/// own, so every value runs as `process`; the value is kept for the resolved recipe, and
/// `in_process` is said at compile time (state never carries over from one trial to the next).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialIsolation {
    #[default]
    Auto,
    InProcess,
    Process,
}

impl TrialIsolation {
    pub const WORDS: [&'static str; 3] = ["auto", "in_process", "process"];

    pub fn parse(word: &str) -> Option<TrialIsolation> {
        match word {
            "auto" => Some(TrialIsolation::Auto),
            "in_process" => Some(TrialIsolation::InProcess),
            "process" => Some(TrialIsolation::Process),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        Self::WORDS[self as usize]
    }

    /// What a build says about it, if anything.
    pub fn note(self) -> Option<&'static str> {
        (self == TrialIsolation::InProcess).then_some(
            "trial_isolation: in_process: aorta runs every trial as a process of its own (as `process`): nothing a trial leaves in memory (a CUDA context, a cache, an allocator's state) reaches the next; a failure that needs that state to build up across trials will not show",
        )
    }
}

/// Where a recipe came from. Flag-mode recipes have none.
#[derive(Debug, Clone, Serialize)]
pub struct RecipeSource {
    pub path: PathBuf,
    /// blake3 of the raw text: two runs of "the same recipe" can be told apart.
    pub blake3: String,
}

/// The recipe's `doctor:` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DoctorLevel {
    Quick,
    Medium,
    Long,
}

impl DoctorLevel {
    pub const ALL: [DoctorLevel; 3] = [DoctorLevel::Quick, DoctorLevel::Medium, DoctorLevel::Long];

    pub fn as_str(self) -> &'static str {
        match self {
            DoctorLevel::Quick => "quick",
            DoctorLevel::Medium => "medium",
            DoctorLevel::Long => "long",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Recipe {
    pub source: Option<RecipeSource>,
    pub mode: Mode,
    pub ticket: Option<String>,
    /// `_subprocess` for probe recipes.
    pub workload: String,
    pub trials: u32,
    pub steps: u32,
    pub save_logs: bool,
    pub workload_config: JsonMap,
    pub collect: Collect,
    /// AORTA 0.3.0's recipe-wide `extra_env` (triage recipes): set in every cell above its
    /// mitigations and below the cell's own `extra_env`; already folded into each cell's
    /// `resolved_env`, kept here for the resolved recipe.
    pub extra_env: BTreeMap<String, String>,
    /// AORTA 0.3.0's `trial_isolation` (triage recipes).
    pub trial_isolation: TrialIsolation,
    pub confound: Confound,
    pub stop_after: Option<StopAfter>,
    /// `trials: auto` (an aorta extension): each cell runs until its comparison with the
    /// baseline is decided; `trials` is then the cap, `max_trials_per_cell`.
    pub auto: Option<AutoTrials>,
    /// `env_key: {include, exclude}`: which environment-snapshot fields feed trial keys, on top
    /// of the defaults (docs/env-snapshot.md). An aorta extension; AORTA 0.2.1 has no such key.
    pub env_key: EnvKeyRules,
    /// `inputs:` (an aorta extension): workspace-relative globs of files hashed into every
    /// trial's key, for what tracing cannot see (docs/cache-keys.md, "Traced inputs").
    pub inputs: Vec<String>,
    /// `ignore_inputs:`: globs of traced paths that are not inputs (a scratch directory).
    pub ignore_inputs: Vec<String>,
    pub cells: Vec<Cell>,
    /// `doctor: quick|medium|long` (an aorta extension): `aorta doctor` at that level before
    /// any trial, as `--doctor` does (docs/doctor.md). A precondition on the node, never keyed;
    /// absent from the serialized recipe when unset, so existing recipes' artifact keys stay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doctor: Option<DoctorLevel>,
    /// `gpus_per_trial` and the other resource keys at the recipe's top level.
    pub resources: Resources,
    /// Inline `{docker: ref}` environments by auto-name (`_inline_<8 hex>`), in first-use order.
    pub inline_environments: Vec<InlineEnvironment>,
    pub probe: Option<ProbeSettings>,
    /// Sidecar registry files the recipe was loaded with (CLI order), plus the project registry.
    pub registry_files: Vec<PathBuf>,
}

/// Dotted snapshot field patterns (`env_vars.NCCL_*`, `host.hostname`), validated at load.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EnvKeyRules {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InlineEnvironment {
    pub name: String,
    pub docker: String,
}

/// An environment as a cell sees it: a registry entry or an inline docker reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvironmentRef {
    pub name: String,
    pub docker: Option<String>,
    pub venv: Option<String>,
    pub buck_target: Option<String>,
    pub inline: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub name: String,
    pub mitigations: Vec<String>,
    pub environment: EnvironmentRef,
    pub extra_env: BTreeMap<String, String>,
    pub trials: Option<u32>,
    pub steps: Option<u32>,
    /// The cell's own `workload_config` (before merging over the recipe's).
    pub workload_config: Option<JsonMap>,
    /// `None` inherits the recipe's collectors; `Some(empty)` disables them.
    pub collect: Option<Collect>,
    /// Mitigation bundles in list order, then `extra_env` on top: what the trial's process gets.
    pub resolved_env: BTreeMap<String, String>,
    /// Which mitigation (or `extra_env`) set each resolved variable.
    pub env_origin: BTreeMap<String, String>,
    /// The cell's own resource keys (triage cells), over the recipe's.
    pub resources: Resources,
    /// A probe cell whose diagnostic is `compute_sanitizer_<tool>` runs its command under
    /// that tool (docs/diagnostics.md); keyed with the cell's config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<aorta_registry::Sanitizer>,
}

/// What one trial takes of a machine: placement for the executors (Slurm's sbatch flags, the
/// local executor's GPU slots). Each field unset inherits. All but `account` are part of a
/// trial's key (aorta-graph's `KeyedResources`): a limit can turn a pass into a TIMEOUT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Resources {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus_per_trial: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus_per_trial: Option<u32>,
    /// Slurm's `--mem` syntax, normalised (`4096`, `16G`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_per_trial: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_secs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sbatch_args: Option<Vec<String>>,
}

impl Resources {
    /// `self`'s fields where set, `under`'s elsewhere.
    pub fn over(&self, under: &Resources) -> Resources {
        Resources {
            gpus_per_trial: self.gpus_per_trial.or(under.gpus_per_trial),
            cpus_per_trial: self.cpus_per_trial.or(under.cpus_per_trial),
            mem_per_trial: self.mem_per_trial.clone().or(under.mem_per_trial.clone()),
            time_limit_secs: self.time_limit_secs.or(under.time_limit_secs),
            partition: self.partition.clone().or(under.partition.clone()),
            account: self.account.clone().or(under.account.clone()),
            constraint: self.constraint.clone().or(under.constraint.clone()),
            sbatch_args: self.sbatch_args.clone().or(under.sbatch_args.clone()),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }
}

impl Cell {
    pub fn effective_trials(&self, recipe: &Recipe) -> u32 {
        self.trials.unwrap_or(recipe.trials)
    }

    pub fn effective_steps(&self, recipe: &Recipe) -> u32 {
        self.steps.unwrap_or(recipe.steps)
    }

    /// Recipe-scope `workload_config` with the cell's keys on top (cell wins per key).
    pub fn effective_workload_config(&self, recipe: &Recipe) -> JsonMap {
        let mut merged = recipe.workload_config.clone();
        if let Some(own) = &self.workload_config {
            for (k, v) in own {
                merged.insert(k.clone(), v.clone());
            }
        }
        merged
    }

    /// The cell's resource keys over the recipe's.
    pub fn effective_resources(&self, recipe: &Recipe) -> Resources {
        self.resources.over(&recipe.resources)
    }

    pub fn effective_collect<'a>(&'a self, recipe: &'a Recipe) -> &'a Collect {
        self.collect.as_ref().unwrap_or(&recipe.collect)
    }
}

/// Enabled collectors in order, each with its (possibly empty) string options.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Collect {
    pub collectors: Vec<(String, BTreeMap<String, String>)>,
}

impl Collect {
    pub fn names(&self) -> Vec<&str> {
        self.collectors.iter().map(|(n, _)| n.as_str()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.collectors.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Confound {
    pub threshold: f64,
    /// The recipe's explicit choice, if any.
    pub baseline_cell: Option<String>,
    /// The cell the confound detector compares against, resolved at load (AORTA's pre-flight).
    pub resolved_baseline: String,
}

/// A trial's verdict (shared with the trial record, so stop_after compares like with like).
pub use aorta_trial::Verdict;

/// Run up to `max_trials` per cell; stop once `events` trials have `event_verdict`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StopAfter {
    pub events: u32,
    pub max_trials: u32,
    pub event_verdict: Verdict,
}

/// `trials: auto`: the cap, the confidence and the optional budget (docs/recipes.md,
/// "trials: auto"). The rule itself is `aorta_report::sequential`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct AutoTrials {
    pub max_trials_per_cell: u32,
    pub confidence: f64,
    /// Stop starting trials once the build has run this long (seconds).
    pub max_walltime_sec: Option<f64>,
    /// Stop starting trials once executed trials used this many GPU-hours (trial wall time ×
    /// the GPUs it held).
    pub max_gpu_hours: Option<f64>,
    /// Spread the error rate over this many comparisons instead of the recipe's cells (at
    /// least them): the agent sets the number of candidates its whole run may test.
    pub comparisons: Option<u32>,
}

impl AutoTrials {
    pub const DEFAULT_MAX_TRIALS_PER_CELL: u32 = 64;
    pub const DEFAULT_CONFIDENCE: f64 = 0.95;

    /// The comparisons the error rate is spread over, for a recipe whose `cells` cells are
    /// compared with one baseline: `comparisons` when set, never fewer than the cells.
    pub fn comparisons_for(&self, cells: usize) -> u32 {
        let m = u32::try_from(cells).unwrap_or(u32::MAX);
        self.comparisons.map_or(m, |c| c.max(m)).max(1)
    }
}

/// How a probe trial hands the cell's env to the command (shared with the trial record).
pub use aorta_trial::PassthroughMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnMatch {
    Fail,
    Warn,
    Info,
}

/// A Tier-5 detector from the recipe.
#[derive(Debug, Clone, Serialize)]
pub struct CustomPattern {
    pub id: String,
    pub regex: String,
    pub condition: Option<String>,
    pub on_match: OnMatch,
    pub required_for_pass: bool,
}

/// The level is the trial record's type: retention stamps it into `capture.retention`.
pub use aorta_trial::RetainLevel;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retain {
    pub on_fail: RetainLevel,
    pub on_pass: RetainLevel,
    pub on_error: RetainLevel,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Redaction {
    pub scrub_env_keys: Vec<String>,
    pub scrub_paths: bool,
    pub scrub_ip_addresses: bool,
}

/// Fields that exist only in probe mode (the subprocess flow and its classifier).
#[derive(Debug, Clone, Serialize)]
pub struct ProbeSettings {
    pub mitigation_axis: Vec<String>,
    pub diagnostic_axis: Vec<String>,
    pub step_time_regex: Option<String>,
    pub collect_paths: Vec<String>,
    pub timeout_per_trial: Option<f64>,
    pub env_passthrough_mode: PassthroughMode,
    pub custom_patterns: Vec<CustomPattern>,
    pub hang_window_sec: f64,
    pub hang_grace_period_at_start: f64,
    pub tier3_vram_growth: bool,
    pub disables: Disables,
    pub retain: Option<Retain>,
    pub redaction: Option<Redaction>,
}
