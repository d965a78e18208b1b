//! Tier 1 — how the process ended (AORTA §5.2), and Tier 2's reconciliation rule (§5.3).

use std::path::Path;

use crate::model::Observation;

/// Linux signal numbers (exit codes are `-signal`, Python's convention).
const SIGABRT: i32 = 6;
const SIGBUS: i32 = 7;
const SIGSEGV: i32 = 11;

/// Tier-1 detector ids, in AORTA's order: exec failure alone, else timeout / signal /
/// non-zero, then a core dump.
pub(crate) fn detect(obs: &Observation) -> Vec<String> {
    // A command that never ran has no exit status, signal or core of its own.
    if obs.exec_failed {
        return vec!["tier1:exec_failed".into()];
    }
    let mut fired = Vec::new();
    let status = if obs.timed_out {
        Some("tier1:timeout")
    } else if obs.killed_on_hang {
        None
    } else {
        match obs.exit_code {
            0 => None,
            c if c == -SIGSEGV => Some("tier1:sigsegv"),
            c if c == -SIGABRT => Some("tier1:sigabrt"),
            c if c == -SIGBUS => Some("tier1:sigbus"),
            // Other signals (-9, -15 ...) and plain failures.
            _ => Some("tier1:exit_nonzero"),
        }
    };
    fired.extend(status.map(String::from));
    if has_core_file(&obs.trial_dir, None)
        || obs
            .core_dirs
            .iter()
            .any(|d| has_core_file(d, obs.started_at))
    {
        fired.push("tier1:coredump".into());
    }
    fired
}

/// A file named `core` or `core.*` directly inside `dir`, modified no earlier than `since` when
/// given (a stale core left by an earlier crash in the working directory would otherwise fire on
/// every trial). A missing or unreadable directory simply has no core (never an error: the
/// trial dir may already be gone).
///
/// With `since`, a directory whose own mtime is older than `since` (less a second, for coarse
/// file timestamps) is not listed: the kernel writes a core file by unlinking the name and
/// creating it afresh (`O_EXCL`, Linux ≥ 4.2), which sets the directory's mtime, so no core
/// can have appeared in it since. The directory is the one aorta was started in and is checked
/// after every trial; listing it cost about 13 µs a trial, a large one more.
fn has_core_file(dir: &Path, since: Option<std::time::SystemTime>) -> bool {
    if dir.as_os_str().is_empty() {
        return false;
    }
    if let Some(t) = since {
        let quiet_before = t - std::time::Duration::from_secs(1);
        if std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .is_ok_and(|m| m < quiet_before)
        {
            return false;
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        (name == "core" || name.starts_with("core."))
            && std::fs::metadata(e.path()).is_ok_and(|meta| {
                meta.is_file() && since.is_none_or(|t| meta.modified().is_ok_and(|m| m >= t))
            })
    })
}

