//! Finding workload executables (`aorta-workload-<name>`) and asking who they are.

use std::path::{Path, PathBuf};

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

pub fn find(name: &str) -> Option<PathBuf> {
    let file = format!("aorta-workload-{name}");
    search_dirs()
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
}

/// What the engine reads of a workload's `describe` (the workload protocol, docs/workloads.md);
/// the rest of its JSON is for people.
#[derive(serde::Deserialize)]
struct Describe {
    version: Option<String>,
    #[serde(default)]
    requires: Vec<String>,
}

/// Resolves `name` and runs `describe` (bounded to 30 s). Errors are one-line reasons.
pub fn resolve(name: &str, torch_dir: Option<&Path>) -> Result<Workload, String> {
    if name.is_empty() || name.contains('/') {
        return Err(format!("invalid workload name '{name}'"));
    }
    let path = find(name).ok_or_else(|| {
        format!("workload '{name}' not found: no aorta-workload-{name} in $AORTA_WORKLOAD_PATH, next to aorta, or on $PATH")
    })?;
    let out = std::process::Command::new(&path)
        .arg("describe")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} describe exited with {}",
            path.display(),
            out.status
        ));
    }
    let described: Describe = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{} describe printed invalid JSON: {e}", path.display()))?;
    let version = described.version.unwrap_or_else(|| "unknown".into());
    let blake3 = aorta_graph::hash_file(&path)
        .map_err(|e| format!("cannot hash {}: {e}", path.display()))?;
    let requires = described.requires;
    let library_path = if requires.iter().any(|r| r == "libtorch") {
        Some(
            libtorch_lib(torch_dir)
                .map_err(|e| format!("workload '{name}' needs libtorch: {e}"))?,
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
pub fn libtorch_lib(torch_dir: Option<&Path>) -> Result<PathBuf, String> {
    let has_torch =
        |d: &Path| d.join("libtorch_cpu.so").is_file() || d.join("libtorch_cpu.dylib").is_file();
    if let Some(d) = std::env::var_os("AORTA_LIBTORCH").filter(|v| !v.is_empty()) {
        let d = PathBuf::from(d);
        return if has_torch(&d) {
            Ok(d)
        } else {
            Err(format!(
                "$AORTA_LIBTORCH={} holds no libtorch_cpu",
                d.display()
            ))
        };
    }
    if let Some(d) = std::env::var_os("LIBTORCH").filter(|v| !v.is_empty()) {
        let d = PathBuf::from(d).join("lib");
        return if has_torch(&d) {
            Ok(d)
        } else {
            Err(format!(
                "$LIBTORCH/lib ({}) holds no libtorch_cpu",
                d.display()
            ))
        };
    }
    if let Some(d) = torch_dir.map(|t| t.join("lib")).filter(|d| has_torch(d)) {
        return Ok(d);
    }
    let python = std::env::var("AORTA_PYTHON")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "python3".into());
    let script = "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";
    let out = std::process::Command::new(&python)
        .args(["-c", script])
        .output()
        .map_err(|e| {
            format!("cannot run {python}: {e}; set $AORTA_LIBTORCH to libtorch's lib folder")
        })?;
    let pkg = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if pkg.is_empty() {
        return Err(format!("{python} has no torch package; pip install torch, or set $AORTA_PYTHON or $AORTA_LIBTORCH"));
    }
    let d = PathBuf::from(pkg).join("lib");
    if has_torch(&d) {
        Ok(d)
    } else {
        Err(format!(
            "{} holds no libtorch_cpu; set $AORTA_LIBTORCH",
            d.display()
        ))
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
