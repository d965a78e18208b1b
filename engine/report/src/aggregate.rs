//! One row of the matrix: a cell's trial records folded into counts, step-time statistics,
//! outcomes, hints and top detectors, exactly as AORTA's `CellStats` (§3.5). Nothing here says how
//! a run obtained the records (executed or served by the cache): a cell aggregate is a pure
//! function of the cell, the recipe and its records, so a cached rerun aggregates the same.

use crate::layout;
use crate::stats::{mean, percentile_sorted, population_std, sorted};
use aorta_recipe::{Cell, EnvironmentRef, JsonMap, Recipe};
use aorta_trial::{ExitStatus, TrialRecord, Verdict};
use indexmap::IndexMap;
use std::collections::BTreeMap;

/// Where a cell's step-time samples came from, best first. A cell reports the worst source any
/// trial contributed, so a ratio is never silently computed from mixed-quality timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StepTimeSource {
    /// The workload reported per-step times.
    PerStep,
    /// `elapsed_sec / total_iterations`.
    ElapsedPerIter,
    /// The trial's wall clock divided by its configured steps (includes start-up).
    WallClockTotal,
    /// No trial produced a timing.
    Missing,
}

impl StepTimeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            StepTimeSource::PerStep => "per_step",
            StepTimeSource::ElapsedPerIter => "elapsed_per_iter",
            StepTimeSource::WallClockTotal => "wall_clock_total",
            StepTimeSource::Missing => "missing",
        }
    }
}

/// How far a trial's main work got (AORTA's outcome vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    DidNotRun,
    Completed,
    CrashedAfterIterations,
    Unknown,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::DidNotRun => "did_not_run",
            Outcome::Completed => "completed",
            Outcome::CrashedAfterIterations => "crashed_after_iterations",
            Outcome::Unknown => "unknown",
        }
    }
}

/// Summary statistics over a cell's concatenated step-time samples (all 0.0 when none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepStats {
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl StepStats {
    pub fn of(samples: &[f64]) -> StepStats {
        if samples.is_empty() {
            return StepStats::default();
        }
        let s = sorted(samples);
        StepStats {
            mean: mean(samples),
            std: population_std(samples),
            min: s[0],
            max: s[s.len() - 1],
            p50: percentile_sorted(&s, 0.50),
            p90: percentile_sorted(&s, 0.90),
            p99: percentile_sorted(&s, 0.99),
        }
    }
}

/// A metric the torch and race workloads put in `result.metrics` that a triager compares
/// across cells (docs/workloads.md, docs/race.md). Other metrics describe the configuration
/// or the device and stay in each trial's result.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadMetric {
    TokensPerSec,
    StepTimeP50,
    StepTimeP99,
    Mfu,
    CorruptIterations,
}

impl WorkloadMetric {
    pub const ALL: [WorkloadMetric; 5] = [
        WorkloadMetric::TokensPerSec,
        WorkloadMetric::StepTimeP50,
        WorkloadMetric::StepTimeP99,
        WorkloadMetric::Mfu,
        WorkloadMetric::CorruptIterations,
    ];

    /// The key in `result.metrics`.
    pub fn key(self) -> &'static str {
        match self {
            WorkloadMetric::TokensPerSec => "tokens_per_sec",
            WorkloadMetric::StepTimeP50 => "step_time_p50",
            WorkloadMetric::StepTimeP99 => "step_time_p99",
            WorkloadMetric::Mfu => "mfu",
            WorkloadMetric::CorruptIterations => "corrupt_iterations",
        }
    }

    /// A column header, with the unit.
    pub fn label(self) -> &'static str {
        match self {
            WorkloadMetric::TokensPerSec => "tokens/s",
            WorkloadMetric::StepTimeP50 => "p50 step (ms)",
            WorkloadMetric::StepTimeP99 => "p99 step (ms)",
            WorkloadMetric::Mfu => "MFU",
            WorkloadMetric::CorruptIterations => "corrupt iterations",
        }
    }
}

/// One metric's values over a cell's trials that report it (a number, not null), trials in
/// index order.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSamples {
    pub metric: WorkloadMetric,
    pub values: Vec<f64>,
}

