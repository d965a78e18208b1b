//! The result file (versioned schema): one `run` (a process, one connection setting) or a
//! `sweep` (one run per CUDA_DEVICE_MAX_CONNECTIONS value, each from a fresh child process).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::analysis::Analysis;
use crate::backend::DeviceInfo;
use crate::config::Config;
pub use crate::measured::{Metrics, Point, Run, DEFAULT_CONNECTIONS};

pub const SCHEMA: &str = "aorta-hw-queue/result";
/// Bump on any incompatible change; readers refuse other major versions.
pub const SCHEMA_VERSION: u32 = 1;
pub const CONNECTIONS_ENV: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

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
