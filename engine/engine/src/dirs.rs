//! Atomic writes into run directories: temp file in the same directory, fsync, rename. The
//! directory entries become durable with one `syncfs` at the end of the build
//! (`aorta_store::sync_filesystem`), not with an fsync of the directory per file.

use std::path::Path;

pub use aorta_fsutil::{user_path_error, write_atomic, write_user_file, UserFile};

/// Replaces directory `dest` with `staged` (both in the same parent): the old tree moves
/// aside first, so readers see either the old or the new complete directory. A new `dest` in
/// an existing parent, a build's usual case, costs one rename and no lookups.
pub fn replace_dir(staged: &Path, dest: &Path) -> std::io::Result<()> {
    let first = match std::fs::rename(staged, dest) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if first.kind() == std::io::ErrorKind::NotFound && !dest.exists() {
        // No parent yet (or no `staged`: the second rename says so).
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p)?;
        }
        return std::fs::rename(staged, dest);
    }
    if dest.symlink_metadata().is_err() || staged.symlink_metadata().is_err() {
        return Err(first);
    }
    let trash = dest.with_file_name(format!(
        ".{}.old-{}",
        dest.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::rename(dest, &trash)?;
    if let Err(e) = std::fs::rename(staged, dest) {
        // Put the old tree back rather than leave no `dest`.
        let _ = std::fs::rename(&trash, dest);
        return Err(e);
    }
    match trash.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&trash),
        _ => std::fs::remove_file(&trash),
    }
}

/// Makes `dir` empty and new: one `mkdir` when it is absent, as it is unless an earlier
/// aorta of this pid left it behind.
pub fn fresh_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_dir_all(dir)?;
            std::fs::create_dir(dir)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir),
        done => done,
    }
}

/// Every regular file under `dir`, as sorted relative paths with `/` separators.
pub fn list_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    // Each directory with its path relative to `dir` ("" for `dir` itself).
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = match rel.is_empty() {
                true => name.into_owned(),
                false => format!("{rel}/{name}"),
            };
            if ft.is_dir() {
                stack.push((entry.path(), path));
            } else if ft.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{fresh_dir, list_files, replace_dir};
    use std::fs;

    /// A trial's outputs as result.json lists them: regular files at any depth, relative, with
    /// `/` separators, sorted; directories and symlinks are not files.
    #[test]
    fn list_files_gives_sorted_relative_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::create_dir_all(d.join("traces").join("rank0")).unwrap();
        fs::create_dir(d.join("empty")).unwrap();
        for f in ["stdout.log", "b.txt", "traces/t.json", "traces/rank0/p.bin"] {
            fs::write(d.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink(d.join("b.txt"), d.join("link")).unwrap();
        assert_eq!(
            list_files(d).unwrap(),
            ["b.txt", "stdout.log", "traces/rank0/p.bin", "traces/t.json"]
        );
        assert!(list_files(&d.join("missing")).is_err());
    }

    /// A staging directory left behind (by an earlier aorta that had this pid) is emptied, and
    /// a missing staging root is made.
    #[test]
    fn a_fresh_staging_dir_is_empty_whatever_was_there() {
        let tmp = tempfile::tempdir().unwrap();
        let left = tmp.path().join("left");
        fs::create_dir_all(left.join("sub")).unwrap();
        fs::write(left.join("stdout.log"), "old").unwrap();
        fresh_dir(&left).unwrap();
        assert_eq!(fs::read_dir(&left).unwrap().count(), 0);
        let deep = tmp.path().join("no").join("such").join("root");
        fresh_dir(&deep).unwrap();
        assert!(deep.is_dir());
        fresh_dir(&deep).unwrap();
        assert!(deep.is_dir());
    }

    fn staged_with(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
        let staged = dir.join(".staging").join("t");
        fs::create_dir_all(&staged).unwrap();
        fs::write(staged.join("result.json"), text).unwrap();
        staged
    }

    #[test]
    fn replace_dir_places_new_replaces_old_and_creates_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("cell").join("trial_0");
        // No parent yet.
        replace_dir(&staged_with(tmp.path(), "1"), &dest).unwrap();
        assert_eq!(fs::read_to_string(dest.join("result.json")).unwrap(), "1");
        // An old, non-empty directory is replaced and its trash removed.
        fs::write(dest.join("stale.log"), "old").unwrap();
        replace_dir(&staged_with(tmp.path(), "2"), &dest).unwrap();
        assert_eq!(fs::read_to_string(dest.join("result.json")).unwrap(), "2");
        assert!(!dest.join("stale.log").exists());
        // A file where the directory goes is replaced too.
        fs::remove_dir_all(&dest).unwrap();
        fs::write(&dest, "a file").unwrap();
        replace_dir(&staged_with(tmp.path(), "3"), &dest).unwrap();
        assert_eq!(fs::read_to_string(dest.join("result.json")).unwrap(), "3");
        let left: Vec<_> = fs::read_dir(tmp.path().join("cell"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("trial_0")]);
        // A missing staged directory is an error, and leaves dest alone.
        let err = replace_dir(&tmp.path().join("missing"), &dest).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(fs::read_to_string(dest.join("result.json")).unwrap(), "3");
    }
}
