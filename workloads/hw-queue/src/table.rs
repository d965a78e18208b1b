//! Plain-text tables for runs and sweeps.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::analysis::Analysis;
use crate::results::{ResultFile, Run};

/// Columns padded to their widest cell; the first column left-aligned, the rest right-aligned.
pub fn grid(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                if i == 0 {
                    format!("{cell:<w$}", w = width[i])
                } else {
                    format!("{cell:>w$}", w = width[i])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn f(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

pub fn run_table(run: &Run) -> String {
    let mut rows = vec![[
        "point",
        "streams",
        "concurrency",
        "(events)",
        "span ms",
        "tiny p50 µs",
        "tiny p99 µs",
        "launch µs",
        "throughput",
    ]
    .map(String::from)
    .to_vec()];
    let mut extras = String::new();
    for p in &run.points {
        let m = &p.metrics;
        rows.push(vec![
            p.label.clone(),
            p.streams.to_string(),
            f(m.concurrency, 2),
            f(m.concurrency_events, 2),
            f(m.span_ms, 2),
            f(m.tiny_latency_us.as_ref().map(|s| s.p50), 1),
            f(m.tiny_latency_us.as_ref().map(|s| s.p99), 1),
            f(m.launch_us.as_ref().map(|s| s.p50), 3),
            m.throughput.map_or("-".into(), |t| {
                format!("{t:.4e} {}", m.throughput_unit.as_deref().unwrap_or(""))
            }),
        ]);
        if !m.extra.is_empty() {
            let kv: Vec<String> = m
                .extra
                .iter()
                .map(|(k, v)| format!("{k}={}", short(*v)))
                .collect();
            let _ = writeln!(
                extras,
                "  {} streams={}: {}",
                p.label,
                p.streams,
                kv.join(" ")
            );
        }
    }
    let mut s = grid(&rows);
    if !extras.is_empty() {
        s.push_str(&extras);
    }
    s
}

fn short(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-2) {
        format!("{v:.3e}")
    } else {
        format!("{v:.3}")
    }
}

/// The whole file: one table per run for `run`; matrices over connections for `sweep`.
pub fn render(file: &ResultFile) -> String {
    let mut s = String::new();
    if let Some(d) = &file.device {
        let _ = writeln!(
            s,
            "{} on {} (sm {}, {} SMs, driver {}, {})",
            file.workload,
            d.name,
            d.compute_capability,
            d.sm_count,
            d.driver_version,
            d.compiler_version
        );
    }
    if file.runs.len() == 1 && file.analysis.is_none() {
        let r = &file.runs[0];
        let _ = writeln!(
            s,
            "CUDA_DEVICE_MAX_CONNECTIONS={}",
            r.connections.map_or("unset (8)".into(), |c| c.to_string())
        );
        s.push_str(&run_table(r));
        return s;
    }
    for r in file.runs.iter().filter(|r| r.error.is_some()) {
        let _ = writeln!(
            s,
            "connections={:?}: FAILED: {}",
            r.connections,
            r.error.as_deref().unwrap_or("")
        );
    }
    let conns: Vec<u32> = file
        .runs
        .iter()
        .filter(|r| r.error.is_none())
        .map(Run::effective_connections)
        .collect();
    let labels: BTreeSet<&str> = file
        .runs
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.label.as_str()))
        .collect();
    let model = model_lookup(file.analysis.as_ref());
    for label in labels {
        for (title, pick) in [
            ("concurrency (model)", 0),
            ("tiny-kernel probe p50 µs", 1),
            ("p99 µs", 2),
            ("throughput", 3),
        ] {
            let mut cells: BTreeMap<u32, BTreeMap<u32, String>> = BTreeMap::new();
            for r in file.runs.iter().filter(|r| r.error.is_none()) {
                let c = r.effective_connections();
                for p in r.points.iter().filter(|p| p.label == label) {
                    let m = &p.metrics;
                    let cell = match pick {
                        0 => m.concurrency.map(|v| {
                            match model.get(&(label.to_string(), p.streams, c)) {
                                Some(md) => format!("{v:.2} ({md:.1})"),
                                None => format!("{v:.2}"),
                            }
                        }),
                        1 => m.tiny_latency_us.as_ref().map(|t| format!("{:.1}", t.p50)),
                        2 => m.tiny_latency_us.as_ref().map(|t| format!("{:.1}", t.p99)),
                        _ => m.throughput.map(short),
                    };
                    if let Some(cell) = cell {
                        cells.entry(p.streams).or_default().insert(c, cell);
                    }
                }
            }
            if cells.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "\n{label}: {title}; columns = CUDA_DEVICE_MAX_CONNECTIONS"
            );
            let mut rows = vec![std::iter::once("streams".to_string())
                .chain(conns.iter().map(|c| c.to_string()))
                .collect::<Vec<_>>()];
            for (n, row) in cells {
                rows.push(
                    std::iter::once(n.to_string())
                        .chain(
                            conns
                                .iter()
                                .map(|c| row.get(c).cloned().unwrap_or("-".into())),
                        )
                        .collect(),
                );
            }
            s.push_str(&grid(&rows));
        }
    }
    // Small runs (convoy, hetero) in full, extras included.
    for r in file
        .runs
        .iter()
        .filter(|r| r.error.is_none() && r.points.len() <= 12)
    {
        let _ = writeln!(
            s,
            "\nCUDA_DEVICE_MAX_CONNECTIONS={}",
            r.effective_connections()
        );
        s.push_str(&run_table(r));
    }
    if let Some(a) = &file.analysis {
        s.push_str(&analysis_text(a));
    }
    s
}

fn model_lookup(a: Option<&Analysis>) -> BTreeMap<(String, u32, u32), f64> {
    let mut m = BTreeMap::new();
    for g in a.iter().flat_map(|a| &a.groups) {
        for fd in &g.false_dependencies {
            for p in &fd.by_connections {
                if let Some(v) = p.model {
                    m.insert((g.label.clone(), fd.streams, p.connections), v);
                }
            }
        }
    }
    m
}

pub fn analysis_text(a: &Analysis) -> String {
    let mut s = String::new();
    for g in &a.groups {
        let _ = writeln!(
            s,
            "\n{}: where concurrency saturates (per connection count)",
            g.label
        );
        for sat in &g.saturation {
            let _ = writeln!(
                s,
                "  {:>2} connections: within {:.0}% of ideal up to {} streams; {}; max {:.1} at {} streams",
                sat.connections,
                a.tolerance * 100.0,
                sat.linear_until.map_or("no".into(), |n| n.to_string()),
                sat.plateau_from.map_or("no plateau within the sweep".into(), |n| format!("flat from {n} streams")),
                sat.max_concurrency,
                sat.at_streams
            );
        }
        let _ = writeln!(
            s,
            "{}: where false dependencies start (per stream count)",
            g.label
        );
        for fd in &g.false_dependencies {
            let blocked: Vec<String> = fd
                .by_connections
                .iter()
                .filter(|p| p.probe_blocked)
                .map(|p| p.connections.to_string())
                .collect();
            let probe = if blocked.is_empty() {
                String::new()
            } else {
                format!(
                    "; probe kernel blocked at {} connections",
                    blocked.join(",")
                )
            };
            let _ = writeln!(s, "  {:>3} streams: {}{probe}", fd.streams, fd.summary);
        }
    }
    s
}
