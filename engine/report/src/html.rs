//! report.html: one self-contained page per run (inline CSS, SVG and a few lines of script to
//! sort the table; nothing fetched), readable from a bundle on an air-gapped machine. Like
//! matrix.md it is a function of the recipe, the trial records, the run's warnings, the
//! doctor's verdict on the node and the [`HtmlContext`], so it is an artifact keyed by its
//! inputs.

use crate::aggregate::WorkloadMetric;
use crate::matrix::{Matrix, Row};
use crate::stats::pct;
use crate::svg::{self, esc, RateBar, StepRow};
use crate::verdict::Call;
use std::fmt::Write;

/// What the page shows beyond the matrix: facts the engine knows.
#[derive(Debug, Clone, Default)]
pub struct HtmlContext<'a> {
    /// The environment snapshot's summary (`aorta env probe --summary`).
    pub environment: Option<&'a str>,
    /// Commands that reproduce the run.
    pub reproduce: &'a [String],
    /// Each cell's trials, in cell order.
    pub trial_keys: &'a [Vec<TrialRow>],
    /// Per cell (in cell order, or empty), the first matching line of each detector that
    /// fired in its first failing trial's logs.
    pub detector_lines: &'a [Vec<DetectorLine>],
    /// Where cells or environments differ, `aorta env diff` between them.
    pub env_diffs: &'a [EnvDiff],
    /// The command the trials ran (probe recipes): the page's title names it.
    pub command: Option<&'a [String]>,
    /// An `aorta agent` run: its search, shown after the answer (which is the agent's).
    pub agent: Option<&'a AgentPage>,
}

/// What `aorta agent` adds to its run's report.html. Its verdict is the page's answer (set as
/// the matrix's before rendering), so the calls and colours are the agent's sequential test's,
/// not the last look's.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AgentPage {
    /// The outcome as agent_report.md names it (`converged`, `exhausted_candidates`, …).
    pub outcome: String,
    /// Trials the search used, over every look.
    pub trials_used: u64,
    /// The search's iterations (proposer steps).
    pub iterations: u32,
    /// The candidates in the order they were tried.
    pub candidates: Vec<AgentCandidate>,
}

/// One candidate of an agent search and how its test ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AgentCandidate {
    pub mitigation: String,
    pub failed: u32,
    pub trials: u32,
    pub p_value: f64,
    /// Why its test stopped: decided a fix, a speed confound, not a fix, or undecided at the cap.
    pub stopped: String,
}

/// One trial in "How to reproduce": its key and what its inputs are.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRow {
    pub index: u32,
    pub key: String,
    /// How many inputs were traced (`23 traced`), or why none were (`untraced: …`); empty
    /// for a workload trial.
    pub inputs: String,
    /// The Xid its kernel log named (the classifier's Tier 3): the cells section links it to
    /// the doctor's verdict on that GPU.
    pub xid: Option<TrialXid>,
}

/// An Xid a trial's kernel log named: its number and PCI address (`capture.xid`, `xid_pci`).
#[derive(Debug, Clone, PartialEq)]
pub struct TrialXid {
    pub xid: String,
    pub pci: Option<String>,
}

impl TrialRow {
    /// The row of a trial's record (its own key and traced inputs).
    pub fn of(r: &aorta_trial::TrialRecord) -> TrialRow {
        TrialRow {
            index: r.trial_index,
            key: r.key.clone(),
            inputs: match &r.inputs {
                Some(i) if i.traced => format!("{} traced", i.count),
                Some(i) => format!("untraced: {}", i.reason.as_deref().unwrap_or("no reason")),
                None => String::new(),
            },
            xid: r.capture.group("xid").map(|xid| TrialXid {
                xid: xid.to_owned(),
                pci: r.capture.group("xid_pci").map(str::to_owned),
            }),
        }
    }
}

/// One `aorta env diff`, rendered by the probe's differ (`Diff::render`).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvDiff {
    /// What is compared, e.g. `baseline none-none → cell tf32_off-none`.
    pub between: String,
    pub differences: usize,
    pub key_relevant: usize,
    /// The differ's aligned text.
    pub text: String,
}