/// A cell's aggregate: every field is a pure function of the cell, the recipe and the trial
/// records (in any order), so a fully cached rerun renders the same matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct CellStats {
    pub name: String,
    pub mitigations: Vec<String>,
    pub environment: EnvironmentRef,
    pub extra_env: BTreeMap<String, String>,
    /// Mitigation bundles then `extra_env`: what the trials' processes got.
    pub resolved_env_vars: BTreeMap<String, String>,
    /// Recipe-scope workload_config merged with the cell's.
    pub workload_config: JsonMap,
    /// Trials aggregated (records given).
    pub trials: usize,
    pub passed_count: usize,
    /// `trials − passed − errored`.
    pub failed_count: usize,
    pub error_count: usize,
    pub step: StepStats,
    pub mean_wall_clock_sec: f64,
    /// All samples, trials in index order.
    pub step_times_ms: Vec<f64>,
    /// The same samples grouped by trial (empty groups dropped): the bootstrap resamples
    /// trials first, because steps of one process are not independent of each other.
    pub step_time_groups: Vec<Vec<f64>>,
    pub step_time_source: StepTimeSource,
    /// Relative to the run directory, sorted by trial index.
    pub trial_paths: Vec<String>,
    /// A cell-level error: the cell could not run at all.
    pub error: Option<String>,
    /// Histogram of `exit_status`, first-seen order.
    pub exit_status_counts: IndexMap<String, usize>,
    /// Histogram of per-trial outcomes, first-seen order; empty for error cells.
    pub outcome_counts: IndexMap<Outcome, usize>,
    /// `(hint, trials emitting it)`, first-seen order.
    pub failure_hints: Vec<(String, usize)>,
    pub executed_iter_min: Option<u64>,
    pub executed_iter_max: Option<u64>,
    pub configured_iters: Option<u64>,
    pub iters_display: String,
    pub top_failure_detector_id: Option<String>,
    pub top_warn_detector_id: Option<String>,
    pub stop_after_note: Option<String>,
    /// `(logits_checksum, trials reporting it)` over the trials whose metrics carry one
    /// (the inference workload), first seen first: more than one entry means the same prompts
    /// gave different bits in different trials.
    pub logits_checksums: Vec<(String, usize)>,
    /// The [`WorkloadMetric`]s some trial reports, in [`WorkloadMetric::ALL`] order.
    pub workload_metrics: Vec<MetricSamples>,
    /// Each trial's outcome by index, a missing index as no evidence (`trials: auto` replays
    /// its sequential test on these).
    pub outcomes: Vec<crate::sequential::Outcome>,
    /// Each trial's per-step times by index, empty where it reported none (`trials: auto`'s
    /// speed stop replays on these; [`crate::sequential::Pace`]).
    pub step_times_by_trial: Vec<Vec<f64>>,
    /// Kernel profilers' findings (`collect: [ncu]`), mean per trial.
    pub kernel_profiles: Vec<crate::kernels::CellProfile>,
}

/// The hint added to a cell whose trials disagree on `logits_checksum`.
pub const LOGITS_DISAGREE_HINT: &str =
    "logits checksum differs across trials: the same prompts gave different bits between runs (nondeterministic kernels); try workload_config deterministic: true";

const EM_DASH: &str = "—";

