//! Content hashes of the files a command depends on: argv elements that name existing regular
//! files (`bash launch.sh` → launch.sh) plus files declared explicitly. Editing the script
//! re-runs its trials; a path that does not exist is just an argument.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A declared input that cannot be used: the recipe's `inputs:` names something wrong.
#[derive(Debug, thiserror::Error)]
pub enum InputsError {
    #[error("cannot hash declared input {path}: {source}")]
    Hash {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("inputs: {glob}: {source}")]
    Glob {
        glob: String,
        #[source]
        source: globset::Error,
    },
    #[error("inputs: {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("inputs: {glob} matches no file under {}", cwd.display())]
    NoMatch { glob: String, cwd: PathBuf },
}

/// Hashes (blake3 hex) by path as written. Unreadable declared files are an error;
/// argv elements that are not readable regular files are skipped.
pub fn hash_inputs(
    cwd: &Path,
    argv: &[String],
    declared: &[String],
) -> Result<BTreeMap<String, String>, InputsError> {
    let mut out = BTreeMap::new();
    for arg in argv {
        let path = cwd.join(arg);
        if arg.is_empty() || !path.is_file() {
            continue;
        }
        if let Ok(h) = hash_file(&path) {
            out.insert(arg.clone(), h);
        }
    }
    for d in declared {
        let h = hash_file(&cwd.join(d)).map_err(|source| InputsError::Hash {
            path: d.clone(),
            source,
        })?;
        out.insert(d.clone(), h);
    }
    Ok(out)
}

/// The regular files the recipe's `inputs:` globs match under `cwd`, as `cwd`-relative paths,
/// sorted: each glob's directory before its first wildcard is walked (symlinked directories
/// are not followed, so a link loop cannot hang the compile). A glob that matches nothing is
/// an error: a declared input that is absent is a typo, not an empty set.
pub fn expand_globs(cwd: &Path, globs: &[String]) -> Result<Vec<String>, InputsError> {
    let mut out = std::collections::BTreeSet::new();
    for g in globs {
        let matcher = globset::Glob::new(g)
            .map_err(|source| InputsError::Glob {
                glob: g.clone(),
                source,
            })?
            .compile_matcher();
        let base: std::path::PathBuf = Path::new(g)
            .components()
            .take_while(|c| {
                !c.as_os_str()
                    .to_string_lossy()
                    .contains(['*', '?', '[', '{'])
            })
            .collect();
        let before = out.len();
        let mut stack = vec![cwd.join(&base)];
        while let Some(p) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                let entries = std::fs::read_dir(&p).map_err(|source| InputsError::ReadDir {
                    dir: p.clone(),
                    source,
                })?;
                stack.extend(entries.flatten().map(|e| e.path()));
            } else if let Ok(rel) = p.strip_prefix(cwd) {
                if matcher.is_match(rel) && p.is_file() {
                    out.insert(rel.to_string_lossy().into_owned());
                }
            }
        }
        if out.len() == before {
            return Err(InputsError::NoMatch {
                glob: g.clone(),
                cwd: cwd.to_path_buf(),
            });
        }
    }
    Ok(out.into_iter().collect())
}

pub fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    let mut f = std::fs::File::open(path)?;
    std::io::copy(&mut f, &mut hasher)?;
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_files_are_hashed_and_other_words_are_not() {
        let dir = std::env::temp_dir().join(format!("aorta-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.sh"), "echo hi\n").unwrap();
        let h = hash_inputs(
            &dir,
            &["bash".into(), "run.sh".into(), "--flag".into()],
            &[],
        )
        .unwrap();
        assert_eq!(h.keys().collect::<Vec<_>>(), ["run.sh"]);
        std::fs::write(dir.join("run.sh"), "echo bye\n").unwrap();
        let h2 = hash_inputs(&dir, &["bash".into(), "run.sh".into()], &[]).unwrap();
        assert_ne!(h["run.sh"], h2["run.sh"]);
        assert!(hash_inputs(&dir, &[], &["missing.txt".into()]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