/// Tier 2: the monitor's latched hang, unless the process then exited cleanly on its own.
/// Returns (fired ids, reconciled). A clean exit proves progress resumed (AORTA's monitor sees
/// only the direct child, so a busy wrapper's workers can look idle: §12.3.1).
pub(crate) fn hang(obs: &Observation) -> (Vec<String>, bool) {
    if !obs.hang_detected {
        return (Vec::new(), false);
    }
    if obs.exit_code == 0 && !obs.timed_out && !obs.exec_failed {
        return (Vec::new(), true);
    }
    (vec!["tier2:hang".into()], false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(exit_code: i32) -> Observation {
        Observation {
            exit_code,
            ..Default::default()
        }
    }

    #[test]
    fn exit_codes_and_signals() {
        assert!(detect(&obs(0)).is_empty());
        assert_eq!(detect(&obs(1)), ["tier1:exit_nonzero"]);
        assert_eq!(detect(&obs(-11)), ["tier1:sigsegv"]);
        assert_eq!(detect(&obs(-6)), ["tier1:sigabrt"]);
        assert_eq!(detect(&obs(-7)), ["tier1:sigbus"]);
        assert_eq!(detect(&obs(-9)), ["tier1:exit_nonzero"]);
        assert_eq!(detect(&obs(-15)), ["tier1:exit_nonzero"]);
    }

    #[test]
    fn timeout_wins_over_any_exit_code() {
        for code in [-1, 0, 1, -11] {
            let o = Observation {
                exit_code: code,
                timed_out: true,
                ..Default::default()
            };
            assert_eq!(detect(&o), ["tier1:timeout"]);
        }
    }

    #[test]
    fn hang_reconciliation() {
        let h = |exit_code, timed_out| Observation {
            exit_code,
            timed_out,
            hang_detected: true,
            ..Default::default()
        };
        assert_eq!(hang(&h(0, false)), (vec![], true));
        assert_eq!(hang(&h(1, false)), (vec!["tier2:hang".to_string()], false));
        assert_eq!(hang(&h(-1, true)), (vec!["tier2:hang".to_string()], false));
        assert_eq!(hang(&obs(1)), (vec![], false));
    }

    #[test]
    fn a_tree_killed_for_its_hang_is_a_hang_not_an_exit_status() {
        let o = Observation {
            exit_code: -15,
            hang_detected: true,
            killed_on_hang: true,
            ..Default::default()
        };
        assert!(detect(&o).is_empty(), "the signal was aorta's");
        assert_eq!(hang(&o), (vec!["tier2:hang".to_string()], false));
    }

    #[test]
    fn a_stale_core_in_the_working_directory_does_not_count_a_fresh_one_does() {
        let (trial, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let core = cwd.path().join("core.1234");
        std::fs::write(&core, b"old").unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        let o = |started_at| Observation {
            exit_code: -11,
            trial_dir: trial.path().to_path_buf(),
            core_dirs: vec![cwd.path().to_path_buf()],
            started_at,
            ..Default::default()
        };
        assert_eq!(
            detect(&o(Some(later))),
            ["tier1:sigsegv"],
            "older than the trial"
        );
        assert_eq!(detect(&o(None)), ["tier1:sigsegv", "tier1:coredump"]);
        // The trial directory is new for each trial: any core there counts.
        std::fs::write(trial.path().join("core"), b"new").unwrap();
        assert_eq!(detect(&o(Some(later))), ["tier1:sigsegv", "tier1:coredump"]);
    }

    /// A directory untouched since before the trial is not listed; one where a core was
    /// written (unlinked and created afresh, as the kernel does) is, though its other files
    /// are old.
    #[test]
    fn a_core_written_into_a_quiet_directory_is_found() {
        let (trial, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let core = cwd.path().join("core");
        std::fs::write(&core, b"old").unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let age = |p: &std::path::Path| {
            std::fs::File::open(p)
                .unwrap()
                .set_times(std::fs::FileTimes::new().set_modified(hour_ago))
                .unwrap()
        };
        age(&core);
        age(cwd.path());
        let started = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let o = Observation {
            exit_code: -11,
            trial_dir: trial.path().to_path_buf(),
            core_dirs: vec![cwd.path().to_path_buf()],
            started_at: Some(started),
            ..Default::default()
        };
        assert_eq!(
            detect(&o),
            ["tier1:sigsegv"],
            "a quiet directory, a stale core"
        );
        // Rewritten in place (not how the kernel writes one): the directory says nothing
        // changed, so it is not listed.
        std::fs::write(&core, b"in place").unwrap();
        age(cwd.path());
        assert_eq!(detect(&o), ["tier1:sigsegv"], "the directory is not listed");
        std::fs::remove_file(&core).unwrap();
        std::fs::write(&core, b"new").unwrap();
        assert_eq!(detect(&o), ["tier1:sigsegv", "tier1:coredump"]);
    }

    #[test]
    fn missing_trial_dir_is_not_an_error() {
        let o = Observation {
            exit_code: 0,
            trial_dir: "/nonexistent/aorta/trial".into(),
            ..Default::default()
        };
        assert!(detect(&o).is_empty());
    }
}
