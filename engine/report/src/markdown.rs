//! matrix.md (AORTA §3.7): header, the Reproduction Summary table with its conditional
//! columns, failure hints and notes: a function of the recipe, the trial records and the
//! [`RunInfo`](crate::RunInfo) (when it was rendered, the run's warnings, the doctor's verdict
//! on the node). Nothing says which trials this invocation executed and which the cache
//! served, so a fully cached rerun has nothing new to render.

use crate::aggregate::CellStats;
use crate::confound::{one_line, Tag};
use crate::matrix::{Matrix, Row};
use crate::stats::{fmt_1, pct, round_half_even};
use aorta_recipe::Mode;
use serde_json::Value;
use std::fmt::Write;

const DASH: &str = "—";

impl Matrix<'_> {
    /// The whole matrix.md text.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let r = self.recipe;
        let _ = writeln!(out, "# Triage Matrix - {}\n", r.workload);
        if !self.warnings.is_empty() {
            out.push_str("> [!WARNING]\n");
            for w in &self.warnings {
                let _ = writeln!(out, "> {}", one_line(w));
            }
            out.push('\n');
        }
        let recipe_line = match &r.source {
            Some(s) => format!(
                "{} (blake3:{})",
                s.path.display(),
                s.blake3.get(..10).unwrap_or(&s.blake3)
            ),
            None => "(flag-mode; in-memory)".into(),
        };
        let trials = match (r.stop_after, r.auto) {
            (Some(s), _) => format!("up to {}", s.max_trials),
            (None, Some(a)) => format!(
                "auto (until decided at {} confidence, up to {})",
                pct(a.confidence),
                a.max_trials_per_cell
            ),
            (None, None) => r.trials.to_string(),
        };
        let base_mean = match self.baseline_row() {
            Some(b) if b.stats.error.is_none() && b.stats.step.mean > 0.0 => {
                format!("{} ms", fmt_1(b.stats.step.mean))
            }
            _ => "n/a".into(),
        };
        let _ = writeln!(
            out,
            "**Ticket**: {}  ",
            r.ticket.as_deref().unwrap_or("(none)")
        );
        let _ = writeln!(out, "**Workload**: {}  ", r.workload);
        let _ = writeln!(out, "**Recipe**: {recipe_line}  ");
        let _ = writeln!(out, "**Trials per cell**: {trials}  ");
        let _ = writeln!(out, "**Steps per trial**: {}  ", r.steps);
        let _ = writeln!(out, "**Run timestamp**: {}  ", self.run_timestamp);
        let _ = writeln!(
            out,
            "**Baseline cell**: {} (mean step time = {base_mean})  ",
            self.baseline.name
        );
        if let Some(v) = &self.doctor {
            let _ = writeln!(
                out,
                "**Node health**: {} ([doctor.json](doctor.json))  ",
                v.summary_line()
            );
        }
        out.push_str(
            "**Report**: [report.html](report.html) (intervals, plots, detectors, environment)\n\n",
        );
        self.doctor_banner(&mut out);
        self.answer_section(&mut out);
        out.push_str("## Reproduction Summary\n\n");
        let cols = Columns::of(self);
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                cols.cells(self, row)
                    .iter()
                    .map(|c| escape_cell(c))
                    .collect()
            })
            .collect();
        out.push_str(&table(&cols.header(), &rows));
        self.hints_section(&mut out);
        self.kernels_section(&mut out);
        self.notes_section(&mut out, &cols);
        out
    }

    /// A run built on a node that failed `aorta doctor`: a caution before the answer, with
    /// each check that warned or failed (figure, threshold, remedy).
    fn doctor_banner(&self, out: &mut String) {
        let Some((v, banner)) = self
            .doctor
            .as_ref()
            .and_then(|v| Some((v, crate::doctor::banner(v)?)))
        else {
            return;
        };
        out.push_str("> [!CAUTION]\n");
        let _ = writeln!(out, "> **{banner}**");
        for c in &v.flagged {
            let _ = writeln!(out, "> - {}", one_line(&crate::doctor::flagged_line(c)));
        }
        let _ = writeln!(
            out,
            ">\n> {} check(s) passed, {} not applicable; [doctor.json](doctor.json) has the whole report.\n",
            v.counts.pass, v.counts.not_applicable
        );
    }

    /// The run's answer, then each cell's call against the baseline with its evidence.
    fn answer_section(&self, out: &mut String) {
        let a = &self.answer;
        out.push_str("## Answer\n\n");
        let _ = writeln!(out, "**{}**  ", a.headline);
        let _ = writeln!(out, "Next: {}\n", a.next_step);
        if a.baseline.is_none() || a.cells.is_empty() {
            return;
        }
        let rows: Vec<Vec<String>> = a
            .baseline
            .iter()
            .chain(&a.cells)
            .map(|c| {
                let mut row = vec![
                    escape_cell(&c.cell),
                    c.call.label().to_string(),
                    c.stability.label().to_string(),
                    format!("{}/{}", c.failed, c.trials),
                    format!("{}–{}", pct(c.interval.0), pct(c.interval.1)),
                    if c.call == crate::verdict::Call::Baseline {
                        "—".into()
                    } else {
                        format!("{:.3}", c.p_value)
                    },
                    c.trials_to_decide
                        .map_or_else(|| "—".into(), |n| n.to_string()),
                ];
                if a.sequential {
                    row.push(c.auto.map_or_else(
                        || "—".into(),
                        |s| format!("{} after {} trial(s)", s.stop.describe(), s.trials),
                    ));
                }
                row
            })
            .collect();
        let mut header = vec![
            "Cell".to_string(),
            "Call".into(),
            "Outcome".into(),
            "Failed".into(),
            format!("{} interval", pct(a.confidence)),
            "p (two-sided)".into(),
            "Trials to decide".into(),
        ];
        if a.sequential {
            header.push("Stopped".into());
        }
        out.push_str(&table(&header, &rows));
        out.push_str(if a.sequential {
            "\nCalls hold at the stated confidence across all cells and looks (trials: auto: Fisher's exact test at 4, 8, 16, … trials, the error rate spent over looks and cells); errored trials are no evidence. Outcome: pass, fail, or flaky (both).\n\n"
        } else {
            "\nCalls hold at the stated confidence across all cells (Fisher's exact test, Holm's correction); errored trials are no evidence. Outcome: pass, fail, or flaky (both).\n\n"
        });
    }

    fn hints_section(&self, out: &mut String) {
        let lines: Vec<String> = self
            .rows
            .iter()
            .flat_map(|row| {
                row.stats.failure_hints.iter().map(move |(h, n)| {
                    format!(
                        "- **{}** ({n}/{} trials): {}",
                        row.stats.name,
                        row.stats.trials,
                        one_line(h)
                    )
                })
            })
            .collect();
        if !lines.is_empty() {
            out.push_str("\n## Failure hints\n\n");
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
    }

    /// Per profiler: each cell's device time, its top kernels, and how it differs from the
    /// baseline's (`kernels::tables`, shared with report.html).
    fn kernels_section(&self, out: &mut String) {
        let tables = crate::kernels::tables(
            self.rows
                .iter()
                .map(|r| (r.stats.name.as_str(), r.stats.kernel_profiles.as_slice())),
            &self.baseline.name,
        );
        if tables.is_empty() {
            return;
        }
        out.push_str("\n## Kernel profiles\n");
        for t in tables {
            let rows: Vec<Vec<String>> = t
                .rows
                .into_iter()
                .map(|r| {
                    let top: Vec<String> = r
                        .top
                        .iter()
                        .map(|(n, us, calls)| format!("`{n}` {} ×{calls}", crate::kernels::ms(*us)))
                        .collect();
                    vec![
                        r.cell,
                        r.trials,
                        crate::kernels::ms(r.total_us),
                        if top.is_empty() {
                            "—".into()
                        } else {
                            top.join(", ")
                        },
                        r.against_baseline,
                    ]
                })
                .collect();
            out.push_str(&format!(
                "\n### {} (device time per trial, mean over the trials profiled)\n\n",
                t.tool
            ));
            out.push_str(&table(
                &[
                    "Cell".into(),
                    "Trials profiled".into(),
                    "Device time".into(),
                    "Top kernels".into(),
                    "Against the baseline".into(),
                ],
                &rows,
            ));
        }
    }

    fn notes_section(&self, out: &mut String, cols: &Columns) {
        let t = self.recipe.confound.threshold;
        let pct = round_half_even((t - 1.0) * 100.0);
        let mut n: Vec<String> = vec![
            format!("- **Confound** compares each cell's mean step time with the baseline cell `{}` (threshold {t}: more than {pct}% slower counts as a slowdown):", self.baseline.name),
            "  - `speed (+N%)`: N% slower than the baseline, with the whole 95% interval of the ratio above the threshold; a lower failure rate may only reflect slower iteration.".into(),
            "  - `speed? (+N%)`: the mean ratio is above the threshold but its 95% interval reaches below it; a slowdown is possible, not established.".into(),
            "  - `no effect`: not slower, and the failure rate did not drop.".into(),
            "  - `-`: not slower, and fewer failures than the baseline.".into(),
            "  - `n/a`: no comparable timing; both cells need per-step times from the workload (per-iteration and wall-clock fallbacks are never compared) and a baseline that ran without error.".into(),
            "  - `(baseline)`: the reference cell.".into(),
            "  - `error`: the cell could not run; its error is in matrix.json.".into(),
        ];
        if self.rows.iter().any(|r| r.confound.tag == Tag::DidNotRun) {
            n.push("  - `did_not_run`: no trial of the cell started its main work, so it has no timing.".into());
        }
        if cols.ratio {
            n.push(format!(
                "- **Ratio (95% CI)**: cell mean step time / baseline mean step time, with a percentile interval from {} two-stage bootstrap resamples (trials, then steps within each trial), seeded by the cell names so a rerun reproduces it.",
                crate::bootstrap::RESAMPLES
            ));
        }
        let fallback: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.confound.fell_back_to_point_rule())
            .map(|r| format!("`{}`", r.stats.name))
            .collect();
        if !fallback.is_empty() {
            n.push(format!("- No interval for {} (fewer than {} step-time samples on a side): the tag follows AORTA 0.2.1's point rule.", fallback.join(", "), crate::bootstrap::MIN_SAMPLES));
        }
        for r in self
            .rows
            .iter()
            .filter(|r| r.confound.tag != r.confound.aorta_tag)
        {
            n.push(format!(
                "- AORTA 0.2.1 would tag `{}` as `{}`.",
                r.stats.name, r.confound.aorta_tag
            ));
        }
        n.push(
            "- **Failure rate** = failed / (passed + failed); errored trials are excluded.".into(),
        );
        if cols.errors {
            n.push("- **Errors**: trials that errored (the body could not run or be judged) of all trials; `(unreliable)` when at least 10% errored.".into());
        }
        if cols.top_failure || cols.top_warn {
            n.push("- **Top failure** / **Top warn**: the detector that fired in the most trials of the cell (ties: the first seen).".into());
        }
        if let Some(a) = self.recipe.auto {
            n.push(format!("- **trials: auto**: each cell ran until its comparison with the baseline was decided (fixes, worse, or no different), at most {} trial(s); the Answer table's Stopped column says where and why.", a.max_trials_per_cell));
        }
        if let Some(s) = self.recipe.stop_after {
            n.push(format!("- **Stop after**: each cell ran until {} `{}` trial(s) or {} trial(s), whichever came first.", s.events, s.event_verdict.as_str(), s.max_trials));
        }
        if cols.iters {
            n.push("- **Iters**: executed / configured iterations (`min..max` when trials differ, `—/N` when a trial did not report, `?/?` when trials disagree on the configuration).".into());
        }
        if !cols.config_keys.is_empty() {
            n.push(
                "- **Config**: the workload_config keys whose values differ between cells.".into(),
            );
        }
        match self.recipe.probe.as_ref().map(|p| p.step_time_regex.is_some()) {
            Some(false) => n.push("- **Mean step (ms)**: probe cells time the whole command (wall clock per trial), so their confound is `n/a`.".into()),
            Some(true) => n.push("- **Mean step (ms)**: each trial's step times are the `step_time_regex` matches in its logs.".into()),
            None => {}
        }
        out.push_str("\n## Notes\n\n");
        for l in n {
            out.push_str(&l);
            out.push('\n');
        }
    }
}

