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
