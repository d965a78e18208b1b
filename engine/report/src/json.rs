//! matrix.json as typed data: [`MatrixJson`] and its [`CellJson`] rows borrow from the
//! [`Matrix`] and serialise in declaration order, AORTA 0.2.1's fields (schema_version 1,
//! §3.6) first and aorta's additions after them. docs/report.md documents every field; the
//! golden snapshots in `tests/golden.rs` show any change to it in review.
//!
//! The only untyped value is each cell's `workload_config`, which is the user's own JSON.

use crate::aggregate::{CellStats, Outcome, StepTimeSource};
use crate::bootstrap;
use crate::confound::Tag;
use crate::matrix::{Matrix, Row};
use aorta_recipe::{JsonMap, Mode};
use indexmap::IndexMap;
use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The `schema_version` written at the top of matrix.json.
pub const MATRIX_SCHEMA_VERSION: u32 = 1;

/// How the confound interval is computed, as written in `confound.interval.method`.
const INTERVAL_METHOD: &str =
    "two-stage bootstrap (trials, then steps within a trial); percentile interval of the ratio of means";

/// The whole of matrix.json. `cells` serialises one row at a time, so a large matrix is never
/// held in memory as one JSON tree.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixJson<'a> {
    /// Always [`MATRIX_SCHEMA_VERSION`].
    pub schema_version: u32,
    pub workload: &'a str,
    pub ticket: Option<&'a str>,
    /// `stop_after.max_trials` under a stop rule, else the recipe's `trials`.
    pub trials_per_cell: u32,
    pub steps_per_trial: u32,
    /// `YYYY-MM-DDTHH-MM-SS` (UTC): when this matrix was rendered.
    pub run_timestamp: &'a str,
    /// The baseline as resolved after the run (kept even when the run is degraded).
    pub baseline_cell: &'a str,
    pub confound: ConfoundJson<'a>,
    pub stop_after: Option<StopAfterJson>,
    pub warnings: &'a [String],
    pub recipe_source: RecipeSourceJson<'a>,
    // aorta's additions.
    /// `triage` or `probe`.
    pub mode: &'static str,
    /// Why the run cannot be trusted as a comparison, if it cannot.
    pub incomplete_reason: Option<&'a str>,
    /// The run's answer: each cell's call against the baseline, the headline, the next step.
    pub answer: &'a crate::verdict::Answer,
    pub cells: CellsJson<'a>,
}

/// `confound`: the recipe's settings, and (aorta) how the interval is computed.
#[derive(Debug, Clone, Serialize)]
pub struct ConfoundJson<'a> {
    #[serde(serialize_with = "finite")]
    pub threshold: f64,
    pub baseline_cell_configured: Option<&'a str>,
    /// aorta's addition.
    pub interval: IntervalJson,
}

/// `confound.interval` (aorta): the bootstrap behind `step_time_ratio_ci95`.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalJson {
    pub method: &'static str,
    #[serde(serialize_with = "finite")]
    pub level: f64,
    pub resamples: usize,
    pub min_samples: usize,
}

/// `stop_after`: the recipe's stop rule.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StopAfterJson {
    pub events: u32,
    pub max_trials: u32,
    /// `pass`, `fail` or `error`.
    pub event_verdict: &'static str,
}

/// `recipe_source`: where the recipe came from; both null for flag-mode recipes.
#[derive(Debug, Clone, Serialize)]
pub struct RecipeSourceJson<'a> {
    pub path: Option<Cow<'a, str>>,
    /// The recipe file's BLAKE3 (AORTA wrote `sha256`).
    pub blake3: Option<&'a str>,
}

/// `cells`: the rows in recipe order, each serialised as a [`CellJson`] when it is reached.
#[derive(Debug, Clone, Copy)]
pub struct CellsJson<'a>(pub &'a [Row]);

impl<'a> CellsJson<'a> {
    pub fn iter(&self) -> impl Iterator<Item = CellJson<'a>> + 'a {
        self.0.iter().map(CellJson::from)
    }
}

impl Serialize for CellsJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for cell in self.iter() {
            seq.serialize_element(&cell)?;
        }
        seq.end()
    }
}

