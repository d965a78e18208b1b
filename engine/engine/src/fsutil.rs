//! Atomic writes into run directories: temp file in the same directory, fsync, rename. The
//! directory entries become durable with one `syncfs` at the end of the build
//! (`aorta_store::sync_filesystem`), not with an fsync of the directory per file.

use std::path::Path;

pub use aorta_fsutil::write_atomic;

/// Replaces directory `dest` with `staged` (both in the same parent): the old tree moves
/// aside first, so readers see either the old or the new complete directory.
pub fn replace_dir(staged: &Path, dest: &Path) -> std::io::Result<()> {
    if dest.exists() {
        let trash = dest.with_file_name(format!(
            ".{}.old-{}",
            dest.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::rename(dest, &trash)?;
        std::fs::rename(staged, dest)?;
        std::fs::remove_dir_all(&trash)?;
    } else {
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p)?;
        }
        std::fs::rename(staged, dest)?;
    }
    Ok(())
}

/// Every regular file under `dir`, as sorted relative paths with `/` separators.
pub fn list_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            let path = entry.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                if let Ok(rel) = path.strip_prefix(dir) {
                    out.push(
                        rel.components()
                            .map(|c| c.as_os_str().to_string_lossy().into_owned())
                            .collect::<Vec<_>>()
                            .join("/"),
                    );
                }
            }
        }
    }
    out.sort();
    Ok(out)
}
