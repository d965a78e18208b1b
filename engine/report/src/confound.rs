//! The speed-confound detector (AORTA §6): does a mitigation "fix" failures only by making
//! each step slower? AORTA's rule compares two means; aorta keeps that rule verbatim in
//! [`aorta_compat`] and, in [`classify`], only calls a cell `speed` when a bootstrap interval
//! of the ratio lies entirely above the threshold.

use crate::aggregate::{CellStats, StepTimeSource};
use crate::bootstrap;
use crate::stats::round_half_even;
use aorta_recipe::{Mode, Recipe};
use std::fmt;

/// The `Confound` column. `Display` gives the exact string written to matrix.md/json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// The cell could not run (cell-level error).
    Error,
    /// No trial of the cell started its main work.
    DidNotRun,
    /// The reference cell.
    Baseline,
    /// No comparable per-step timing on one side.
    NotApplicable,
    /// Slower than the threshold allows, with the whole 95% interval above it (or, with too
    /// few samples for an interval, by AORTA's point rule). `percent` = round((ratio−1)·100).
    Speed { percent: i64 },
    /// The point ratio exceeds the threshold but the interval reaches below it: a slowdown
    /// is possible, not established. aorta only; AORTA would say `speed`.
    SpeedUncertain { percent: i64 },
    /// Not slower, and the failure rate did not drop.
    NoEffect,
    /// Not slower, and fewer failures than the baseline: the mitigation looks genuine.
    Neutral,
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tag::Error => f.write_str("error"),
            Tag::DidNotRun => f.write_str("did_not_run"),
            Tag::Baseline => f.write_str("(baseline)"),
            Tag::NotApplicable => f.write_str("n/a"),
            Tag::Speed { percent } => write!(f, "speed (+{percent}%)"),
            Tag::SpeedUncertain { percent } => write!(f, "speed? (+{percent}%)"),
            Tag::NoEffect => f.write_str("no effect"),
            Tag::Neutral => f.write_str("-"),
        }
    }
}

/// One cell's confound verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// aorta's tag (interval-aware).
    pub tag: Tag,
    /// What AORTA 0.2.1 would have written, for comparison.
    pub aorta_tag: Tag,
    /// cell mean / baseline mean, when both sides have per-step timings.
    pub ratio: Option<f64>,
    /// Bootstrap 95% interval of the ratio; `None` with fewer than 2 samples on a side.
    pub ci95: Option<(f64, f64)>,
}

impl Verdict {
    /// The ratio exists but no interval could be computed, so AORTA's point rule decided.
    pub fn fell_back_to_point_rule(&self) -> bool {
        self.ratio.is_some() && self.ci95.is_none()
    }
}

/// Steps 1–6 of AORTA's rule: the tags that need no ratio. `None` means "compare".
fn pre_ratio(cell: &CellStats, baseline: Option<&CellStats>) -> Option<Tag> {
    if cell.error.is_some() {
        return Some(Tag::Error);
    }
    if cell.did_not_run() {
        return Some(Tag::DidNotRun);
    }
    let Some(b) = baseline else {
        return Some(Tag::NotApplicable);
    };
    if cell.name == b.name {
        return Some(Tag::Baseline);
    }
    if b.error.is_some() || b.step.mean <= 0.0 {
        return Some(Tag::NotApplicable);
    }
    if cell.step.mean <= 0.0 || cell.step_time_source == StepTimeSource::Missing {
        return Some(Tag::NotApplicable);
    }
    if cell.step_time_source != StepTimeSource::PerStep
        || b.step_time_source != StepTimeSource::PerStep
    {
        return Some(Tag::NotApplicable);
    }
    None
}

fn percent(ratio: f64) -> i64 {
    round_half_even((ratio - 1.0) * 100.0)
}

/// AORTA 0.2.1's `classify(cell, baseline, threshold)` exactly: tag and ratio from the two
/// means and the errors-excluded failure rates. `baseline` is `None` when the baseline cell
/// is not among the aggregated cells.
pub fn aorta_compat(
    cell: &CellStats,
    baseline: Option<&CellStats>,
    threshold: f64,
) -> (Tag, Option<f64>) {
    if let Some(tag) = pre_ratio(cell, baseline) {
        return (tag, None);
    }
    let b = baseline.expect("pre_ratio returns a tag when the baseline is missing");
    let ratio = cell.step.mean / b.step.mean;
    let tag = if ratio > threshold {
        Tag::Speed {
            percent: percent(ratio),
        }
    } else if cell.failure_rate() >= b.failure_rate() {
        Tag::NoEffect
    } else {
        Tag::Neutral
    };
    (tag, Some(ratio))
}