/// One element of `cells`: every field of AORTA's `CellStats` (§3.5) and its derived fields,
/// then aorta's additions. Floats that are not finite are written as null.
#[derive(Debug, Clone, Serialize)]
pub struct CellJson<'a> {
    pub name: &'a str,
    pub mitigations: &'a [String],
    /// The environment's name.
    pub environment: &'a str,
    pub extra_env: &'a BTreeMap<String, String>,
    pub resolved_env_vars: &'a BTreeMap<String, String>,
    pub trials: usize,
    pub passed_count: usize,
    pub failed_count: usize,
    #[serde(serialize_with = "finite")]
    pub mean_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub std_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub min_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub max_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub p50_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub p90_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub p99_step_time_ms: f64,
    #[serde(serialize_with = "finite")]
    pub mean_wall_clock_sec: f64,
    pub exit_status_counts: &'a IndexMap<String, usize>,
    #[serde(serialize_with = "finite_seq")]
    pub step_times_ms: &'a [f64],
    pub trial_paths: &'a [String],
    pub error: Option<&'a str>,
    pub step_time_source: StepTimeSource,
    /// `[hint, trials]` pairs.
    pub failure_hints: &'a [(String, usize)],
    pub outcome_counts: &'a IndexMap<Outcome, usize>,
    pub executed_iter_min: Option<u64>,
    pub executed_iter_max: Option<u64>,
    pub configured_iters: Option<u64>,
    pub iters_display: &'a str,
    /// The user's workload_config, recipe scope merged with the cell's.
    pub workload_config: &'a JsonMap,
    pub top_failure_detector_id: Option<&'a str>,
    pub top_warn_detector_id: Option<&'a str>,
    pub stop_after_note: Option<&'a str>,
    pub error_count: usize,
    /// Always false: aorta never resumes a cell as AORTA's `flat_resume` did (it reuses
    /// trials through the cache, and matrix.json does not say how a run obtained them).
    pub resumed: bool,
    #[serde(serialize_with = "finite")]
    pub failure_rate: f64,
    #[serde(serialize_with = "finite")]
    pub error_rate: f64,
    pub unreliable: bool,
    /// aorta's interval-aware tag.
    pub confound: Tag,
    #[serde(serialize_with = "finite_opt")]
    pub step_time_ratio: Option<f64>,
    pub resolved_environment: EnvironmentJson<'a>,
    // aorta's additions.
    #[serde(serialize_with = "finite_pair_opt")]
    pub step_time_ratio_ci95: Option<(f64, f64)>,
    /// The tag AORTA 0.2.1's point rule gives.
    pub confound_aorta: Tag,
    /// `[checksum, trials]` pairs.
    pub logits_checksums: &'a [(String, usize)],
}

/// `resolved_environment`: the environment as the cell's trials got it.
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentJson<'a> {
    pub name: &'a str,
    pub docker: Option<&'a str>,
    pub venv: Option<&'a str>,
    pub buck_target: Option<&'a str>,
    pub inline: bool,
}

impl<'a> From<&'a Row> for CellJson<'a> {
    fn from(row: &'a Row) -> CellJson<'a> {
        let s: &'a CellStats = &row.stats;
        let env = &s.environment;
        let c = &row.confound;
        CellJson {
            name: &s.name,
            mitigations: &s.mitigations,
            environment: &env.name,
            extra_env: &s.extra_env,
            resolved_env_vars: &s.resolved_env_vars,
            trials: s.trials,
            passed_count: s.passed_count,
            failed_count: s.failed_count,
            mean_step_time_ms: s.step.mean,
            std_step_time_ms: s.step.std,
            min_step_time_ms: s.step.min,
            max_step_time_ms: s.step.max,
            p50_step_time_ms: s.step.p50,
            p90_step_time_ms: s.step.p90,
            p99_step_time_ms: s.step.p99,
            mean_wall_clock_sec: s.mean_wall_clock_sec,
            exit_status_counts: &s.exit_status_counts,
            step_times_ms: &s.step_times_ms,
            trial_paths: &s.trial_paths,
            error: s.error.as_deref(),
            step_time_source: s.step_time_source,
            failure_hints: &s.failure_hints,
            outcome_counts: &s.outcome_counts,
            executed_iter_min: s.executed_iter_min,
            executed_iter_max: s.executed_iter_max,
            configured_iters: s.configured_iters,
            iters_display: &s.iters_display,
            workload_config: &s.workload_config,
            top_failure_detector_id: s.top_failure_detector_id.as_deref(),
            top_warn_detector_id: s.top_warn_detector_id.as_deref(),
            stop_after_note: s.stop_after_note.as_deref(),
            error_count: s.error_count,
            resumed: false,
            failure_rate: s.failure_rate(),
            error_rate: s.error_rate(),
            unreliable: s.unreliable(),
            confound: c.tag,
            step_time_ratio: c.ratio,
            resolved_environment: EnvironmentJson {
                name: &env.name,
                docker: env.docker.as_deref(),
                venv: env.venv.as_deref(),
                buck_target: env.buck_target.as_deref(),
                inline: env.inline,
            },
            step_time_ratio_ci95: c.ci95,
            confound_aorta: c.aorta_tag,
            logits_checksums: &s.logits_checksums,
        }
    }
}

