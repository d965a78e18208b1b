//! Finding workload executables (`aorta-workload-<name>`) and asking who they are.

use std::path::{Path, PathBuf};

/// A resolved workload: where it is and what it says about itself.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    pub path: PathBuf,
    pub version: String,
    pub blake3: String,
}

/// Search order: `$AORTA_WORKLOAD_PATH`, the directory of the running `aorta`, `$PATH`.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("AORTA_WORKLOAD_PATH").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
    if let Some(d) = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)) {
        dirs.push(d);
    }
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs
}

pub fn find(name: &str) -> Option<PathBuf> {
    let file = format!("aorta-workload-{name}");
    search_dirs().into_iter().map(|d| d.join(&file)).find(|p| p.is_file())
}

/// Resolves `name` and runs `describe` (bounded to 30 s). Errors are one-line reasons.
pub fn resolve(name: &str) -> Result<Workload, String> {
    if name.is_empty() || name.contains('/') {
        return Err(format!("invalid workload name '{name}'"));
    }
    let path = find(name).ok_or_else(|| {
        format!("workload '{name}' not found: no aorta-workload-{name} in $AORTA_WORKLOAD_PATH, next to aorta, or on $PATH")
    })?;
    let out = std::process::Command::new(&path).arg("describe").output().map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!("{} describe exited with {}", path.display(), out.status));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("{} describe printed invalid JSON: {e}", path.display()))?;
    let version = v.get("version").and_then(|x| x.as_str()).unwrap_or("unknown").to_string();
    let blake3 = aorta_graph::hash_file(&path).map_err(|e| format!("cannot hash {}: {e}", path.display()))?;
    Ok(Workload { name: name.to_string(), path, version, blake3 })
}