/// aorta's rule: AORTA's, except that a ratio above the threshold is `speed` only when the
/// interval's lower bound is above it too, and `speed?` when the interval straddles it.
/// Without an interval (fewer than 2 samples on a side) AORTA's point rule decides.
pub fn classify(cell: &CellStats, baseline: Option<&CellStats>, threshold: f64) -> Verdict {
    let (aorta_tag, ratio) = aorta_compat(cell, baseline, threshold);
    let (Some(r), Some(b)) = (ratio, baseline) else {
        return Verdict {
            tag: aorta_tag,
            aorta_tag,
            ratio,
            ci95: None,
        };
    };
    let ci95 = bootstrap::ratio_ci(
        &cell.step_time_groups,
        &b.step_time_groups,
        &cell.name,
        &b.name,
    );
    let tag = match (aorta_tag, ci95) {
        (Tag::Speed { percent }, Some((lo, _))) if lo <= threshold => {
            Tag::SpeedUncertain { percent }
        }
        _ => aorta_tag,
    };
    Verdict {
        tag,
        aorta_tag,
        ratio: Some(r),
        ci95,
    }
}

/// Why no baseline cell could be chosen ([`resolve_baseline`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaselineError {
    #[error("no cells to choose a baseline from")]
    NoCells,
    /// The recipe's `confound.baseline_cell`, which names no cell.
    #[error("baseline cell '{0}' is not a cell of this run")]
    UnknownCell(String),
    #[error("cannot choose a baseline cell: add one named 'baseline-*' or using exactly [none], or set confound.baseline_cell")]
    NoCandidate,
}

/// AORTA's `resolve_baseline(cells, explicit, skip)` (§6.1.1) over aggregated cells.
pub fn resolve_baseline(
    cells: &[CellStats],
    explicit: Option<&str>,
    skip: &[&str],
) -> Result<String, BaselineError> {
    if cells.is_empty() {
        return Err(BaselineError::NoCells);
    }
    if let Some(name) = explicit {
        return if cells.iter().any(|c| c.name == name) {
            Ok(name.to_string())
        } else {
            Err(BaselineError::UnknownCell(name.to_string()))
        };
    }
    let candidates: Vec<&CellStats> = cells
        .iter()
        .filter(|c| !skip.contains(&c.name.as_str()))
        .collect();
    candidates
        .iter()
        .find(|c| c.name.starts_with("baseline-"))
        .or_else(|| candidates.iter().find(|c| c.mitigations == ["none"]))
        .or_else(|| (candidates.len() == 1).then(|| &candidates[0]))
        .map(|c| c.name.clone())
        .ok_or(BaselineError::NoCandidate)
}

/// The baseline as chosen after the run, with what went wrong choosing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub name: String,
    pub warnings: Vec<String>,
    /// Set when the run cannot be trusted as a comparison (the CLI exits non-zero).
    pub incomplete_reason: Option<String>,
}

/// AORTA §6.1.2: a baseline that did not run cannot anchor ratios. An explicit baseline (and
/// every probe baseline, which AORTA makes explicit) that did not run degrades the run; an
/// automatic one is re-chosen among cells that ran, and the run degrades only if none can be.
pub fn resolve_run_baseline(recipe: &Recipe, cells: &[CellStats]) -> Baseline {
    let mut out = Baseline {
        name: recipe.confound.resolved_baseline.clone(),
        warnings: Vec::new(),
        incomplete_reason: None,
    };
    let explicit = recipe.confound.baseline_cell.is_some() || recipe.mode == Mode::Probe;
    let dnr: Vec<&str> = cells
        .iter()
        .filter(|c| c.did_not_run())
        .map(|c| c.name.as_str())
        .collect();
    if explicit {
        if dnr.contains(&out.name.as_str()) {
            let msg = format!(
                "baseline cell '{}' did not run; step-time ratios are reported as n/a",
                out.name
            );
            out.warnings.push(msg.clone());
            out.incomplete_reason = Some(msg);
        }
    } else if !dnr.is_empty() {
        match resolve_baseline(cells, None, &dnr) {
            Ok(name) => out.name = name,
            Err(_) => {
                if let Ok(name) = resolve_baseline(cells, None, &[]) {
                    out.name = name;
                }
                let msg = format!("no baseline candidate ran (did not run: {}); comparing against '{}', step-time ratios are reported as n/a", dnr.join(", "), out.name);
                out.warnings.push(msg.clone());
                out.incomplete_reason = Some(msg);
            }
        }
    }
    if let Some(b) = cells.iter().find(|c| c.name == out.name) {
        if let Some(err) = &b.error {
            out.warnings.push(format!("baseline cell '{}' errored ({}); step-time ratios of the other cells are reported as n/a", b.name, one_line(err)));
        }
    } else {
        out.warnings.push(format!("baseline cell '{}' is not among the aggregated cells; step-time ratios are reported as n/a", out.name));
    }
    out
}

/// Collapses a multi-line message onto one line.
pub(crate) fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
