//! Finding a program as `execve`/`execvp` would: the one "is this executable?" check and the
//! `PATH` search, shared by trial spawning, the tracer, the probe and the compile-time warning.

use std::io;
use std::path::{Path, PathBuf};

/// Whether `p` is a regular file with an execute bit: what `execve` of it needs (permissions
/// of the caller aside). The one such check: resolution, the tracer, the probe and the
/// compile-time warning all ask it.
pub fn is_executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where `execvp` finds `name` for a child with this `PATH` value and working directory (relative
/// entries against `cwd`); a name with a `/` is `cwd`-relative and must be executable itself.
/// ENOENT when found nowhere, EACCES when found but not executable. Not remembered; see
/// [`resolve_program`] for the trial path.
pub fn find_program(name: &str, path_var: &std::ffi::OsStr, cwd: &Path) -> io::Result<PathBuf> {
    let not_found = |saw_file: bool| {
        io::Error::from_raw_os_error(if saw_file { libc::EACCES } else { libc::ENOENT })
    };
    if name.contains('/') {
        let p = cwd.join(name);
        return match is_executable_file(&p) {
            true => Ok(p),
            false => Err(not_found(p.is_file())),
        };
    }
    let mut saw_file = false;
    for dir in std::env::split_paths(path_var) {
        let candidate = cwd.join(dir).join(name);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
        saw_file |= candidate.is_file();
    }
    Err(not_found(saw_file))
}

/// A CUDA toolkit program (`compute-sanitizer`, `ncu`) for wrapping a trial: `$override_var`
/// when it names an executable file, else `name` on `PATH`, else in `$CUDA_HOME/bin`,
/// `$CUDA_PATH/bin`, `/usr/local/cuda/bin`. `Err` says where it looked and how to point at it.
pub fn find_cuda_tool(name: &str, override_var: &str) -> Result<PathBuf, String> {
    let mut looked = Vec::new();
    if let Some(p) = std::env::var_os(override_var).map(PathBuf::from) {
        if is_executable_file(&p) {
            return Ok(p);
        }
        looked.push(format!("${override_var} ({})", p.display()));
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    if let Ok(p) = find_program(name, &path_var, &cwd) {
        return Ok(p);
    }
    let roots = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain([PathBuf::from("/usr/local/cuda")]);
    for root in roots {
        let p = root.join("bin").join(name);
        if is_executable_file(&p) {
            return Ok(p);
        }
    }
    looked.push("PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin".into());
    Err(format!(
        "{name} not found (looked in {}): it ships with the CUDA toolkit; set {override_var} to its path",
        looked.join("; ")
    ))
}
