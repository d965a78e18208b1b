//! Reading a sweep: where achieved concurrency saturates for each connection count, and where
//! false dependencies start for each stream count. Also a model of the hardware queues (stream i
//! on queue i mod C, a queue stalls while its head waits for its stream predecessor) to set the
//! measurements against.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::config::Order;
use crate::measured::Run;

/// Marginal concurrency per added stream below which a curve counts as flat.
pub const PLATEAU_GAIN: f64 = 0.25;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// A point has a false dependency when concurrency < (1 − tolerance) · ideal.
    pub tolerance: f64,
    pub groups: Vec<GroupAnalysis>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupAnalysis {
    /// The points' label (the launch order for spin_streams).
    pub label: String,
    pub saturation: Vec<Saturation>,
    pub false_dependencies: Vec<FalseDeps>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    pub connections: u32,
    pub max_concurrency: f64,
    pub at_streams: u32,
    /// Largest stream count up to which concurrency keeps within tolerance of ideal.
    pub linear_until: Option<u32>,
    /// First stream count after which adding streams adds < PLATEAU_GAIN concurrency each.
    pub plateau_from: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnPoint {
    pub connections: u32,
    pub concurrency: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_p50_us: Option<f64>,
    pub false_dependency: bool,
    pub probe_blocked: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FalseDeps {
    pub streams: u32,
    pub ideal: f64,
    pub by_connections: Vec<ConnPoint>,
    /// The largest connection count with a false dependency: they start there and below.
    pub starts_at: Option<u32>,
    pub summary: String,
}

/// Concurrency of `n` streams × `k` dependent kernels of equal length on `c` queues, with
/// unlimited SMs (one-block kernels): queues are independent, a queue's entry starts at
/// max(previous entry's start in that queue, its stream predecessor's end).
pub fn model_concurrency(n: u32, k: u32, c: u32, order: Order) -> f64 {
    let (end, _) = model_schedule(n, k, c, order);
    if end > 0.0 {
        (n * k) as f64 / end
    } else {
        0.0
    }
}

/// (makespan, start of one more kernel launched last on stream n), in kernel lengths.
pub fn model_schedule(n: u32, k: u32, c: u32, order: Order) -> (f64, f64) {
    let c = c.max(1);
    let mut launches: Vec<(u32, u32)> = Vec::new();
    match order {
        Order::Breadth => (0..k).for_each(|j| (0..n).for_each(|s| launches.push((s, j)))),
        Order::Depth => (0..n).for_each(|s| (0..k).for_each(|j| launches.push((s, j)))),
    }
    let mut queue_time = vec![0.0f64; c as usize];
    let mut stream_end = vec![0.0f64; n as usize + 1];
    let mut makespan: f64 = 0.0;
    for (s, _) in launches {
        let q = (s % c) as usize;
        let start = queue_time[q].max(stream_end[s as usize]);
        queue_time[q] = start;
        stream_end[s as usize] = start + 1.0;
        makespan = makespan.max(start + 1.0);
    }
    let probe_start = queue_time[(n % c) as usize];
    (makespan, probe_start)
}

/// `kernels_per_stream`: Some(k) for spin_streams (enables the model column).
pub fn analyze(runs: &[Run], kernels_per_stream: Option<u32>, tolerance: f64) -> Analysis {
    let mut labels = BTreeSet::new();
    // (label, streams) → connections → (concurrency, ideal, probe p50)
    type Cell = (f64, Option<f64>, Option<f64>);
    let mut table: BTreeMap<(String, u32), BTreeMap<u32, Cell>> = BTreeMap::new();
    for run in runs.iter().filter(|r| r.error.is_none()) {
        let c = run.effective_connections();
        for p in &run.points {
            let Some(conc) = p.metrics.concurrency else {
                continue;
            };
            labels.insert(p.label.clone());
            let probe = p.metrics.tiny_latency_us.as_ref().map(|s| s.p50);
            table
                .entry((p.label.clone(), p.streams))
                .or_default()
                .insert(c, (conc, p.metrics.ideal_concurrency, probe));
        }
    }
    let groups = labels
        .into_iter()
        .map(|label| {
            let order = label.parse::<Order>().ok();
            let rows: Vec<(u32, &BTreeMap<u32, Cell>)> = table
                .iter()
                .filter(|((l, _), _)| *l == label)
                .map(|((_, n), m)| (*n, m))
                .collect();
            let baseline_probe = rows
                .iter()
                .flat_map(|(_, m)| m.values().filter_map(|c| c.2))
                .fold(f64::INFINITY, f64::min);
            let false_dependencies = rows
                .iter()
                .map(|(n, m)| {
                    let best = m.values().map(|c| c.0).fold(0.0, f64::max);
                    let ideal = m.values().find_map(|c| c.1).unwrap_or(best);
                    let by_connections: Vec<ConnPoint> = m
                        .iter()
                        .map(|(&c, &(conc, _, probe))| ConnPoint {
                            connections: c,
                            concurrency: conc,
                            model: match (order, kernels_per_stream) {
                                (Some(o), Some(k)) => Some(model_concurrency(*n, k, c, o)),
                                _ => None,
                            },
                            probe_p50_us: probe,
                            false_dependency: conc < (1.0 - tolerance) * ideal,
                            probe_blocked: probe
                                .is_some_and(|p| p > 100.0 && p > 20.0 * baseline_probe),
                        })
                        .collect();
                    let starts_at = by_connections
                        .iter()
                        .filter(|p| p.false_dependency)
                        .map(|p| p.connections)
                        .max();
                    let max_c = by_connections
                        .iter()
                        .map(|p| p.connections)
                        .max()
                        .unwrap_or(0);
                    let summary = match starts_at {
                        None => format!("none at {} connections", conn_range(&by_connections)),
                        Some(c) if c == max_c => format!(
                            "at every tested count up to {c} (concurrency {:.1} of {ideal:.1})",
                            by_connections.last().map_or(0.0, |p| p.concurrency)
                        ),
                        Some(c) => {
                            let at = by_connections
                                .iter()
                                .find(|p| p.connections == c)
                                .map_or(0.0, |p| p.concurrency);
                            format!("from {c} connections down (concurrency {at:.1} of {ideal:.1})")
                        }
                    };
                    FalseDeps {
                        streams: *n,
                        ideal,
                        by_connections,
                        starts_at,
                        summary,
                    }
                })
                .collect();
            let conns: BTreeSet<u32> = rows.iter().flat_map(|(_, m)| m.keys().copied()).collect();
            let saturation = conns
                .into_iter()
                .map(|c| {
                    let curve: Vec<(u32, f64, f64)> = rows
                        .iter()
                        .filter_map(|(n, m)| {
                            m.get(&c)
                                .map(|cell| (*n, cell.0, cell.1.unwrap_or(*n as f64)))
                        })
                        .collect();
                    saturation(c, &curve, tolerance)
                })
                .collect();
            GroupAnalysis {
                label,
                saturation,
                false_dependencies,
            }
        })
        .collect();
    Analysis { tolerance, groups }
}

fn conn_range(points: &[ConnPoint]) -> String {
    match (points.first(), points.last()) {
        (Some(a), Some(b)) if a.connections != b.connections => {
            format!("{}..{}", a.connections, b.connections)
        }
        (Some(a), _) => a.connections.to_string(),
        _ => "no".into(),
    }
}

/// `curve`: (streams, concurrency, ideal) sorted by streams.
pub fn saturation(connections: u32, curve: &[(u32, f64, f64)], tolerance: f64) -> Saturation {
    let (mut max_c, mut at) = (0.0, 0);
    for &(n, c, _) in curve {
        if c > max_c {
            (max_c, at) = (c, n);
        }
    }
    let linear_until = curve
        .iter()
        .take_while(|(_, c, ideal)| *c >= (1.0 - tolerance) * ideal)
        .map(|p| p.0)
        .last();
    let plateau_from = curve
        .windows(2)
        .find(|w| (w[1].1 - w[0].1) / ((w[1].0 - w[0].0) as f64) < PLATEAU_GAIN)
        .map(|w| w[0].0);
    Saturation {
        connections,
        max_concurrency: max_c,
        at_streams: at,
        linear_until,
        plateau_from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_reproduces_the_issue_numbers() {
        // Depth-first, 2 dependent kernels, 32 streams: issue's H200 figures 1.9 3.8 7.1 12.7 21.0 30.8.
        let got: Vec<f64> = [1, 2, 4, 8, 16, 32]
            .iter()
            .map(|&c| model_concurrency(32, 2, c, Order::Depth))
            .collect();
        let want = [1.94, 3.76, 7.11, 12.8, 21.33, 32.0];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 0.01, "{got:?}");
        }
        assert!((model_concurrency(16, 2, 8, Order::Depth) - 10.67).abs() < 0.01);
        // One kernel per stream, or breadth-first: no blocked head, full concurrency.
        for c in [1, 8, 32] {
            assert_eq!(model_concurrency(64, 1, c, Order::Depth), 64.0);
            assert_eq!(model_concurrency(32, 2, c, Order::Breadth), 32.0);
        }
        // A probe on stream n waits for its queue: free when n < c, blocked when shared.
        assert_eq!(model_schedule(8, 2, 16, Order::Depth).1, 0.0);
        assert!(model_schedule(32, 2, 8, Order::Depth).1 >= 3.0);
    }

    #[test]
    fn saturation_of_a_curve() {
        let curve = [
            (1, 1.0, 1.0),
            (2, 2.0, 2.0),
            (4, 3.9, 4.0),
            (8, 7.9, 8.0),
            (16, 10.6, 16.0),
            (32, 12.7, 32.0),
        ];
        let s = saturation(8, &curve, 0.1);
        assert_eq!(s.linear_until, Some(8));
        assert_eq!(s.plateau_from, Some(16));
        assert_eq!((s.max_concurrency, s.at_streams), (12.7, 32));
    }
}