/// A detector's first matching line in a trial log.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectorLine {
    pub detector: String,
    /// The log, relative to the run directory.
    pub log: String,
    pub line: u64,
    pub text: String,
}

const STYLE: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}\
h1{font-size:22px}h3{font-size:14px;margin:14px 0 0}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:13px}.scroll{overflow-x:auto}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}\
th{background:#f4f4f4;cursor:pointer;user-select:none}.sortable td+td{white-space:nowrap}.kernels td+td{white-space:normal;overflow-wrap:anywhere;min-width:6em}tr.baseline td{font-weight:bold}\
tr.call-fixes td{background:#dcebf6}tr.call-worse td{background:#f8e1d4}tr.call-speed_confounded td{background:#fbeed3}\
.answer{border:2px solid #0072B2;border-radius:6px;padding:8px 14px;margin:12px 0;font-size:15px}.answer.none{border-color:#999}\
.answer p{margin:4px 0}pre{white-space:pre-wrap;word-break:break-word}pre{background:#f7f7f7;padding:10px;overflow:auto;font-size:12px}\
.meta td:first-child{font-weight:bold}.warn{background:#fff4d6;border:1px solid #e6c200;padding:6px 10px}\
details{margin:4px 0}summary{cursor:pointer}.plot{display:block;margin:8px 0}\
.doctor.fail{background:#fde2e2;border:2px solid #c00;padding:6px 12px}.doctor.warn{background:#fff4d6;border:1px solid #e6c200;padding:6px 12px}";

const SORT_JS: &str = "document.querySelectorAll('table.sortable th').forEach(function(th){\
th.addEventListener('click',function(){var i=th.cellIndex;var tb=th.closest('table').tBodies[0];\
var rows=Array.prototype.slice.call(tb.rows);var asc=th.getAttribute('data-dir')!=='asc';\
th.setAttribute('data-dir',asc?'asc':'desc');rows.sort(function(a,b){\
var x=a.cells[i].getAttribute('data-v')||a.cells[i].textContent,y=b.cells[i].getAttribute('data-v')||b.cells[i].textContent;\
var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);\
return asc?c:-c;});rows.forEach(function(r){tb.appendChild(r);});});});";

/// `(failed, judged)`: errored trials are left out of the rate, as in matrix.md (AORTA §3.5).
fn judged(row: &Row) -> (usize, usize) {
    let s = &row.stats;
    (s.failed_count, s.trials - s.error_count)
}

/// `aorta env diff` wherever cells or environments differ, one collapsible block each.
fn env_diffs(out: &mut String, diffs: &[EnvDiff]) {
    if diffs.is_empty() {
        return;
    }
    out.push_str("<h3 id=\"env-diff\">Where cells and environments differ (<code>aorta env diff</code>: ~ changed, + only in B, - only in A, [key] feeds the environment key)</h3>");
    for d in diffs {
        let _ = write!(
            out,
            "<details class=\"env-diff\"><summary>{}: {} difference(s), {} key-relevant</summary><pre>{}</pre></details>",
            esc(&d.between),
            d.differences,
            d.key_relevant,
            esc(&d.text)
        );
    }
}

/// The values of `metric` the row's trials report, if any did.
fn samples(row: &Row, metric: WorkloadMetric) -> Option<&[f64]> {
    row.stats
        .workload_metrics
        .iter()
        .find(|s| s.metric == metric)
        .map(|s| s.values.as_slice())
}

/// The agent's search: its outcome, and each candidate in the order tried with how its
/// sequential test ended.
fn agent_search(out: &mut String, a: &AgentPage) {
    let _ = write!(
        out,
        "<h2>Agent search</h2><p>Outcome: <b>{}</b>; {} trial(s) over {} iteration(s). Candidates in the order tried, each tested against the baseline until decided or its trial cap:</p>",
        esc(&a.outcome),
        a.trials_used,
        a.iterations
    );
    out.push_str("<table id=\"agent\"><thead><tr><th>#</th><th>Candidate</th><th>Failed / trials</th><th>p-value</th><th>Stopped because</th></tr></thead><tbody>");
    for (i, c) in a.candidates.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} / {}</td><td>{:.2e}</td><td>{}</td></tr>",
            i + 1,
            esc(&c.mitigation),
            c.failed,
            c.trials,
            c.p_value,
            esc(&c.stopped)
        );
    }
    out.push_str("</tbody></table>");
}

impl Matrix<'_> {
    /// The whole report.html.
    pub fn to_html(&self, cx: &HtmlContext) -> String {
        let r = self.recipe;
        let ticket = r.ticket.as_deref().unwrap_or("(no ticket)");
        let mut out = String::with_capacity(16_384 + self.rows.len() * 2048);
        let _ = write!(
            out,
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>aorta report: {}</title><style>{STYLE}</style></head><body>",
            esc(ticket)
        );
        // A probe recipe's workload is the command it wraps, not the internal `_subprocess`.
        let what = match cx.command.filter(|c| !c.is_empty()) {
            Some(argv) if r.mode == aorta_recipe::Mode::Probe => {
                let line = argv.join(" ");
                match line.char_indices().nth(80) {
                    Some((i, _)) => format!("{}…", &line[..i]),
                    None => line,
                }
            }
            _ if r.mode == aorta_recipe::Mode::Probe => "command".to_string(),
            _ => r.workload.clone(),
        };
        let _ = write!(out, "<h1>{} — {}</h1>", esc(ticket), esc(&what));
        let recipe = match (&r.source, cx.agent) {
            (_, Some(_)) => "aorta agent (each look a generated recipe)".into(),
            (Some(s), None) => s.path.display().to_string(),
            (None, None) => "(flag mode)".into(),
        };
        let trials = match cx.agent {
            Some(a) => (
                "Trials used",
                format!("{} over {} iteration(s)", a.trials_used, a.iterations),
            ),
            None => match self.recipe.auto {
                Some(a) => (
                    "Trials per cell",
                    format!("auto (until decided, up to {})", a.max_trials_per_cell),
                ),
                None => ("Trials per cell", self.trials_per_cell().to_string()),
            },
        };
        out.push_str("<table class=\"meta\">");
        for (k, v) in [
            ("Recipe", recipe),
            ("Mode", format!("{:?}", r.mode).to_lowercase()),
            trials,
            ("Baseline cell", self.baseline.name.clone()),
            ("Rendered", self.run_timestamp.clone()),
        ] {
            let _ = write!(out, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
        }
        out.push_str("</table>");
        for w in &self.warnings {
            let _ = write!(out, "<p class=\"warn\">{}</p>", esc(w));
        }
        // A sick node qualifies the answer itself, so it is said before it.
        if let Some(b) = self.doctor.as_ref().and_then(crate::doctor::banner) {
            let _ = write!(
                out,
                "<p id=\"doctor-banner\" class=\"doctor fail\"><b>{}</b> Node health, below the cells, lists the checks.</p>",
                esc(&b)
            );
        }
        self.answer_box(&mut out);
        if let Some(a) = cx.agent {
            agent_search(&mut out, a);
        }
        self.matrix_table(&mut out, cx.agent.is_some());
        out.push_str("<h2>Plots</h2>");
        let bars: Vec<RateBar> = self
            .rows
            .iter()
            .map(|row| {
                let (k, n) = judged(row);
                RateBar {
                    name: &row.stats.name,
                    rate: (n > 0).then(|| k as f64 / n as f64),
                    ci: svg::wilson(k, n),
                    baseline: row.stats.name == self.baseline.name,
                    call: self.call(row),
                }
            })
            .collect();
        out.push_str("<h3>Failure rate per cell, with its 95% interval</h3>");
        out.push_str(&svg::failure_rates(&bars));
        out.push_str("<h3>Step time per cell (ms): box = quartiles, bar = median, whiskers = min–max, dashed = baseline median</h3>");
        let steps: Vec<StepRow> = self
            .rows
            .iter()
            .map(|row| {
                let mut sorted = row.stats.step_times_ms.clone();
                sorted.retain(|v| v.is_finite());
                sorted.sort_by(f64::total_cmp);
                StepRow {
                    name: &row.stats.name,
                    sorted,
                    baseline: row.stats.name == self.baseline.name,
                }
            })
            .collect();
        out.push_str(&svg::step_times(&steps));
        self.metrics_section(&mut out);
        self.kernels_html(&mut out);
        self.cells_section(&mut out, cx.detector_lines, cx.trial_keys);
        self.doctor_section(&mut out);
        if let Some(env) = cx.environment {
            let _ = write!(out, "<h2>Environment</h2><pre>{}</pre>", esc(env));
        }
        env_diffs(&mut out, cx.env_diffs);
        self.reproduce_section(&mut out, cx);
        let _ = write!(
            out,
            "<h2>Recipe (resolved)</h2><pre>{}</pre>",
            esc(&crate::resolved_recipe_yaml(r))
        );
        let _ = writeln!(out, "<script>{SORT_JS}</script></body></html>");
        out
    }

    /// The cell's call against the baseline, from the matrix's answer.
    fn call(&self, row: &Row) -> Call {
        if row.stats.name == self.baseline.name {
            return Call::Baseline;
        }
        self.answer
            .call_of(&row.stats.name)
            .map_or(Call::NoEvidence, |c| c.call)
    }

    /// The call as the matrix shows it: with the outcome (pass, fail, flaky) and, under
    /// `trials: auto`, where and why the cell stopped.
    fn call_text(&self, row: &Row, call: Call) -> String {
        let cc = match call {
            Call::Baseline => self.answer.baseline.as_ref(),
            _ => self.answer.call_of(&row.stats.name),
        };
        let Some(cc) = cc else {
            return call.label().to_string();
        };
        let mut text = format!("{} · {}", call.label(), cc.stability.label());
        if let Some(a) = cc.auto {
            let _ = write!(text, " ({} after {})", a.stop.describe(), a.trials);
        }
        esc(&text)
    }

    /// The run's answer, first: the headline and the next step.
    fn answer_box(&self, out: &mut String) {
        let found = self.answer.cells.iter().any(|c| c.call == Call::Fixes);
        let _ = write!(
            out,
            "<div id=\"answer\" class=\"answer{}\"><p><b>{}</b></p><p>Next: {}</p></div>",
            if found { "" } else { " none" },
            esc(&self.answer.headline),
            esc(&self.answer.next_step)
        );
    }

    fn matrix_table(&self, out: &mut String, agent: bool) {
        let calls = if agent {
            "the agent's sequential test of each candidate against the baseline (one-sided Fisher's exact test at each look, the error rate spent over looks and candidates)"
        } else if self.answer.sequential {
            "trials: auto, each cell against the baseline at 4, 8, 16, … trials until decided (Fisher's exact test, the error rate spent over looks and cells); the call says where and why each cell stopped"
        } else {
            "each cell against the baseline at 95% confidence across all cells (Fisher's exact test, Holm's correction)"
        };
        let _ = write!(out, "<h2>Matrix</h2><p>Failure rates exclude errored trials; the interval is the 95% Wilson score interval. Call: {calls}; a cell that fails less but runs slower is a speed confound, not a fix. Click a header to sort.</p>");
        // A wide matrix scrolls inside its box rather than running off the page.
        out.push_str("<div class=\"scroll\"><table id=\"matrix\" class=\"sortable\"><thead><tr><th>Cell</th><th>Call</th><th>Failure rate</th><th>95% interval</th><th>Failed / judged</th><th>Errored</th><th>Top detector</th><th>Confound</th><th>Step-time ratio [95%]</th><th>Mean step (ms)</th><th>p50 / p99 step (ms)</th></tr></thead><tbody>");
        for row in &self.rows {
            let s = &row.stats;
            let (k, n) = judged(row);
            let call = self.call(row);
            let class = match call {
                Call::Baseline => " class=\"baseline\"".to_string(),
                Call::Fixes | Call::Worse | Call::SpeedConfounded => {
                    format!(" class=\"call-{}\"", call.slug())
                }
                Call::Inconclusive | Call::NoDifferent | Call::NoEvidence => String::new(),
            };
            let (rate, rate_v) = match n {
                0 => ("—".to_string(), "-1".to_string()),
                _ => {
                    let v = k as f64 / n as f64;
                    (pct(v), format!("{v}"))
                }
            };
            let ci =
                svg::wilson(k, n).map_or("—".into(), |(a, b)| format!("{}–{}", pct(a), pct(b)));
            let ratio = match (row.confound.ratio, row.confound.ci95) {
                (Some(x), Some((a, b))) => format!("{x:.2} [{a:.2}, {b:.2}]"),
                (Some(x), None) => format!("{x:.2}"),
                _ => "—".into(),
            };
            let _ = write!(
                out,
                "<tr{class}><td>{}</td><td>{}</td><td data-v=\"{rate_v}\">{rate}</td><td>{ci}</td><td data-v=\"{k}\">{k} / {n}</td><td>{}</td><td>{}</td><td>{}</td><td data-v=\"{}\">{ratio}</td><td>{:.3}</td><td data-v=\"{}\">{:.3} / {:.3}</td></tr>",
                esc(&s.name),
                self.call_text(row, call),
                s.error_count,
                esc(s.top_failure_detector_id.as_deref().unwrap_or("—")),
                esc(&row.confound.tag.to_string()),
                row.confound.ratio.unwrap_or(-1.0),
                s.step.mean,
                s.step.p50,
                s.step.p50,
                s.step.p99
            );
        }
        out.push_str("</tbody></table></div>");
    }

    /// The kernel profilers' tables (`collect: [ncu]`): each cell's device time per trial, its
    /// top kernels and how they differ from the baseline's (`kernels::tables`, as matrix.md).
    fn kernels_html(&self, out: &mut String) {
        let tables = crate::kernels::tables(
            self.rows
                .iter()
                .map(|r| (r.stats.name.as_str(), r.stats.kernel_profiles.as_slice())),
            &self.baseline.name,
        );
        for t in tables {
            let _ = write!(out, "<h2>Kernel profiles: {}</h2><p>Device time per trial, mean over the trials profiled; against the baseline: kernels that appear, disappear, or change by 10% or more.</p>", esc(&t.tool));
            out.push_str("<div class=\"scroll\"><table class=\"sortable kernels\"><thead><tr><th>Cell</th><th>Trials profiled</th><th>Device time</th><th>Top kernels</th><th>Against the baseline</th></tr></thead><tbody>");
            for r in t.rows {
                let top: Vec<String> = r
                    .top
                    .iter()
                    .map(|(n, us, calls)| format!("{n} {} ×{calls}", crate::kernels::ms(*us)))
                    .collect();
                let _ = write!(
                    out,
                    "<tr{}><td>{}</td><td>{}</td><td data-v=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
                    if r.baseline { " class=\"baseline\"" } else { "" },
                    esc(&r.cell),
                    esc(&r.trials),
                    r.total_us,
                    esc(&crate::kernels::ms(r.total_us)),
                    esc(&top.join(", ")),
                    esc(&r.against_baseline.replace('`', ""))
                );
            }
            out.push_str("</tbody></table></div>");
        }
    }

    /// The workload metrics some trial reports (tokens/s, p50/p99 step, MFU, corrupt
    /// iterations): a sortable table of per-cell means, and a box plot per metric over the
    /// trials' values. Nothing when no trial reports one (probe runs, the example workload).
    fn metrics_section(&self, out: &mut String) {
        let present: Vec<WorkloadMetric> = WorkloadMetric::ALL
            .into_iter()
            .filter(|m| self.rows.iter().any(|r| samples(r, *m).is_some()))
            .collect();
        if present.is_empty() {
            return;
        }
        out.push_str("<h2>Workload metrics</h2><p>As each trial's workload reported them in <code>result.metrics</code>: the mean over the trials that report the metric, [min–max] and how many did. Click a header to sort.</p>");
        out.push_str("<table id=\"metrics\" class=\"sortable\"><thead><tr><th>Cell</th>");
        for m in &present {
            let _ = write!(out, "<th>{}</th>", esc(m.label()));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            let class = if row.stats.name == self.baseline.name {
                " class=\"baseline\""
            } else {
                ""
            };
            let _ = write!(out, "<tr{class}><td>{}</td>", esc(&row.stats.name));
            for m in &present {
                match samples(row, *m) {
                    Some(v) => {
                        let mean = v.iter().sum::<f64>() / v.len() as f64;
                        let (lo, hi) = v
                            .iter()
                            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                                (a.min(*x), b.max(*x))
                            });
                        let _ = write!(
                            out,
                            "<td data-v=\"{mean}\">{} [{}–{}] ({})</td>",
                            svg::tick(mean),
                            svg::tick(lo),
                            svg::tick(hi),
                            v.len()
                        );
                    }
                    None => out.push_str("<td data-v=\"-1\">—</td>"),
                }
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        for m in &present {
            let _ = write!(
                out,
                "<h3>{} per cell, one value per trial: box = quartiles, bar = median, dashed = baseline median</h3>",
                esc(m.label())
            );
            let rows: Vec<StepRow> = self
                .rows
                .iter()
                .map(|row| {
                    let mut sorted = samples(row, *m).map(<[f64]>::to_vec).unwrap_or_default();
                    sorted.sort_by(f64::total_cmp);
                    StepRow {
                        name: &row.stats.name,
                        sorted,
                        baseline: row.stats.name == self.baseline.name,
                    }
                })
                .collect();
            out.push_str(&svg::boxes(
                &format!("plot-metric-{}", m.key()),
                &format!("{} per cell", m.label()),
                &rows,
                false,
            ));
        }
    }

    /// `aorta doctor`'s verdict on the node, beside the environment: a line when it passed
    /// (or was not checked), each check that warned or failed (figure, threshold, remedy)
    /// otherwise, under the banner when it failed.
    fn doctor_section(&self, out: &mut String) {
        let Some(v) = &self.doctor else {
            out.push_str("<p id=\"doctor\" class=\"doctor none\">Node health: not checked (built without a <code>--doctor</code> preflight; <code>--doctor quick</code> or a recipe's <code>doctor: quick</code> checks the node before any trial).</p>");
            return;
        };
        let line = format!(
            "{} (<a href=\"doctor.json\">doctor.json</a>)",
            esc(&v.summary_line())
        );
        if v.flagged.is_empty() {
            let _ = write!(
                out,
                "<p id=\"doctor\" class=\"doctor pass\">Node health: {line}</p>"
            );
            return;
        }
        let class = if v.status == aorta_doctor::Status::Fail {
            "fail"
        } else {
            "warn"
        };
        let _ = write!(
            out,
            "<h2 id=\"doctor\">Node health</h2><div class=\"doctor {class}\">"
        );
        if let Some(b) = crate::doctor::banner(v) {
            let _ = write!(out, "<p><b>{}</b></p>", esc(&b));
        }
        let _ = write!(out, "<p>{line}</p><table><thead><tr><th>Verdict</th><th>Check</th><th>GPU</th><th>Measured</th><th>Expected</th><th>Remedy</th></tr></thead><tbody>");
        let cell = |s: &Option<String>| esc(s.as_deref().unwrap_or("—"));
        for c in &v.flagged {
            let _ = write!(
                out,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                c.status,
                esc(&c.id),
                c.gpu.as_deref().map_or_else(|| "node".into(), esc),
                cell(&c.measured),
                cell(&c.threshold),
                cell(&c.remedy)
            );
        }
        out.push_str("</tbody></table></div>");
    }

    fn cells_section(
        &self,
        out: &mut String,
        lines: &[Vec<DetectorLine>],
        trials: &[Vec<TrialRow>],
    ) {
        out.push_str("<h2>Cells</h2>");
        for (i, row) in self.rows.iter().enumerate() {
            let s = &row.stats;
            let _ = write!(
                out,
                "<details><summary><b>{}</b>: {} failed, {} passed, {} errored of {}</summary><ul>",
                esc(&s.name),
                s.failed_count,
                s.passed_count,
                s.error_count,
                s.trials
            );
            if let Some(e) = &s.error {
                let _ = write!(out, "<li>cell error: {}</li>", esc(e));
            }
            if let Some(d) = &s.top_failure_detector_id {
                let _ = write!(
                    out,
                    "<li>top failure detector: <code>{}</code></li>",
                    esc(d)
                );
            }
            if let Some(d) = &s.top_warn_detector_id {
                let _ = write!(
                    out,
                    "<li>top warning detector: <code>{}</code></li>",
                    esc(d)
                );
            }
            if let Some(found) = lines.get(i).filter(|l| !l.is_empty()) {
                out.push_str("<li>first matching lines:<pre>");
                for d in found {
                    let _ = writeln!(
                        out,
                        "<a href=\"{l}\">{l}</a>:{}: <b>{}</b>  {}",
                        d.line,
                        esc(&d.detector),
                        esc(&d.text),
                        l = esc(&d.log)
                    );
                }
                out.push_str("</pre></li>");
            }
            // A trial's Xid, with what the node's preflight said about that GPU.
            for t in trials.get(i).into_iter().flatten() {
                let Some(x) = &t.xid else {
                    continue;
                };
                let note = crate::doctor::xid_note(self.doctor.as_ref(), &x.xid, x.pci.as_deref());
                let _ = write!(
                    out,
                    "<li class=\"xid\">trial {}: Xid {}{}: {}</li>",
                    t.index,
                    esc(&x.xid),
                    x.pci
                        .as_deref()
                        .map(|p| format!(" ({})", esc(p)))
                        .unwrap_or_default(),
                    esc(&note)
                );
            }
            for (hint, n) in &s.failure_hints {
                let _ = write!(out, "<li>hint ({n} trials): {}</li>", esc(hint));
            }
            if !s.resolved_env_vars.is_empty() {
                let env: Vec<String> = s
                    .resolved_env_vars
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let _ = write!(out, "<li>env: <code>{}</code></li>", esc(&env.join(" ")));
            }
            out.push_str("<li>trials:");
            for p in &s.trial_paths {
                let dir = p.strip_suffix("result.json").unwrap_or(p);
                let name = dir.trim_end_matches('/').rsplit('/').next().unwrap_or(dir);
                let _ = write!(
                    out,
                    " {n} (<a href=\"{d}result.json\">result</a>, <a href=\"{d}stdout.log\">stdout</a>, <a href=\"{d}stderr.log\">stderr</a>)",
                    n = esc(name),
                    d = esc(dir)
                );
            }
            out.push_str("</li></ul></details>");
        }
    }

    fn reproduce_section(&self, out: &mut String, cx: &HtmlContext) {
        out.push_str("<h2>How to reproduce</h2>");
        if !cx.reproduce.is_empty() {
            let _ = write!(out, "<pre>{}</pre>", esc(&cx.reproduce.join("\n")));
        }
        if cx.trial_keys.iter().any(|k| !k.is_empty()) {
            out.push_str("<details><summary>Trial keys (<code>aorta explain</code> shows what each hashes)</summary><table><thead><tr><th>Cell</th><th>Trial</th><th>Key</th><th>Inputs</th></tr></thead><tbody>");
            for (row, trials) in self.rows.iter().zip(cx.trial_keys) {
                for t in trials {
                    let _ = write!(
                        out,
                        "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                        esc(&row.stats.name),
                        t.index,
                        esc(&t.key),
                        esc(&t.inputs)
                    );
                }
            }
            out.push_str("</tbody></table></details>");
        }
    }
}
