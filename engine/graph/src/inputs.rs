//! Content hashes of the files a command depends on: argv elements that name existing regular
//! files (`bash launch.sh` → launch.sh) plus files declared explicitly. Editing the script
//! re-runs its trials; a path that does not exist is just an argument.

use std::collections::BTreeMap;
use std::path::Path;

/// Hashes (blake3 hex) by path as written. Unreadable declared files are an error;
/// argv elements that are not readable regular files are skipped.
pub fn hash_inputs(
    cwd: &Path,
    argv: &[String],
    declared: &[String],
) -> Result<BTreeMap<String, String>, String> {
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
        let h =
            hash_file(&cwd.join(d)).map_err(|e| format!("cannot hash declared input {d}: {e}"))?;
        out.insert(d.clone(), h);
    }
    Ok(out)
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