/// Which conditional columns this matrix shows.
struct Columns {
    probe: bool,
    config_keys: Vec<String>,
    errors: bool,
    top_failure: bool,
    top_warn: bool,
    stop_after: bool,
    iters: bool,
    ratio: bool,
}

impl Columns {
    fn of(m: &Matrix) -> Columns {
        let stats: Vec<&CellStats> = m.rows.iter().map(|r| &r.stats).collect();
        Columns {
            probe: m.recipe.mode == Mode::Probe,
            config_keys: varying_config_keys(&stats),
            errors: stats.iter().any(|s| s.error_count > 0),
            top_failure: stats.iter().any(|s| s.top_failure_detector_id.is_some()),
            top_warn: stats.iter().any(|s| s.top_warn_detector_id.is_some()),
            stop_after: m.recipe.stop_after.is_some(),
            iters: stats.iter().any(|s| s.iters_display != DASH),
            ratio: m.rows.iter().any(|r| r.confound.ratio.is_some()),
        }
    }

    fn header(&self) -> Vec<String> {
        let mut h: Vec<&str> = if self.probe {
            vec!["Mitigation", "Diagnostic", "Environment"]
        } else {
            vec!["Cell", "Mitigations", "Environment"]
        };
        if !self.config_keys.is_empty() {
            h.push("Config");
        }
        h.extend(["Failure rate", "Failures"]);
        let optional = [
            (self.errors, "Errors"),
            (self.top_failure, "Top failure"),
            (self.top_warn, "Top warn"),
            (self.stop_after, "Stop after"),
            (self.iters, "Iters"),
        ];
        h.extend(optional.iter().filter(|(on, _)| *on).map(|(_, name)| *name));
        h.extend(["Mean step (ms)", "Confound"]);
        if self.ratio {
            h.push("Ratio (95% CI)");
        }
        if self.probe {
            h.push("Directory");
        }
        h.into_iter().map(str::to_string).collect()
    }

