//! The interpreter's report: the embedded `torch_probe.py`, run in the chosen interpreter, prints
//! one JSON line. By default the script imports no package: it reports the interpreter, its
//! `sys.path` and where `import torch` would load torch from; `--deep` also imports torch for
//! the fields only a live torch can report. What the answer means is read in [`crate::python`].

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::schema::Sdpa;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The interpreter-side script (standard library only; torch in deep mode).
pub(crate) const SCRIPT: &str = include_str!("torch_probe.py");
const MARKER: &str = "AORTA_PROBE_JSON:";

/// The script's JSON, as printed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct PyReport {
    /// Lookups of the default part that failed (`site_packages`, `torch_spec`).
    pub errors: BTreeMap<String, String>,
    /// `files` or `deep`.
    pub mode: Option<String>,
    pub python: PyInfo,
    pub site_packages: Vec<String>,
    /// The interpreter's `sys.path` after its normal startup, existing directories only.
    pub sys_path: Vec<String>,
    /// `importlib.util.find_spec("torch")`: where `import torch` would load it from.
    pub torch_spec: Option<TorchSpec>,
    /// Deep mode only.
    pub deep: Option<DeepReport>,
}

impl PyReport {
    /// The default-mode part (what a run without `--deep` prints).
    pub(crate) fn files_only(&self) -> PyReport {
        PyReport {
            mode: Some("files".into()),
            deep: None,
            ..self.clone()
        }
    }

    /// Directories to look for distributions and wheel libraries in: `sys.path`, else the
    /// site-packages list.
    pub(crate) fn search_dirs(&self) -> Vec<PathBuf> {
        let dirs = if self.sys_path.is_empty() {
            &self.site_packages
        } else {
            &self.sys_path
        };
        dirs.iter().map(PathBuf::from).collect()
    }

    /// The torch package directory `import torch` would use.
    pub(crate) fn torch_dir(&self) -> Option<PathBuf> {
        let s = self.torch_spec.as_ref()?;
        s.locations.first().map(PathBuf::from).or_else(|| {
            s.origin
                .as_deref()
                .map(Path::new)
                .filter(|o| o.file_name().is_some_and(|n| n == "__init__.py"))
                .and_then(Path::parent)
                .map(Path::to_path_buf)
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TorchSpec {
    pub origin: Option<String>,
    pub locations: Vec<String>,
}

/// What `import torch` reported (deep mode).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct DeepReport {
    pub errors: BTreeMap<String, String>,
    pub torch_import_error: Option<String>,
    pub torch_import_seconds: Option<f64>,
    pub torch: Option<TorchInfo>,
    pub config_show: Option<String>,
    pub arch_flags: Option<String>,
    pub cudnn: Option<CudnnInfo>,
    pub nccl: Option<Value>,
    pub sdpa: Option<Sdpa>,
    pub numerics: Option<BTreeMap<String, Value>>,
    pub allocator_backend: Option<String>,
    pub cuda_initialized: Option<bool>,
    pub loaded_libraries: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct PyInfo {
    pub executable: Option<String>,
    pub version: Option<String>,
    pub implementation: Option<String>,
    pub prefix: Option<String>,
    pub base_prefix: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TorchInfo {
    pub version: Option<String>,
    pub file: Option<String>,
    pub git_commit: Option<String>,
    pub cuda: Option<String>,
    pub hip: Option<String>,
    pub debug: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CudnnInfo {
    pub compiled: Option<Value>,
    pub runtime: Option<Value>,
    pub enabled: Option<bool>,
    pub benchmark: Option<bool>,
    pub deterministic: Option<bool>,
    pub allow_tf32: Option<bool>,
}

/// Runs the probe script in `interp` (with `import torch` when `deep`) and reads its report.
pub(crate) fn run_script(
    tools: &Tools,
    interp: &Path,
    timeout: Duration,
    deep: bool,
) -> Result<PyReport, ProbeError> {
    let args: &[&str] = if deep {
        &["-c", SCRIPT, "deep"]
    } else {
        &["-c", SCRIPT]
    };
    let o = tools.run(interp, args, timeout)?;
    let Some(line) = o.stdout.lines().rev().find_map(|l| l.strip_prefix(MARKER)) else {
        return Err(ProbeError::NoReport {
            interp: interp.to_path_buf(),
            exit: o.failure(),
        });
    };
    serde_json::from_str(line).map_err(|source| ProbeError::BadReport {
        interp: interp.to_path_buf(),
        source,
    })
}
