//! The result file (versioned schema): one `run` (a process, one connection setting) or a
//! `sweep` (one run per CUDA_DEVICE_MAX_CONNECTIONS value, each from a fresh child process).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::analysis::Analysis;
use crate::backend::DeviceInfo;
use crate::config::{Config, Order};
use crate::metrics::Stats;

pub const SCHEMA: &str = "aorta-hw-queue/result";
/// Bump on any incompatible change; readers refuse other major versions.
pub const SCHEMA_VERSION: u32 = 1;
pub const CONNECTIONS_ENV: &str = "CUDA_DEVICE_MAX_CONNECTIONS";
/// The driver's value when the variable is unset.
pub const DEFAULT_CONNECTIONS: u32 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Run,
    Sweep,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultFile {
    pub schema: String,
    pub schema_version: u32,
    pub kind: Kind,
    pub tool: String,
    pub workload: String,
    pub config: Config,
    #[serde(default)]
    pub device: Option<DeviceInfo>,
    pub runs: Vec<Run>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
}

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

impl ResultFile {
    pub fn new(kind: Kind, workload: &str, config: Config) -> Self {
        ResultFile {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            kind,
            tool: format!("aorta-hw-queue {}", env!("CARGO_PKG_VERSION")),
            workload: workload.into(),
            config,
            device: None,
            runs: Vec::new(),
            analysis: None,
        }
    }

    pub fn from_json(text: &str) -> Result<Self, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match (
            v.get("schema").and_then(|s| s.as_str()),
            v.get("schema_version").and_then(|s| s.as_u64()),
        ) {
            (Some(SCHEMA), Some(n)) if n == SCHEMA_VERSION as u64 => {}
            (Some(SCHEMA), Some(n)) => {
                return Err(format!(
                    "schema version {n}, this build reads {SCHEMA_VERSION}"
                ))
            }
            _ => return Err(format!("not an {SCHEMA} file")),
        }
        serde_json::from_value(v).map_err(|e| format!("bad result file: {e}"))
    }

    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialize")
    }
}

/// Write via a temp file and rename, so a reader never sees half a file.
pub use aorta_fsutil::write_atomic;
