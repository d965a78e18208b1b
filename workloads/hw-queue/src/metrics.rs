//! Metric math on timestamps: per-stream busy time, achieved concurrency (Σ busy / span),
//! overlap of two sets of intervals, percentiles. Pure functions, tested on synthetic data.

use serde::{Deserialize, Serialize};

/// Work of one stream from `start` to `end` (any unit; ns from stamps, ms from events).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub stream: usize,
    pub start: f64,
    pub end: f64,
}

/// Merge overlapping intervals; returns disjoint, sorted intervals.
pub fn merge(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.retain(|(s, e)| e > s);
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

pub fn union_length(v: Vec<(f64, f64)>) -> f64 {
    merge(v).iter().map(|(s, e)| e - s).sum()
}

/// Length of (∪a) ∩ (∪b).
pub fn intersection_length(a: Vec<(f64, f64)>, b: Vec<(f64, f64)>) -> f64 {
    let (a, b) = (merge(a), merge(b));
    let (mut i, mut j, mut total) = (0, 0, 0.0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

#[derive(Clone, Debug, PartialEq)]
pub struct Concurrency {
    /// Busy time of each stream 0..streams (union of its intervals).
    pub busy: Vec<f64>,
    /// From the first start to the last end, over all streams.
    pub span: f64,
    /// Σ busy / span: the average number of streams running at once.
    pub concurrency: f64,
    /// The most intervals running at one instant.
    pub peak: usize,
}

pub fn concurrency(intervals: &[Interval], streams: usize) -> Concurrency {
    let n = streams.max(intervals.iter().map(|i| i.stream + 1).max().unwrap_or(0));
    let mut per: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n];
    for i in intervals {
        per[i.stream].push((i.start, i.end));
    }
    let busy: Vec<f64> = per.into_iter().map(union_length).collect();
    let lo = intervals
        .iter()
        .map(|i| i.start)
        .fold(f64::INFINITY, f64::min);
    let hi = intervals
        .iter()
        .map(|i| i.end)
        .fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 0.0 };
    let total: f64 = busy.iter().sum();
    let concurrency = if span > 0.0 { total / span } else { 0.0 };
    Concurrency {
        busy,
        span,
        concurrency,
        peak: peak_overlap(intervals),
    }
}

pub fn peak_overlap(intervals: &[Interval]) -> usize {
    let mut edges: Vec<(f64, i32)> = intervals
        .iter()
        .filter(|i| i.end > i.start)
        .flat_map(|i| [(i.start, 1), (i.end, -1)])
        .collect();
    // Ends before starts at the same instant: touching intervals do not overlap.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    peak as usize
}

/// Summary statistics; percentiles interpolate linearly at (n−1)·p/100 (as AORTA and numpy do).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation (0 for n < 2).
    pub std: f64,
}

impl Stats {
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let std = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Stats {
            n,
            mean,
            p50: percentile_sorted(&v, 50.0),
            p95: percentile_sorted(&v, 95.0),
            p99: percentile_sorted(&v, 99.0),
            min: v[0],
            max: v[n - 1],
            std,
        })
    }
}

pub fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = (v.len() - 1) as f64 * p.clamp(0.0, 100.0) / 100.0;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

pub fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, 50.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(stream: usize, start: f64, end: f64) -> Interval {
        Interval { stream, start, end }
    }

    #[test]
    fn eight_overlapping_streams_give_eight() {
        let v: Vec<_> = (0..8).map(|s| iv(s, 0.0, 50.0)).collect();
        let c = concurrency(&v, 8);
        assert_eq!(c.concurrency, 8.0);
        assert_eq!(c.peak, 8);
        assert_eq!(c.span, 50.0);
    }

    #[test]
    fn serial_streams_give_one() {
        let v: Vec<_> = (0..4)
            .map(|s| iv(s, s as f64 * 10.0, s as f64 * 10.0 + 10.0))
            .collect();
        let c = concurrency(&v, 4);
        assert!((c.concurrency - 1.0).abs() < 1e-12);
        assert_eq!(c.peak, 1, "touching intervals do not overlap");
    }

    #[test]
    fn depth_first_pairs_on_one_queue() {
        // One queue, 3 streams × 2 dependent 10 ms kernels: k1 of stream i runs with k0 of i+1.
        let v = vec![
            iv(0, 0., 10.),
            iv(0, 10., 20.),
            iv(1, 10., 20.),
            iv(1, 20., 30.),
            iv(2, 20., 30.),
            iv(2, 30., 40.),
        ];
        let c = concurrency(&v, 3);
        assert_eq!(c.busy, vec![20.0, 20.0, 20.0]);
        assert!((c.concurrency - 1.5).abs() < 1e-12);
        assert_eq!(c.peak, 2);
    }

    #[test]
    fn busy_is_a_union_and_idle_streams_count_zero() {
        let v = vec![iv(0, 0., 10.), iv(0, 5., 15.), iv(0, 20., 30.)];
        let c = concurrency(&v, 3);
        assert_eq!(c.busy, vec![25.0, 0.0, 0.0]);
        assert_eq!(c.span, 30.0);
        assert_eq!(concurrency(&[], 2).concurrency, 0.0);
    }

    #[test]
    fn intersection() {
        let a = vec![(0., 10.), (20., 30.)];
        let b = vec![(5., 25.)];
        assert_eq!(intersection_length(a, b), 10.0);
        assert_eq!(intersection_length(vec![(0., 1.)], vec![(2., 3.)]), 0.0);
    }

    #[test]
    fn percentiles_match_numpy_linear() {
        let s = Stats::from_samples(&[4.0, 1.0, 3.0, 2.0, 100.0]).unwrap();
        assert_eq!(s.p50, 3.0);
        assert!((s.p95 - 80.8).abs() < 1e-9); // numpy.percentile([1,2,3,4,100], 95)
        assert!((s.p99 - 96.16).abs() < 1e-9);
        assert_eq!((s.min, s.max, s.n), (1.0, 100.0, 5));
        assert!((s.std - 43.617_656_975).abs() < 1e-6);
        assert_eq!(Stats::from_samples(&[7.0]).unwrap().std, 0.0);
        assert!(Stats::from_samples(&[f64::NAN]).is_none());
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