/// `confound.baseline_cell_configured`: the recipe's choice. A probe recipe always has one, as
/// in AORTA, whose probe recipes carry the default (first all-`none` cell, else the first).
fn configured_baseline(r: &aorta_recipe::Recipe) -> Option<&str> {
    match (&r.confound.baseline_cell, r.mode) {
        (Some(b), _) => Some(b),
        (None, Mode::Probe) => Some(&r.confound.resolved_baseline),
        (None, Mode::Triage) => None,
    }
}

impl<'a> From<&'a Matrix<'a>> for MatrixJson<'a> {
    fn from(m: &'a Matrix<'a>) -> MatrixJson<'a> {
        let r = m.recipe;
        MatrixJson {
            schema_version: MATRIX_SCHEMA_VERSION,
            workload: &r.workload,
            ticket: r.ticket.as_deref(),
            trials_per_cell: m.trials_per_cell(),
            steps_per_trial: r.steps,
            run_timestamp: &m.run_timestamp,
            baseline_cell: &m.baseline.name,
            confound: ConfoundJson {
                threshold: r.confound.threshold,
                baseline_cell_configured: configured_baseline(r),
                interval: IntervalJson {
                    method: INTERVAL_METHOD,
                    level: bootstrap::LEVEL,
                    resamples: bootstrap::RESAMPLES,
                    min_samples: bootstrap::MIN_SAMPLES,
                },
            },
            stop_after: r.stop_after.map(|s| StopAfterJson {
                events: s.events,
                max_trials: s.max_trials,
                event_verdict: s.event_verdict.as_str(),
            }),
            warnings: &m.warnings,
            recipe_source: RecipeSourceJson {
                path: r.source.as_ref().map(|s| s.path.to_string_lossy()),
                blake3: r.source.as_ref().map(|s| s.blake3.as_str()),
            },
            mode: mode_str(r.mode),
            incomplete_reason: m.baseline.incomplete_reason.as_deref(),
            answer: &m.answer,
            cells: CellsJson(&m.rows),
        }
    }
}

fn mode_str(mode: Mode) -> &'static str {
    match mode {
        Mode::Triage => "triage",
        Mode::Probe => "probe",
    }
}

impl Serialize for StepTimeSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A tag is written as it reads in matrix.md (`speed (+12%)`, `(baseline)`, …).
impl Serialize for Tag {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A finite float as a number, anything else (NaN, ±∞) as null: JSON has no such numbers.
fn finite<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else {
        s.serialize_none()
    }
}

fn finite_opt<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => finite(x, s),
        None => s.serialize_none(),
    }
}

/// Serialises through [`finite`].
struct Finite(f64);

impl Serialize for Finite {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        finite(&self.0, s)
    }
}

fn finite_seq<S: Serializer>(xs: &&[f64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(xs.iter().map(|x| Finite(*x)))
}

fn finite_pair_opt<S: Serializer>(x: &Option<(f64, f64)>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some((lo, hi)) => (Finite(*lo), Finite(*hi)).serialize(s),
        None => s.serialize_none(),
    }
}

/// matrix.json lives here, beside its types, so the matrix does not import its own rendering.
impl Matrix<'_> {
    /// matrix.json as typed data (see [`MatrixJson`]), borrowing from this matrix.
    pub fn json(&self) -> MatrixJson<'_> {
        MatrixJson::from(self)
    }

    /// Writes matrix.json, pretty-printed, one cell at a time: a 1,000-cell matrix never
    /// exists as one JSON tree in memory.
    pub fn write_json(&self, w: impl std::io::Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(w, &self.json())
    }
}