impl CellStats {
    /// Folds `trials` (any order; sorted by index here) for `cell`. `cell_error` marks a cell
    /// that could not run.
    pub fn aggregate<'t>(
        cell: &Cell,
        recipe: &Recipe,
        trials: impl IntoIterator<Item = &'t TrialRecord>,
        cell_error: Option<String>,
    ) -> CellStats {
        let mut ts: Vec<&TrialRecord> = trials.into_iter().collect();
        ts.sort_by_key(|t| t.trial_index);
        let n = ts.len();
        let steps = cell.effective_steps(recipe);
        let trial_paths = ts
            .iter()
            .map(|t| layout::trial_path(recipe.mode, &cell.name, t.trial_index))
            .collect();
        let mut failure_hints = hints(&ts);
        let logits_checksums = checksum_counts(&ts, "logits_checksum");
        if logits_checksums.len() > 1 {
            let outliers = n - logits_checksums[0].1;
            failure_hints.push((
                format!(
                    "{LOGITS_DISAGREE_HINT} ({} distinct values)",
                    logits_checksums.len()
                ),
                outliers,
            ));
        }
        let (top_failure_detector_id, top_warn_detector_id) = top_detectors(&ts);
        let mut stats = CellStats {
            name: cell.name.clone(),
            mitigations: cell.mitigations.clone(),
            environment: cell.environment.clone(),
            extra_env: cell.extra_env.clone(),
            resolved_env_vars: cell.resolved_env.clone(),
            workload_config: cell.effective_workload_config(recipe),
            trials: n,
            passed_count: 0,
            failed_count: n,
            error_count: 0,
            step: StepStats::default(),
            mean_wall_clock_sec: 0.0,
            step_times_ms: Vec::new(),
            step_time_groups: Vec::new(),
            step_time_source: StepTimeSource::Missing,
            trial_paths,
            error: cell_error,
            exit_status_counts: IndexMap::new(),
            outcome_counts: IndexMap::new(),
            failure_hints,
            executed_iter_min: None,
            executed_iter_max: None,
            configured_iters: None,
            iters_display: EM_DASH.into(),
            top_failure_detector_id,
            top_warn_detector_id,
            stop_after_note: None,
            logits_checksums,
            workload_metrics: workload_metrics(&ts),
            outcomes: Vec::new(),
            step_times_by_trial: Vec::new(),
            kernel_profiles: crate::kernels::cell_profiles(&ts),
        };
        if stats.error.is_some() {
            // AORTA keeps the row with zeros; hints and detectors are still reported.
            return stats;
        }
        stats.outcomes =
            crate::sequential::outcomes_of(ts.iter().map(|t| (t.trial_index, t.verdict)));
        stats.step_times_by_trial = crate::sequential::steps_of(
            ts.iter()
                .map(|t| (t.trial_index, t.result.step_times_ms.as_slice())),
        );
        stats.passed_count = ts.iter().filter(|t| t.verdict == Verdict::Pass).count();
        stats.error_count = ts.iter().filter(|t| t.verdict == Verdict::Error).count();
        stats.failed_count = n - stats.passed_count - stats.error_count;
        let mut worst: Option<StepTimeSource> = None;
        for t in &ts {
            let (samples, source) = trial_samples(t, steps);
            if source != StepTimeSource::Missing {
                worst = Some(worst.map_or(source, |w| w.max(source)));
            }
            if !samples.is_empty() {
                stats.step_times_ms.extend_from_slice(&samples);
                stats.step_time_groups.push(samples);
            }
            *stats
                .exit_status_counts
                .entry(exit_status_str(t.exit_status).to_string())
                .or_insert(0) += 1;
            *stats.outcome_counts.entry(outcome(t)).or_insert(0) += 1;
        }
        stats.step_time_source = worst.unwrap_or(StepTimeSource::Missing);
        stats.step = StepStats::of(&stats.step_times_ms);
        stats.mean_wall_clock_sec = mean(&ts.iter().map(|t| t.walltime_sec).collect::<Vec<_>>());
        iters(&mut stats, &ts);
        if let Some(rule) = recipe.stop_after {
            let events = ts
                .iter()
                .filter(|t| t.verdict.as_str() == rule.event_verdict.as_str())
                .count();
            let body = format!(
                "{events} {} event(s) in {n} trial(s)",
                rule.event_verdict.as_str()
            );
            stats.stop_after_note = Some(if n >= rule.max_trials as usize {
                format!("cap reached: {body}")
            } else if events >= rule.events as usize {
                format!("stopped early: {body}")
            } else {
                body
            });
        }
        stats
    }

    /// `failed / (passed + failed)`: errors are not evidence either way, so they are excluded.
    pub fn failure_rate(&self) -> f64 {
        let valid = self.valid_trials();
        if valid == 0 {
            0.0
        } else {
            self.failed_count as f64 / valid as f64
        }
    }

    pub fn valid_trials(&self) -> usize {
        self.passed_count + self.failed_count
    }

    pub fn error_rate(&self) -> f64 {
        if self.trials == 0 {
            0.0
        } else {
            self.error_count as f64 / self.trials as f64
        }
    }

    /// At least one trial in ten errored: the failure rate rests on too few valid trials.
    pub fn unreliable(&self) -> bool {
        self.error.is_none() && self.error_count > 0 && self.error_rate() >= 0.10
    }

    /// Every trial's main work never started: timing and confound are meaningless.
    pub fn did_not_run(&self) -> bool {
        self.outcome_counts.len() == 1
            && self.outcome_counts.get(&Outcome::DidNotRun) == Some(&self.trials)
    }

    /// No cell error, no failing and no erroring trial.
    pub fn is_clean(&self) -> bool {
        self.error.is_none() && self.failed_count == 0 && self.error_count == 0
    }
}

