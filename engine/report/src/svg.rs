//! The report's plots as hand-sized inline SVG (no script, no font download, no network):
//! failure rate per cell with its 95% Wilson interval, and step times per cell as box plots
//! with sampled points against the baseline.

use crate::verdict::Call;
use std::fmt::Write;

/// `s` safe inside HTML or SVG text and attribute values (both pages and plots use it).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const LABEL_W: f64 = 280.0;
const PLOT_W: f64 = 440.0;
const ROW_H: f64 = 22.0;
const TOP: f64 = 28.0;
/// Points drawn per cell at most (every k-th sample): a box plot over thousands of steps
/// stays small.
const MAX_POINTS: usize = 60;

/// 95% Wilson score interval of `k` failures in `n` trials (`None` for `n` = 0).
pub fn wilson(k: usize, n: usize) -> Option<(f64, f64)> {
    let count = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
    (n > 0).then(|| crate::evidence::Counts::new(count(k), count(n)).wilson(0.95))
}

/// A call's colour (Okabe–Ito): blue fixes, vermillion worse, orange speed-confounded,
/// dark grey the baseline, light grey undecided.
pub fn call_colour(call: Call) -> &'static str {
    match call {
        Call::Fixes => "#0072B2",
        Call::Worse => "#D55E00",
        Call::SpeedConfounded => "#E69F00",
        Call::Baseline => "#555",
        Call::Inconclusive | Call::NoDifferent | Call::NoEvidence => "#a9b4c2",
    }
}

/// One bar of the failure-rate plot.
pub struct RateBar<'a> {
    pub name: &'a str,
    pub rate: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub baseline: bool,
    /// The cell's call against the baseline (the baseline's own is `Baseline`).
    pub call: crate::verdict::Call,
}

fn header(out: &mut String, id: &str, title: &str, rows: usize) -> f64 {
    let h = TOP + rows as f64 * ROW_H + 24.0;
    let _ = write!(
        out,
        r#"<svg id="{id}" class="plot" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img"><title>{title}</title>"#,
        w = LABEL_W + PLOT_W + 20.0
    );
    h
}

/// Labels longer than this keep their start and end around an ellipsis (the full name is the
/// label's tooltip): cell names differ at either end.
const MAX_LABEL_CHARS: usize = 38;

fn label(out: &mut String, y: f64, name: &str, bold: bool) {
    let weight = if bold { " font-weight=\"bold\"" } else { "" };
    let chars: Vec<char> = name.chars().collect();
    let shown: String = if chars.len() > MAX_LABEL_CHARS {
        let half = (MAX_LABEL_CHARS - 1) / 2;
        let head: String = chars[..half].iter().collect();
        let tail: String = chars[chars.len() - half..].iter().collect();
        format!("{head}…{tail}")
    } else {
        name.to_string()
    };
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end" font-size="12"{weight}><title>{}</title>{}</text>"#,
        LABEL_W - 8.0,
        y + 15.0,
        esc(name),
        esc(&shown)
    );
}

fn axis(out: &mut String, bottom: f64, ticks: &[(f64, String)]) {
    let _ = write!(
        out,
        r##"<line x1="{LABEL_W}" y1="{TOP}" x2="{LABEL_W}" y2="{bottom}" stroke="#888"/>"##
    );
    for (x, text) in ticks {
        let _ = write!(
            out,
            r##"<line x1="{x}" y1="{TOP}" x2="{x}" y2="{bottom}" stroke="#eee"/><text x="{x}" y="{}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
            TOP - 8.0,
            esc(text)
        );
    }
}

