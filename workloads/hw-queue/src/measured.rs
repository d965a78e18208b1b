//! What one process measured: a run (one connection setting) of points, each a label, a stream
//! count and its metrics. The result file (results.rs) holds runs; the analysis reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::Order;
use crate::metrics::Stats;

/// The driver's CUDA_DEVICE_MAX_CONNECTIONS when the variable is unset.
pub const DEFAULT_CONNECTIONS: u32 = 8;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// CUDA_DEVICE_MAX_CONNECTIONS as set for the process (None: unset, the driver's 8).
    pub connections: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub points: Vec<Point>,
}

impl Run {
    pub fn effective_connections(&self) -> u32 {
        self.connections.unwrap_or(DEFAULT_CONNECTIONS)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// What was measured: the launch order, a priority, a phase ("alone", "together"), ...
    pub label: String,
    pub streams: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Order>,
    pub metrics: Metrics,
}

/// Every field is optional: a workload fills what it measures. Units are in the names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Σ per-stream busy / span, from the timing source in `timing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<f64>,
    /// The same from per-stream events (timing = both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_events: Option<f64>,
    /// What concurrency would be without false dependencies (when the workload knows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_concurrency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_ms: Option<f64>,
    /// Mean busy time of each stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_ms: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_ms: Option<Stats>,
    /// Latency of the tiny kernel from its host-side launch to its completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiny_latency_us: Option<Stats>,
    /// Host time per launch call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_us: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_unit: Option<String>,
    /// Workload-specific numbers; the suffix gives the unit and the better direction
    /// (see compare.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
}