pub(crate) fn exit_status_str(s: ExitStatus) -> &'static str {
    match s {
        ExitStatus::Ok => "ok",
        ExitStatus::WorkloadFailed => "workload_failed",
        ExitStatus::WorkloadSetupFailed => "workload_setup_failed",
        ExitStatus::InfrastructureFailed => "infrastructure_failed",
    }
}

/// The trial ended badly before producing any timing: its main work most likely never ran.
fn inferred_did_not_run(t: &TrialRecord) -> bool {
    t.exit_status != ExitStatus::Ok
        && !t.result.step_times_ms.iter().any(|x| *x > 0.0)
        && t.result.elapsed_sec <= 0.0
}

/// AORTA's ladder: per-step times, then elapsed/iterations, then wall clock/steps — except
/// for a trial that never ran, whose wall clock would only measure its failure.
fn trial_samples(t: &TrialRecord, steps: u32) -> (Vec<f64>, StepTimeSource) {
    let r = &t.result;
    if !r.step_times_ms.is_empty() {
        return (r.step_times_ms.clone(), StepTimeSource::PerStep);
    }
    if r.total_iterations > 0 && r.elapsed_sec > 0.0 {
        return (
            vec![r.elapsed_sec / r.total_iterations as f64 * 1000.0],
            StepTimeSource::ElapsedPerIter,
        );
    }
    if r.main_work_started == Some(false) || inferred_did_not_run(t) {
        return (Vec::new(), StepTimeSource::Missing);
    }
    if t.walltime_sec > 0.0 && steps > 0 {
        return (
            vec![t.walltime_sec / f64::from(steps) * 1000.0],
            StepTimeSource::WallClockTotal,
        );
    }
    (Vec::new(), StepTimeSource::Missing)
}

fn outcome(t: &TrialRecord) -> Outcome {
    let r = &t.result;
    match r.main_work_started {
        Some(false) => Outcome::DidNotRun,
        Some(true) => match (r.executed_iterations, r.configured_iterations) {
            (Some(e), Some(c)) if e >= c => Outcome::Completed,
            (Some(_), Some(_)) if !r.passed => Outcome::CrashedAfterIterations,
            _ => Outcome::Unknown,
        },
        None if inferred_did_not_run(t) => Outcome::DidNotRun,
        None => Outcome::Unknown,
    }
}

/// The `Iters` column: `n/cfg`, `min..max/cfg`, `—/cfg` (some trial did not say), `?/?`
/// (trials disagree on the configuration) or `—` (the workload reports no iterations).
fn iters(stats: &mut CellStats, ts: &[&TrialRecord]) {
    let executed: Vec<Option<u64>> = ts.iter().map(|t| t.result.executed_iterations).collect();
    let known: Vec<u64> = executed.iter().flatten().copied().collect();
    stats.executed_iter_min = known.iter().min().copied();
    stats.executed_iter_max = known.iter().max().copied();
    let mut configured: Vec<u64> = ts
        .iter()
        .filter_map(|t| t.result.configured_iterations)
        .collect();
    configured.sort_unstable();
    configured.dedup();
    stats.iters_display = match configured.as_slice() {
        [] => EM_DASH.into(),
        [cfg] => {
            stats.configured_iters = Some(*cfg);
            match (stats.executed_iter_min, stats.executed_iter_max) {
                _ if executed.iter().any(Option::is_none) => format!("{EM_DASH}/{cfg}"),
                (Some(lo), Some(hi)) if lo == hi => format!("{lo}/{cfg}"),
                (Some(lo), Some(hi)) => format!("{lo}..{hi}/{cfg}"),
                _ => format!("{EM_DASH}/{cfg}"),
            }
        }
        _ => "?/?".into(),
    };
}