/// Failure rate per cell (bar) with its interval (whisker), coloured by the cell's call
/// (Okabe–Ito colours, safe for colour-blind readers) and labelled with it in text; a fix's
/// bar is drawn even at 0%, so the answer is never the least visible row.
pub fn failure_rates(bars: &[RateBar]) -> String {
    let mut out = String::new();
    let h = header(
        &mut out,
        "plot-failure-rate",
        "Failure rate per cell, 95% Wilson interval",
        bars.len(),
    );
    let x = |v: f64| LABEL_W + v * PLOT_W;
    let ticks: Vec<(f64, String)> = (0..=4)
        .map(|i| (x(i as f64 / 4.0), format!("{}%", i * 25)))
        .collect();
    axis(&mut out, h - 20.0, &ticks);
    for (i, b) in bars.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        label(&mut out, y, b.name, b.baseline);
        let Some(rate) = b.rate else {
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" font-size="11" fill="#888">no judged trials</text>"##,
                LABEL_W + 6.0,
                y + 15.0
            );
            continue;
        };
        let fill = call_colour(b.call);
        let _ = write!(
            out,
            r#"<rect class="bar" x="{LABEL_W}" y="{}" width="{:.1}" height="{}" fill="{fill}"><title>{}: {:.0}% ({})</title></rect>"#,
            y + 4.0,
            (rate * PLOT_W).max(3.0),
            ROW_H - 8.0,
            esc(b.name),
            rate * 100.0,
            b.call.label()
        );
        if matches!(b.call, Call::Fixes | Call::Worse | Call::SpeedConfounded) {
            let mark = if b.call == Call::Fixes { "✓ " } else { "" };
            let _ = write!(
                out,
                r#"<text class="call" x="{:.1}" y="{}" font-size="12" font-weight="bold" fill="{fill}">{mark}{}</text>"#,
                x(b.ci.map_or(rate, |c| c.1)) + 8.0,
                y + 15.0,
                b.call.label()
            );
        }
        if let Some((lo, hi)) = b.ci {
            let cy = y + ROW_H / 2.0;
            let _ = write!(
                out,
                r##"<path class="ci" d="M{:.1} {cy}H{:.1}M{:.1} {}V{}M{:.1} {}V{}" stroke="#222" fill="none"/>"##,
                x(lo),
                x(hi),
                x(lo),
                cy - 5.0,
                cy + 5.0,
                x(hi),
                cy - 5.0,
                cy + 5.0
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// One row of the step-time plot: the cell's samples, sorted.
pub struct StepRow<'a> {
    pub name: &'a str,
    pub sorted: Vec<f64>,
    pub baseline: bool,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Step-time box plots (quartiles, median, min–max whiskers, sampled points); the dashed line
/// is the baseline's median.
pub fn step_times(rows: &[StepRow]) -> String {
    boxes(
        "plot-step-times",
        "Step time per cell (ms): box = quartiles, line = median, dashed = baseline median",
        rows,
        true,
    )
}

/// An axis of "nice" ticks (steps of 1, 2 or 5 times a power of ten, about five of them)
/// covering `lo..=hi`: the first and last tick, the step, and each tick's label.
pub fn nice_axis(lo: f64, hi: f64) -> (f64, f64, Vec<(f64, String)>) {
    let span = (hi - lo).max(hi.abs() * 1e-9).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() * step;
    let last = (hi / step).ceil() * step;
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let n = ((last - first) / step).round() as usize;
    let ticks = (0..=n)
        .map(|i| {
            let v = first + i as f64 * step;
            (v, format!("{v:.decimals$}"))
        })
        .collect();
    (first, last.max(first + step), ticks)
}

/// A tick label for values of any magnitude (tokens/s in the thousands, MFU below one).
pub fn tick(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.2}"),
        _ => format!("{v:.3}"),
    }
}