    fn cells(&self, m: &Matrix, row: &Row) -> Vec<String> {
        let s = &row.stats;
        let errored = s.error.is_some();
        let mut c: Vec<String> = if self.probe {
            let axis = |i: usize| s.mitigations.get(i).cloned().unwrap_or_else(|| DASH.into());
            vec![axis(0), axis(1), s.environment.name.clone()]
        } else {
            let mits = if s.mitigations.is_empty() {
                "-".into()
            } else {
                s.mitigations.join(", ")
            };
            vec![s.name.clone(), mits, s.environment.name.clone()]
        };
        if !self.config_keys.is_empty() {
            c.push(config_cell(s, &self.config_keys));
        }
        let valid = s.valid_trials();
        c.push(if errored {
            "n/a".into()
        } else {
            format!("{}%", round_half_even(s.failure_rate() * 100.0))
        });
        c.push(match (errored, valid) {
            (true, _) => "n/a".into(),
            (false, 0) => "0 / 0 (no valid trials)".into(),
            (false, v) => format!("{} / {v}", s.failed_count),
        });
        if self.errors {
            c.push(if errored {
                "n/a".into()
            } else {
                format!(
                    "{} / {}{}",
                    s.error_count,
                    s.trials,
                    if s.unreliable() { " (unreliable)" } else { "" }
                )
            });
        }
        if self.top_failure {
            c.push(
                s.top_failure_detector_id
                    .clone()
                    .unwrap_or_else(|| DASH.into()),
            );
        }
        if self.top_warn {
            c.push(
                s.top_warn_detector_id
                    .clone()
                    .unwrap_or_else(|| DASH.into()),
            );
        }
        if self.stop_after {
            c.push(s.stop_after_note.clone().unwrap_or_else(|| DASH.into()));
        }
        if self.iters {
            c.push(s.iters_display.clone());
        }
        c.push(if errored || s.step.mean <= 0.0 {
            "n/a".into()
        } else {
            fmt_1(s.step.mean)
        });
        c.push(row.confound.tag.to_string());
        if self.ratio {
            c.push(match (row.confound.ratio, row.confound.ci95) {
                (Some(r), Some((lo, hi))) => format!("{r:.2} ({lo:.2}–{hi:.2})"),
                (Some(r), None) => format!("{r:.2} (no CI)"),
                _ => DASH.into(),
            });
        }
        if self.probe {
            c.push(m.cell_dir(&s.name));
        }
        c
    }
}

