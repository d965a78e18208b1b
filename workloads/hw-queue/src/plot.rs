//! SVG plots (plotters, SVG backend only): concurrency and tiny-kernel latency against streams,
//! one line per CUDA_DEVICE_MAX_CONNECTIONS; latency against connections for fixed-stream
//! workloads (the convoy).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::results::ResultFile;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// A line chart with log axes (both quantities span decades).
pub fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<(), String> {
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|p| p.0 > 0.0 && p.1 > 0.0)
        .collect();
    if all.is_empty() {
        return Err(format!("{title}: nothing to plot"));
    }
    let (x0, x1) = all.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
        (a.min(p.0), b.max(p.0))
    });
    let (y0, y1) = all.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
        (a.min(p.1), b.max(p.1))
    });
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (x0 * 0.9..x1 * 1.1)
                .log_scale()
                .with_key_points(key_points(x0, x1)),
            (y0 * 0.8..y1 * 1.25)
                .log_scale()
                .with_key_points(decades(y0 * 0.8, y1 * 1.25)),
        )
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .max_light_lines(0)
        .x_label_formatter(&|v| num(*v))
        .y_label_formatter(&|v| num(*v))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = color.stroke_width(2);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|p| p.0 > 0.0 && p.1 > 0.0)
            .collect();
        let anno = if s.dashed {
            chart.draw_series(DashedLineSeries::new(pts, 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(pts, style))
        };
        anno.map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// Powers of two across [lo, hi] (at most ~12, thinned by factors of 4 when the range is wide).
fn key_points(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (
        lo.max(1e-9).log2().floor() as i32,
        hi.max(1e-9).log2().ceil() as i32,
    );
    let step = ((b - a) as usize / 12 + 1).next_power_of_two() as i32;
    (a..=b)
        .filter(|e| (e - a) % step == 0)
        .map(|e| 2f64.powi(e))
        .collect()
}

/// 1-2-5 steps of each decade across [lo, hi].
fn decades(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (
        lo.max(1e-9).log10().floor() as i32,
        hi.max(1e-9).log10().ceil() as i32,
    );
    let wide = b - a > 3;
    (a..=b)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|v| *v >= lo && *v <= hi && (!wide || v.log10().fract() == 0.0))
        .collect()
}

fn num(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn conn_name(c: Option<u32>) -> String {
    c.map_or("connections unset (8)".into(), |c| {
        format!("{c} connections")
    })
}

/// Write every plot this result supports into `dir`; returns the files written.
pub fn plot_result(file: &ResultFile, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    let labels: BTreeSet<&str> = file
        .runs
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.label.as_str()))
        .collect();
    for label in &labels {
        let streams: BTreeSet<u32> = file
            .runs
            .iter()
            .flat_map(|r| {
                r.points
                    .iter()
                    .filter(|p| p.label == *label)
                    .map(|p| p.streams)
            })
            .collect();
        if streams.len() < 2 {
            continue;
        }
        let mut conc = Vec::new();
        let mut lat = Vec::new();
        let mut ideal: BTreeMap<u32, f64> = BTreeMap::new();
        for run in &file.runs {
            let pts: Vec<_> = run.points.iter().filter(|p| p.label == *label).collect();
            let c: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| p.metrics.concurrency.map(|c| (p.streams as f64, c)))
                .collect();
            let l: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| {
                    p.metrics
                        .tiny_latency_us
                        .as_ref()
                        .map(|s| (p.streams as f64, s.p50))
                })
                .collect();
            for p in &pts {
                if let Some(i) = p.metrics.ideal_concurrency {
                    ideal.insert(p.streams, i);
                }
            }
            if !c.is_empty() {
                conc.push(Series {
                    name: conn_name(run.connections),
                    points: c,
                    dashed: false,
                });
            }
            if !l.is_empty() {
                lat.push(Series {
                    name: conn_name(run.connections),
                    points: l,
                    dashed: false,
                });
            }
        }
        let what = format!("{} ({label})", file.workload);
        if !conc.is_empty() {
            if !ideal.is_empty() {
                conc.push(Series {
                    name: "ideal".into(),
                    points: ideal.iter().map(|(&n, &i)| (n as f64, i)).collect(),
                    dashed: true,
                });
            }
            let p = dir.join(format!("concurrency-{label}.svg"));
            line_chart(
                &p,
                &format!("achieved concurrency: {what}"),
                "streams",
                "Σ busy / span",
                &conc,
            )?;
            out.push(p);
        }
        if !lat.is_empty() {
            let p = dir.join(format!("tiny-latency-{label}.svg"));
            line_chart(
                &p,
                &format!("tiny kernel latency from host launch (p50): {what}"),
                "streams",
                "µs",
                &lat,
            )?;
            out.push(p);
        }
    }
    // Fixed stream counts across connection counts (priority_convoy, prefill_decode).
    if file.runs.len() > 1 && out.is_empty() {
        let mut series = Vec::new();
        for label in &labels {
            for (q, pick) in [("p50", 0), ("p99", 1)] {
                let pts: Vec<(f64, f64)> = file
                    .runs
                    .iter()
                    .filter_map(|r| {
                        let p = r.points.iter().find(|p| p.label == *label)?;
                        let s = p.metrics.tiny_latency_us.as_ref()?;
                        Some((
                            r.effective_connections() as f64,
                            if pick == 0 { s.p50 } else { s.p99 },
                        ))
                    })
                    .collect();
                if !pts.is_empty() {
                    series.push(Series {
                        name: format!("{label} {q}"),
                        points: pts,
                        dashed: pick == 1,
                    });
                }
            }
        }
        if !series.is_empty() {
            let p = dir.join("latency-vs-connections.svg");
            let title = format!("{}: latency from host launch", file.workload);
            line_chart(&p, &title, "CUDA_DEVICE_MAX_CONNECTIONS", "µs", &series)?;
            out.push(p);
        }
    }
    Ok(out)
}