/// Box plots per cell against the baseline's median (dashed): the step-time plot, and one per
/// workload metric over the trials' values. `from_zero`: the axis starts at 0 (durations);
/// otherwise (throughputs) it spans the values, so the boxes are not squashed to one side.
pub fn boxes(id: &str, title: &str, rows: &[StepRow], from_zero: bool) -> String {
    let mut out = String::new();
    let h = header(&mut out, id, title, rows.len());
    let values = || rows.iter().flat_map(|r| r.sorted.iter().copied());
    let max = values().fold(f64::NEG_INFINITY, f64::max);
    let min = values().fold(f64::INFINITY, f64::min);
    let (max, min) = if max.is_finite() {
        (max, min)
    } else {
        (1.0, 0.0)
    };
    let lo = if from_zero || min <= 0.0 { 0.0 } else { min };
    let (first, last, ticks) = nice_axis(lo, max);
    let x = |v: f64| LABEL_W + (v - first) / (last - first) * PLOT_W;
    let ticks: Vec<(f64, String)> = ticks.into_iter().map(|(v, t)| (x(v), t)).collect();
    axis(&mut out, h - 20.0, &ticks);
    for (i, r) in rows.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        label(&mut out, y, r.name, r.baseline);
        if r.sorted.is_empty() {
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" font-size="11" fill="#888">no values</text>"##,
                LABEL_W + 6.0,
                y + 15.0
            );
            continue;
        }
        let s = &r.sorted;
        let (q1, med, q3) = (quantile(s, 0.25), quantile(s, 0.5), quantile(s, 0.75));
        let cy = y + ROW_H / 2.0;
        let fill = if r.baseline { "#ddd" } else { "#cfe0fb" };
        let _ = write!(
            out,
            r##"<g class="box"><path d="M{:.1} {cy}H{:.1}" stroke="#666"/><rect x="{:.1}" y="{}" width="{:.1}" height="{}" fill="{fill}" stroke="#333"/><path d="M{:.1} {}V{}" stroke="#000" stroke-width="2"/>"##,
            x(s[0]),
            x(s[s.len() - 1]),
            x(q1),
            y + 4.0,
            (x(q3) - x(q1)).max(1.0),
            ROW_H - 8.0,
            x(med),
            y + 3.0,
            y + ROW_H - 3.0
        );
        let step = s.len().div_ceil(MAX_POINTS).max(1);
        for (j, v) in s.iter().enumerate().step_by(step) {
            let jitter = ((j * 7919) % 9) as f64 - 4.0;
            let _ = write!(
                out,
                r##"<circle cx="{:.1}" cy="{:.1}" r="1.5" fill="#1f4e9c" fill-opacity="0.6"/>"##,
                x(*v),
                cy + jitter
            );
        }
        out.push_str("</g>");
    }
    if let Some(b) = rows.iter().find(|r| r.baseline && !r.sorted.is_empty()) {
        let bx = x(quantile(&b.sorted, 0.5));
        let _ = write!(
            out,
            r##"<line x1="{bx:.1}" y1="{TOP}" x2="{bx:.1}" y2="{}" stroke="#d9534f" stroke-dasharray="4 3"/>"##,
            h - 20.0
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_the_textbook_values() {
        // 0/10: [0, 0.2775]; 5/10: [0.2366, 0.7634]; 10/10: [0.7225, 1].
        let r =
            |k, n| wilson(k, n).map(|(a, b)| ((a * 1e4).round() / 1e4, (b * 1e4).round() / 1e4));
        assert_eq!(r(0, 10), Some((0.0, 0.2775)));
        assert_eq!(r(5, 10), Some((0.2366, 0.7634)));
        assert_eq!(r(10, 10), Some((0.7225, 1.0)));
        assert_eq!(wilson(0, 0), None);
    }

    #[test]
    fn axes_have_nice_ticks() {
        let labels = |lo, hi| {
            nice_axis(lo, hi)
                .2
                .into_iter()
                .map(|t| t.1)
                .collect::<Vec<_>>()
        };
        assert_eq!(labels(0.0, 12.874), ["0", "5", "10", "15"]);
        assert_eq!(
            labels(1908.0, 7633.0),
            ["0", "2000", "4000", "6000", "8000"]
        );
        // Throughputs far from zero are not squashed against it.
        assert_eq!(
            labels(5210.0, 5890.0),
            ["5200", "5400", "5600", "5800", "6000"]
        );
        assert_eq!(
            labels(0.0, 0.42),
            ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5"]
        );
    }

    #[test]
    fn quantiles_interpolate() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&s, 0.5), 2.5);
        assert_eq!(quantile(&s, 0.0), 1.0);
        assert_eq!(quantile(&[7.0], 0.75), 7.0);
    }
}
