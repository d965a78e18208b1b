//! `compare A.json B.json`: pair points by (connections, label, streams), compare every metric
//! whose better direction is known, flag changes beyond the threshold. Unlike AORTA 0.2.1
//! (spec §12.6.2) the latency keys are read from where the results put them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::{Metrics, ResultFile};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// The better direction of a metric, from its name; None = informational, not compared.
pub fn direction(metric: &str) -> Option<Better> {
    use Better::*;
    let m = metric;
    const INFORMATIONAL: [&str; 4] = [
        "clock_sync",
        "long_remaining",
        "event_latency",
        "peak_running",
    ];
    if INFORMATIONAL.iter().any(|p| m.starts_with(p)) {
        return None;
    }
    if m.starts_with("concurrency") && !m.ends_with("_min") && !m.ends_with("_max")
        || m == "throughput"
    {
        return Some(Higher);
    }
    if [
        "_tflops",
        "_gbps",
        "_gflops",
        "_gflops_wall",
        "efficiency_vs_best",
        "speedup",
        "speedup_vs_serial",
        "copy_overlap",
    ]
    .iter()
    .any(|s| m.ends_with(s))
    {
        return Some(Higher);
    }
    if m.starts_with("iteration_ms.")
        || m.starts_with("tiny_latency_us.")
        || m.starts_with("launch_us.")
    {
        return (m.ends_with(".p50") || m.ends_with(".p99")).then_some(Lower);
    }
    if m == "span_ms"
        || m.ends_with("_slowdown")
        || m == "wait_over_remaining"
        || m.ends_with("_us")
        || m.ends_with("_us_p50")
        || m.ends_with("_us_p99")
        || m.ends_with("_us_per_kernel")
    {
        return Some(Lower);
    }
    None
}

/// Changes smaller than this (absolute, in the metric's unit) are noise, whatever the ratio.
fn noise_floor(metric: &str) -> f64 {
    if metric.contains("_us") {
        2.0
    } else if metric.contains("_ms") {
        0.01
    } else {
        0.0
    }
}

pub fn flatten(m: &Metrics) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            out.insert(k.to_string(), v);
        }
    };
    put("concurrency", m.concurrency);
    put("concurrency_events", m.concurrency_events);
    put("throughput", m.throughput);
    put("span_ms", m.span_ms);
    for (name, s) in [
        ("iteration_ms", &m.iteration_ms),
        ("tiny_latency_us", &m.tiny_latency_us),
        ("launch_us", &m.launch_us),
    ] {
        if let Some(s) = s {
            put(&format!("{name}.p50"), Some(s.p50));
            put(&format!("{name}.p99"), Some(s.p99));
        }
    }
    for (k, v) in &m.extra {
        put(k, Some(*v));
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Regression,
    Improvement,
    Unchanged,
}

#[derive(Clone, Debug, Serialize)]
pub struct Delta {
    pub point: String,
    pub metric: String,
    pub base: f64,
    pub test: f64,
    /// (test − base) / |base|.
    pub change: f64,
    pub verdict: Verdict,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub threshold: f64,
    pub deltas: Vec<Delta>,
    pub only_in_base: Vec<String>,
    pub only_in_test: Vec<String>,
    pub notes: Vec<String>,
}

impl Comparison {
    pub fn count(&self, v: Verdict) -> usize {
        self.deltas.iter().filter(|d| d.verdict == v).count()
    }
    pub fn has_regressions(&self) -> bool {
        self.count(Verdict::Regression) > 0
    }
}

fn points(f: &ResultFile) -> BTreeMap<String, &Metrics> {
    let mut m = BTreeMap::new();
    for run in f.runs.iter().filter(|r| r.error.is_none()) {
        for p in &run.points {
            let c = run
                .connections
                .map_or("default".to_string(), |c| c.to_string());
            m.insert(
                format!("connections={c} {} streams={}", p.label, p.streams),
                &p.metrics,
            );
        }
    }
    m
}

pub fn judge(metric: &str, base: f64, test: f64, threshold: f64) -> Option<(f64, Verdict)> {
    let better = direction(metric)?;
    if base == 0.0 {
        return None;
    }
    let change = (test - base) / base.abs();
    let worse = match better {
        Better::Higher => change < -threshold,
        Better::Lower => change > threshold,
    };
    let improved = match better {
        Better::Higher => change > threshold,
        Better::Lower => change < -threshold,
    };
    let verdict = if (test - base).abs() <= noise_floor(metric) {
        Verdict::Unchanged
    } else if worse {
        Verdict::Regression
    } else if improved {
        Verdict::Improvement
    } else {
        Verdict::Unchanged
    };
    Some((change, verdict))
}

pub fn compare(base: &ResultFile, test: &ResultFile, threshold: f64) -> Comparison {
    let (b, t) = (points(base), points(test));
    let mut notes = Vec::new();
    if base.workload != test.workload {
        notes.push(format!(
            "different workloads: {} vs {}",
            base.workload, test.workload
        ));
    }
    if let (Some(a), Some(c)) = (&base.device, &test.device) {
        if a.name != c.name {
            notes.push(format!("different devices: {} vs {}", a.name, c.name));
        }
    }
    let mut deltas = Vec::new();
    for (key, bm) in &b {
        let Some(tm) = t.get(key) else { continue };
        let (bf, tf) = (flatten(bm), flatten(tm));
        for (metric, &bv) in &bf {
            let Some(&tv) = tf.get(metric) else { continue };
            if let Some((change, verdict)) = judge(metric, bv, tv, threshold) {
                deltas.push(Delta {
                    point: key.clone(),
                    metric: metric.clone(),
                    base: bv,
                    test: tv,
                    change,
                    verdict,
                });
            }
        }
    }
    Comparison {
        threshold,
        deltas,
        only_in_base: b.keys().filter(|k| !t.contains_key(*k)).cloned().collect(),
        only_in_test: t.keys().filter(|k| !b.contains_key(*k)).cloned().collect(),
        notes,
    }
}

pub fn render(c: &Comparison) -> String {
    let mut s = String::new();
    for n in &c.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    for d in c.deltas.iter().filter(|d| d.verdict != Verdict::Unchanged) {
        let tag = if d.verdict == Verdict::Regression {
            "REGRESSION "
        } else {
            "improvement"
        };
        s.push_str(&format!(
            "{tag}  {:<40} {:<28} {:>12.4} -> {:>12.4}  ({:+.1}%)\n",
            d.point,
            d.metric,
            d.base,
            d.test,
            d.change * 100.0
        ));
    }
    for k in &c.only_in_base {
        s.push_str(&format!("missing in test: {k}\n"));
    }
    for k in &c.only_in_test {
        s.push_str(&format!("new in test:     {k}\n"));
    }
    s.push_str(&format!(
        "{} regressions, {} improvements, {} unchanged (threshold {:.0}%)\n",
        c.count(Verdict::Regression),
        c.count(Verdict::Improvement),
        c.count(Verdict::Unchanged),
        c.threshold * 100.0
    ));
    s
}
