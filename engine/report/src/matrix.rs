//! The assembled matrix: aggregated cells, the post-run baseline and each cell's confound
//! verdict, rendered as matrix.json (AORTA schema_version 1 plus aorta's fields).

use crate::aggregate::CellStats;
use crate::confound::{self, Baseline, Verdict};
use crate::{bootstrap, layout};
use aorta_recipe::{Mode, Recipe};
use serde_json::{json, Map, Value};

/// What the caller knows about this invocation that the records do not say.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// `YYYY-MM-DDTHH-MM-SS` (UTC), as in the run directory name.
    pub run_timestamp: String,
    /// Warnings gathered during the run (partial env probes, placeholders, …), in order.
    pub warnings: Vec<String>,
}

/// A cell and its confound verdict.
#[derive(Debug, Clone)]
pub struct Row {
    pub stats: CellStats,
    pub confound: Verdict,
}

/// Everything matrix.md, matrix.json and the summary are rendered from.
#[derive(Debug, Clone)]
pub struct Matrix<'r> {
    pub recipe: &'r Recipe,
    pub rows: Vec<Row>,
    pub baseline: Baseline,
    /// The run's warnings, then the baseline's.
    pub warnings: Vec<String>,
    pub run_timestamp: String,
}

impl<'r> Matrix<'r> {
    /// Resolves the baseline after the run (§6.1.2) and classifies every cell against it.
    pub fn new(recipe: &'r Recipe, cells: Vec<CellStats>, run: RunInfo) -> Matrix<'r> {
        let baseline = confound::resolve_run_baseline(recipe, &cells);
        let threshold = recipe.confound.threshold;
        let base = cells.iter().find(|c| c.name == baseline.name).cloned();
        let rows = cells
            .into_iter()
            .map(|stats| Row {
                confound: confound::classify(&stats, base.as_ref(), threshold),
                stats,
            })
            .collect();
        let mut warnings = run.warnings;
        warnings.extend(baseline.warnings.iter().cloned());
        Matrix {
            recipe,
            rows,
            baseline,
            warnings,
            run_timestamp: run.run_timestamp,
        }
    }

    /// Why the run should not be trusted as a comparison (the CLI then exits 1), if it shouldn't.
    pub fn incomplete_reason(&self) -> Option<&str> {
        self.baseline.incomplete_reason.as_deref()
    }

    pub fn baseline_row(&self) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.stats.name == self.baseline.name)
    }

    /// `stop_after.max_trials` under a stop rule, else the recipe's trials.
    pub fn trials_per_cell(&self) -> u32 {
        self.recipe
            .stop_after
            .map_or(self.recipe.trials, |s| s.max_trials)
    }

    /// Trials run by this invocation and trials served from the cache, over all cells.
    pub fn cache_totals(&self) -> (usize, usize) {
        self.rows.iter().fold((0, 0), |(e, r), row| {
            (e + row.stats.executed, r + row.stats.reused)
        })
    }

    pub fn cell_dir(&self, cell: &str) -> String {
        layout::cell_dir(self.recipe.mode, cell)
    }

    /// matrix.json as one value (tests; small matrices). Key order is fixed: AORTA's fields
    /// first, then aorta's additions.
    pub fn to_json(&self) -> Value {
        let mut v = self.header_json();
        if let Value::Object(m) = &mut v {
            m.insert(
                "cells".into(),
                Value::Array(self.rows.iter().map(cell_json).collect()),
            );
        }
        v
    }

    /// Writes matrix.json (pretty, byte-identical to [`to_json`](Self::to_json)) one cell at a
    /// time, so a 1,000-cell matrix never exists as one JSON tree in memory.
    pub fn write_json(&self, w: impl std::io::Write) -> serde_json::Result<()> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Cells<'a>(&'a [Row]);
        impl serde::Serialize for Cells<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(self.0.len()))?;
                for row in self.0 {
                    seq.serialize_element(&cell_json(row))?;
                }
                seq.end()
            }
        }
        struct Whole<'a>(&'a Matrix<'a>);
        impl serde::Serialize for Whole<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let Value::Object(header) = self.0.header_json() else {
                    unreachable!("the header is an object")
                };
                let mut map = s.serialize_map(Some(header.len() + 1))?;
                for (k, v) in &header {
                    map.serialize_entry(k, v)?;
                }
                map.serialize_entry("cells", &Cells(&self.0.rows))?;
                map.end()
            }
        }
        serde_json::to_writer_pretty(w, &Whole(self))
    }

    /// Every top-level field of matrix.json but `cells` (which comes last).
    fn header_json(&self) -> Value {
        let r = self.recipe;
        let (executed, reused) = self.cache_totals();
        let source = match &r.source {
            Some(s) => json!({"path": s.path.to_string_lossy(), "blake3": s.blake3}),
            None => json!({"path": null, "blake3": null}),
        };
        json!({
            "schema_version": 1,
            "workload": r.workload,
            "ticket": r.ticket,
            "trials_per_cell": self.trials_per_cell(),
            "steps_per_trial": r.steps,
            "run_timestamp": self.run_timestamp,
            "baseline_cell": self.baseline.name,
            "confound": {
                "threshold": r.confound.threshold,
                "baseline_cell_configured": r.confound.baseline_cell,
                "interval": {
                    "method": "two-stage bootstrap (trials, then steps within a trial); percentile interval of the ratio of means",
                    "level": bootstrap::LEVEL,
                    "resamples": bootstrap::RESAMPLES,
                    "min_samples": bootstrap::MIN_SAMPLES,
                },
            },
            "stop_after": r.stop_after.map(|s| json!({"events": s.events, "max_trials": s.max_trials, "event_verdict": s.event_verdict.as_str()})),
            "warnings": self.warnings,
            "recipe_source": source,
            "mode": match r.mode { Mode::Triage => "triage", Mode::Probe => "probe" },
            "incomplete_reason": self.baseline.incomplete_reason,
            "cache": {"executed": executed, "reused": reused},
        })
    }
}

fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn counts<K: AsRef<str>>(m: impl IntoIterator<Item = (K, usize)>) -> Value {
    Value::Object(
        m.into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), json!(v)))
            .collect::<Map<_, _>>(),
    )
}

fn cell_json(row: &Row) -> Value {
    let s = &row.stats;
    let env = &s.environment;
    let c = &row.confound;
    let fields: Vec<(&str, Value)> = vec![
        ("name", json!(s.name)),
        ("mitigations", json!(s.mitigations)),
        ("environment", json!(env.name)),
        ("extra_env", json!(s.extra_env)),
        ("resolved_env_vars", json!(s.resolved_env_vars)),
        ("trials", json!(s.trials)),
        ("passed_count", json!(s.passed_count)),
        ("failed_count", json!(s.failed_count)),
        ("mean_step_time_ms", num(s.step.mean)),
        ("std_step_time_ms", num(s.step.std)),
        ("min_step_time_ms", num(s.step.min)),
        ("max_step_time_ms", num(s.step.max)),
        ("p50_step_time_ms", num(s.step.p50)),
        ("p90_step_time_ms", num(s.step.p90)),
        ("p99_step_time_ms", num(s.step.p99)),
        ("mean_wall_clock_sec", num(s.mean_wall_clock_sec)),
        (
            "exit_status_counts",
            counts(s.exit_status_counts.iter().map(|(k, v)| (k.as_str(), *v))),
        ),
        (
            "step_times_ms",
            Value::Array(s.step_times_ms.iter().map(|x| num(*x)).collect()),
        ),
        ("trial_paths", json!(s.trial_paths)),
        ("error", json!(s.error)),
        ("step_time_source", json!(s.step_time_source.as_str())),
        (
            "failure_hints",
            Value::Array(s.failure_hints.iter().map(|(h, n)| json!([h, n])).collect()),
        ),
        (
            "outcome_counts",
            counts(s.outcome_counts.iter().map(|(k, v)| (k.as_str(), *v))),
        ),
        ("executed_iter_min", json!(s.executed_iter_min)),
        ("executed_iter_max", json!(s.executed_iter_max)),
        ("configured_iters", json!(s.configured_iters)),
        ("iters_display", json!(s.iters_display)),
        ("workload_config", Value::Object(s.workload_config.clone())),
        ("top_failure_detector_id", json!(s.top_failure_detector_id)),
        ("top_warn_detector_id", json!(s.top_warn_detector_id)),
        ("stop_after_note", json!(s.stop_after_note)),
        ("error_count", json!(s.error_count)),
        ("resumed", json!(s.resumed())),
        ("failure_rate", num(s.failure_rate())),
        ("error_rate", num(s.error_rate())),
        ("unreliable", json!(s.unreliable())),
        ("confound", json!(c.tag.to_string())),
        ("step_time_ratio", c.ratio.map_or(Value::Null, num)),
        (
            "resolved_environment",
            json!({"name": env.name, "docker": env.docker, "venv": env.venv, "buck_target": env.buck_target, "inline": env.inline}),
        ),
        // aorta's additions.
        ("executed", json!(s.executed)),
        ("reused", json!(s.reused)),
        (
            "step_time_ratio_ci95",
            c.ci95
                .map_or(Value::Null, |(lo, hi)| json!([num(lo), num(hi)])),
        ),
        ("confound_aorta", json!(c.aorta_tag.to_string())),
        (
            "logits_checksums",
            Value::Array(
                s.logits_checksums
                    .iter()
                    .map(|(h, n)| json!([h, n]))
                    .collect(),
            ),
        ),
    ];
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}
