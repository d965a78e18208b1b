//! Finding workload executables (`aorta-workload-<name>`) and asking who they are.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to get a workload that was not found: how each shipped one is built.
pub fn how_to_get(name: &str) -> String {
    let build = match name {
        "example" => "the example is built beside aorta by `cargo build --release -p aorta-cli`".to_owned(),
        "gpu_smoke" | "gpu_doctor" => format!("{name} is built beside aorta by `cargo build --release -p aorta-hw-queue`"),
        "training" | "inference" | "inference_continuous" | "llm_determinism" | "race" => format!(
            "aorta-workload-{name} links libtorch: `tests/install-libtorch`, then build it as docs/workloads.md shows"
        ),
        _ => "a workload is an `aorta-workload-<name>` executable speaking docs/workload-protocol.md".to_owned(),
    };
    format!("{build}; it is looked up in $AORTA_WORKLOAD_PATH, next to aorta, then on $PATH")
}

/// Why a workload cannot run: the cell's error (a workload recipe's cells all share it).
/// Clone, since one resolution serves every target of a session.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkloadError {
    /// A triage recipe compiled without resolving its workload (a bug, said as the cell's error).
    #[error("workload '{0}' was not resolved")]
    Unresolved(String),
    #[error("invalid workload name '{0}'")]
    InvalidName(String),
    #[error("workload '{0}' not found: no aorta-workload-{0} in $AORTA_WORKLOAD_PATH, next to aorta, or on $PATH")]
    NotFound(String),
    #[error("cannot run {}: {source}", path.display())]
    Spawn {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("{} describe exited with {status}", path.display())]
    DescribeFailed {
        path: PathBuf,
        status: std::process::ExitStatus,
    },
    #[error("{} describe printed invalid JSON: {source}", path.display())]
    DescribeJson {
        path: PathBuf,
        #[source]
        source: Arc<serde_json::Error>,
    },
    #[error("cannot hash {}: {source}", path.display())]
    Hash {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("workload '{name}' needs libtorch: {source}")]
    Libtorch {
        name: String,
        #[source]
        source: LibtorchError,
    },
}

/// Why libtorch's lib folder was not found, with where to point aorta instead.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LibtorchError {
    #[error("${var}{suffix} ({}) holds no libtorch_cpu", dir.display())]
    NotInVar {
        var: &'static str,
        suffix: &'static str,
        dir: PathBuf,
    },
    #[error("cannot run {python}: {source}; set $AORTA_LIBTORCH to libtorch's lib folder")]
    Python {
        python: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error(
        "{0} has no torch package; pip install torch, or set $AORTA_PYTHON or $AORTA_LIBTORCH"
    )]
    NoTorch(String),
    #[error("{} holds no libtorch_cpu; set $AORTA_LIBTORCH", .0.display())]
    NotInPackage(PathBuf),
}

/// A resolved workload: where it is and what it says about itself.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub path: PathBuf,
    pub version: String,
    pub blake3: String,
    /// Folder prepended to the child's `LD_LIBRARY_PATH` (libtorch's lib for workloads that
    /// declare `"requires": ["libtorch"]`). Where it is found never enters a trial key: the
    /// environment snapshot already records torch's version.
    pub library_path: Option<PathBuf>,
}

/// Search order: `$AORTA_WORKLOAD_PATH`, the directory of the running `aorta`, `$PATH`.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("AORTA_WORKLOAD_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    if let Some(d) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        dirs.push(d);
    }
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs
}

/// A workload's executable is `aorta-workload-<name>`.
const PREFIX: &str = "aorta-workload-";

pub fn find(name: &str) -> Option<PathBuf> {
    let file = format!("{PREFIX}{name}");
    search_dirs()
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
}