/// Per [`WorkloadMetric`], the finite numbers the trials report, in trial order.
fn workload_metrics(ts: &[&TrialRecord]) -> Vec<MetricSamples> {
    WorkloadMetric::ALL
        .iter()
        .filter_map(|&metric| {
            let values: Vec<f64> = ts
                .iter()
                .filter_map(|t| t.result.metrics.get(metric.key())?.as_f64())
                .filter(|v| v.is_finite())
                .collect();
            (!values.is_empty()).then_some(MetricSamples { metric, values })
        })
        .collect()
}

/// Distinct string values of `metrics[name]` with how many trials gave each, first seen first.
fn checksum_counts(ts: &[&TrialRecord], name: &str) -> Vec<(String, usize)> {
    let mut counts: IndexMap<String, usize> = IndexMap::new();
    for t in ts {
        if let Some(v) = t.result.metrics.get(name).and_then(|v| v.as_str()) {
            *counts.entry(v.to_string()).or_insert(0) += 1;
        }
    }
    counts.into_iter().collect()
}

/// Failure hints with how many trials gave each, first seen first. Hints that differ only in
/// their numbers ("expected 11 got 10 in 711616/1000000 elements") are one hint: the first
/// one seen stands for the group, with a note when the numbers varied, so a cell whose every
/// trial failed the same way reads as one line, not ten.
fn hints(ts: &[&TrialRecord]) -> Vec<(String, usize)> {
    struct Group {
        first: String,
        variants: std::collections::HashSet<String>,
        trials: usize,
    }
    let mut groups: IndexMap<String, Group> = IndexMap::new();
    for t in ts {
        let mut seen: Vec<String> = Vec::new();
        for d in &t.result.failure_details {
            if let Some(h) = d.hint.as_deref().filter(|h| !h.is_empty()) {
                let shape = without_numbers(h);
                let g = groups.entry(shape.clone()).or_insert_with(|| Group {
                    first: h.to_string(),
                    variants: Default::default(),
                    trials: 0,
                });
                g.variants.insert(h.to_string());
                if !seen.contains(&shape) {
                    seen.push(shape);
                    g.trials += 1;
                }
            }
        }
    }
    groups
        .into_values()
        .map(|g| {
            let text = if g.variants.len() > 1 {
                format!("{} (numbers vary: {} variants)", g.first, g.variants.len())
            } else {
                g.first
            };
            (text, g.trials)
        })
        .collect()
}

/// `h` with every run of digits replaced by `#`: the shape two hints share when they differ
/// only in counts, iterations or sizes.
fn without_numbers(h: &str) -> String {
    let mut out = String::with_capacity(h.len());
    let mut in_number = false;
    for c in h.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// Most frequent failure and warn detector across trials; ties go to the first seen. A
/// trial listing an id both in `result.metrics` and in its own lists counts it once.
fn top_detectors(ts: &[&TrialRecord]) -> (Option<String>, Option<String>) {
    let top = |flat: fn(&TrialRecord) -> &Vec<String>, metric: &str| {
        let mut counts: IndexMap<String, usize> = IndexMap::new();
        for t in ts {
            let mut ids: Vec<&str> = Vec::new();
            let from_metrics = t
                .result
                .metrics
                .get(metric)
                .and_then(|v| v.as_texts())
                .into_iter()
                .flatten()
                .map(String::as_str);
            for id in from_metrics.chain(flat(t).iter().map(String::as_str)) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            for id in ids {
                *counts.entry(id.to_string()).or_insert(0) += 1;
            }
        }
        let mut best: Option<(&String, usize)> = None;
        for (id, c) in &counts {
            if best.is_none_or(|(_, b)| *c > b) {
                best = Some((id, *c));
            }
        }
        best.map(|(id, _)| id.clone())
    };
    (
        top(|t| &t.failure_detectors_fired, "failure_detectors_fired"),
        top(|t| &t.warn_detectors_fired, "warn_detectors_fired"),
    )
}
