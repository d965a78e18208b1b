//! Verdict-keyed retention in the run directory (AORTA §3.12): after a trial is placed, files
//! above the level its verdict allows are deleted. The store keeps every output, so a later
//! `materialize` can always bring them back; retention only trims what the run dir shows.

use aorta_recipe::{Retain, RetainLevel};
use aorta_trial::Verdict;
use std::path::Path;

/// What retention did to one trial directory: `capture.retention` in its `result.json`.
pub use aorta_trial::Retention as Outcome;

fn rank(level: RetainLevel) -> u8 {
    match level {
        RetainLevel::None => 0,
        RetainLevel::Log => 1,
        RetainLevel::Summary => 2,
        RetainLevel::Full => 3,
    }
}

/// The class of a trial-relative path: record (never deleted), log, summary or heavy.
fn class_rank(rel: &str) -> Option<u8> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if rel == "result.json" {
        return None;
    }
    if !rel.contains('/')
        && matches!(
            name,
            "stdout.log" | "stderr.log" | "probe.env" | "probe.env.sh"
        )
    {
        return Some(1);
    }
    if name == "artifacts.json" || name.ends_with(".summary.json") || name.contains(".summary.") {
        return Some(2);
    }
    Some(3)
}

/// Deletes what `retain` does not keep for `verdict`.
pub fn apply(dir: &Path, retain: &Retain, verdict: Verdict) -> Outcome {
    let level = match verdict {
        Verdict::Pass => retain.on_pass,
        Verdict::Fail => retain.on_fail,
        Verdict::Error => retain.on_error,
    };
    let mut deleted = Vec::new();
    let mut freed = 0;
    if level == RetainLevel::Full {
        return Outcome {
            level,
            deleted,
            freed_bytes: freed,
        };
    }
    let files = crate::dirs::list_files(dir).unwrap_or_default();
    for rel in files {
        let Some(r) = class_rank(&rel) else { continue };
        if r > rank(level) {
            let p = dir.join(&rel);
            let size = std::fs::symlink_metadata(&p).map(|m| m.len()).unwrap_or(0);
            if std::fs::remove_file(&p).is_ok() {
                freed += size;
                deleted.push(rel);
            }
        }
    }
    prune_empty(dir, true);
    deleted.sort();
    Outcome {
        level,
        deleted,
        freed_bytes: freed,
    }
}

fn prune_empty(dir: &Path, is_root: bool) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut empty = true;
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if !(is_dir && prune_empty(&p, false)) {
            empty = false;
        }
    }
    if empty && !is_root {
        return std::fs::remove_dir(dir).is_ok();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_keep_the_record_and_drop_by_class() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "result.json",
            "stdout.log",
            "stderr.log",
            "x.summary.json",
            "traces/big.bin",
        ] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "data").unwrap();
        }
        let retain = Retain {
            on_fail: RetainLevel::Full,
            on_pass: RetainLevel::Log,
            on_error: RetainLevel::None,
        };
        let o = apply(d.path(), &retain, Verdict::Pass);
        assert_eq!(o.deleted, ["traces/big.bin", "x.summary.json"]);
        assert_eq!(o.freed_bytes, 8);
        assert!(
            !d.path().join("traces").exists(),
            "empty directories are pruned"
        );
        let o = apply(d.path(), &retain, Verdict::Error);
        assert_eq!(o.deleted, ["stderr.log", "stdout.log"]);
        assert!(
            d.path().join("result.json").exists(),
            "the record is never deleted"
        );
        let o = apply(d.path(), &retain, Verdict::Fail);
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            serde_json::json!({"level": "full", "deleted": [], "freed_bytes": 0}),
            "a level that deletes nothing is still recorded"
        );
    }
}