/// The names of every workload [`find`] would find, sorted, each once.
pub fn available() -> Vec<String> {
    let mut names: Vec<String> = search_dirs()
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(PREFIX).map(str::to_owned)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What the engine reads of a workload's `describe` (the workload protocol, docs/workloads.md);
/// the rest of its JSON is for people.
#[derive(serde::Deserialize)]
struct Describe {
    version: Option<String>,
    #[serde(default)]
    requires: Vec<String>,
}

/// Resolves `name` and runs `describe` (bounded to 30 s).
pub fn resolve(name: &str, torch_dir: Option<&Path>) -> Result<Workload, WorkloadError> {
    if name.is_empty() || name.contains('/') {
        return Err(WorkloadError::InvalidName(name.into()));
    }
    let path = find(name).ok_or_else(|| WorkloadError::NotFound(name.into()))?;
    let describe = |lib: Option<&Path>| {
        let mut cmd = std::process::Command::new(&path);
        if let Some(lib) = lib {
            cmd.env("LD_LIBRARY_PATH", with_library_path(lib, None));
        }
        cmd.arg("describe").output()
    };
    let mut out = match describe(None) {
        Ok(o) => o,
        Err(e) => {
            return Err(WorkloadError::Spawn {
                path,
                source: Arc::new(e),
            })
        }
    };
    // A libtorch workload built on another machine has a RUNPATH to that machine's libtorch:
    // the loader cannot start it (127) until libtorch's lib folder is on its path, which its
    // trials get anyway. Asked again with it; a workload that fails for another reason fails
    // again and is reported as before.
    if out.status.code() == Some(127) {
        if let Some(again) = libtorch_lib(torch_dir)
            .ok()
            .and_then(|lib| describe(Some(&lib)).ok())
        {
            out = again;
        }
    }
    if !out.status.success() {
        return Err(WorkloadError::DescribeFailed {
            path,
            status: out.status,
        });
    }
    let described: Describe = match serde_json::from_slice(&out.stdout) {
        Ok(d) => d,
        Err(e) => {
            return Err(WorkloadError::DescribeJson {
                path,
                source: Arc::new(e),
            })
        }
    };
    let version = described.version.unwrap_or_else(|| "unknown".into());
    let blake3 = match aorta_graph::hash_file(&path) {
        Ok(h) => h,
        Err(e) => {
            return Err(WorkloadError::Hash {
                path,
                source: Arc::new(e),
            })
        }
    };
    let library_path = if described.requires.iter().any(|r| r == "libtorch") {
        Some(
            libtorch_lib(torch_dir).map_err(|source| WorkloadError::Libtorch {
                name: name.into(),
                source,
            })?,
        )
    } else {
        None
    };
    Ok(Workload {
        name: name.to_string(),
        path,
        version,
        blake3,
        library_path,
    })
}

/// libtorch's lib folder for workloads that link it, first found of: `$AORTA_LIBTORCH` (the lib
/// folder itself), `$LIBTORCH/lib`, `torch_dir/lib` (the torch package the environment probe's
/// interpreter imports, so `--python` chooses it), the `lib` folder of the torch package that
/// `$AORTA_PYTHON` (default `python3`) would import. That last query only locates the package
/// (importlib's find_spec), it never imports torch, so it takes milliseconds.
pub fn libtorch_lib(torch_dir: Option<&Path>) -> Result<PathBuf, LibtorchError> {
    let has_torch =
        |d: &Path| d.join("libtorch_cpu.so").is_file() || d.join("libtorch_cpu.dylib").is_file();
    for (var, suffix) in [("AORTA_LIBTORCH", ""), ("LIBTORCH", "/lib")] {
        if let Some(d) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let mut d = PathBuf::from(d);
            if !suffix.is_empty() {
                d.push(suffix.trim_start_matches('/'));
            }
            return if has_torch(&d) {
                Ok(d)
            } else {
                Err(LibtorchError::NotInVar {
                    var,
                    suffix,
                    dir: d,
                })
            };
        }
    }
    if let Some(d) = torch_dir.map(|t| t.join("lib")).filter(|d| has_torch(d)) {
        return Ok(d);
    }
    let python = std::env::var("AORTA_PYTHON")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "python3".into());
    let script = "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";
    let out = match std::process::Command::new(&python)
        .args(["-c", script])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            return Err(LibtorchError::Python {
                python,
                source: Arc::new(e),
            })
        }
    };
    let pkg = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if pkg.is_empty() {
        return Err(LibtorchError::NoTorch(python));
    }
    let d = PathBuf::from(pkg).join("lib");
    if has_torch(&d) {
        Ok(d)
    } else {
        Err(LibtorchError::NotInPackage(d))
    }
}

/// `LD_LIBRARY_PATH` for a child: `lib` first, then the cell's own value, else aorta's.
pub fn with_library_path(lib: &Path, cell_value: Option<&str>) -> String {
    let rest = cell_value
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| {
            std::env::var("LD_LIBRARY_PATH")
                .ok()
                .filter(|v| !v.is_empty())
        });
    match rest {
        Some(r) => format!("{}:{r}", lib.display()),
        None => lib.display().to_string(),
    }
}

/// The workloads an invocation resolved, each asked `describe` once.
#[derive(Debug, Default)]
pub(crate) struct WorkloadCache(
    std::sync::Mutex<std::collections::HashMap<String, Result<Workload, WorkloadError>>>,
);

impl WorkloadCache {
    /// The workload executable by name, resolved once per session. `torch_dir`: where the
    /// environment snapshot found torch (libtorch is looked for there).
    pub(crate) fn get(
        &self,
        name: &str,
        torch_dir: Option<&Path>,
    ) -> Result<Workload, WorkloadError> {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(name.to_string())
            .or_insert_with(|| resolve(name, torch_dir))
            .clone()
    }

    /// Forgets them all (watch mode: an executable may have been rebuilt).
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