/// JSON with object keys sorted at every level: equal values compare equal as text.
fn canonical(v: &Value) -> String {
    aorta_recipe::sorted_json(v).to_string()
}

/// Keys (sorted) whose canonical value, or absence, is not the same in every cell.
fn varying_config_keys(stats: &[&CellStats]) -> Vec<String> {
    let mut keys: Vec<&String> = stats
        .iter()
        .flat_map(|s| s.workload_config.keys())
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| {
            let vals: Vec<Option<String>> = stats
                .iter()
                .map(|s| s.workload_config.get(*k).map(canonical))
                .collect();
            vals.windows(2).any(|w| w[0] != w[1])
        })
        .cloned()
        .collect()
}

fn config_cell(s: &CellStats, keys: &[String]) -> String {
    let pairs: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            s.workload_config.get(k).map(|v| {
                let shown = match v {
                    Value::String(t) => t.clone(),
                    other => canonical(other),
                };
                format!("{k}={shown}")
            })
        })
        .collect();
    if pairs.is_empty() {
        DASH.into()
    } else {
        pairs.join(", ")
    }
}

/// Keeps a value inside one table cell: `|`, `\\` and line breaks are escaped.
fn escape_cell(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace("\r\n", "\\n")
        .replace(['\n', '\r'], "\\n")
}

/// A space-padded Markdown table; widths count characters, not bytes.
fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(header);
    out.push('|');
    for w in &widths {
        out.push_str(&"-".repeat(w + 2));
        out.push('|');
    }
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
    }
    out
}
