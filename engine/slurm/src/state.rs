//! A job's (or array task's) state as squeue and sacct print it, and what it means for the
//! trial the task ran.

/// Slurm's job states (`squeue --format=%T`, `sacct --format=State`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Completing,
    Configuring,
    Requeued,
    Completed,
    Failed,
    Timeout,
    OutOfMemory,
    Deadline,
    Cancelled,
    NodeFail,
    Preempted,
    BootFail,
    /// A state this build of aorta does not know (Slurm adds some now and then).
    Other(String),
}

/// What a task's state means for its trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// Still queued or running.
    Active,
    /// Finished; its result (if `aorta trial exec` got that far) is in the store.
    Finished,
    /// The trial's own failure (exit status, time limit, memory limit): a result for triage,
    /// never retried.
    TrialFailed,
    /// The machine or the scheduler took it away (node failure, preemption, boot failure, a
    /// cancel aorta did not issue): submitted again, a bounded number of times.
    Interrupted,
}

impl JobState {
    /// Parses squeue's/sacct's word; sacct's `CANCELLED by 1000` is `Cancelled`.
    pub fn parse(s: &str) -> JobState {
        let word = s.split_whitespace().next().unwrap_or("");
        match word {
            "PENDING" | "PD" => JobState::Pending,
            "RUNNING" | "R" => JobState::Running,
            "SUSPENDED" | "S" => JobState::Suspended,
            "COMPLETING" | "CG" => JobState::Completing,
            "CONFIGURING" | "CF" => JobState::Configuring,
            "REQUEUED" | "RQ" | "REQUEUE_FED" | "REQUEUE_HOLD" | "RESIZING" => JobState::Requeued,
            "COMPLETED" | "CD" => JobState::Completed,
            "FAILED" | "F" => JobState::Failed,
            "TIMEOUT" | "TO" => JobState::Timeout,
            "OUT_OF_MEMORY" | "OOM" => JobState::OutOfMemory,
            "DEADLINE" | "DL" => JobState::Deadline,
            "CANCELLED" | "CA" => JobState::Cancelled,
            "NODE_FAIL" | "NF" => JobState::NodeFail,
            "PREEMPTED" | "PR" => JobState::Preempted,
            "BOOT_FAIL" | "BF" => JobState::BootFail,
            other => JobState::Other(other.to_owned()),
        }
    }

    pub fn meaning(&self) -> Meaning {
        match self {
            JobState::Pending
            | JobState::Running
            | JobState::Suspended
            | JobState::Completing
            | JobState::Configuring
            | JobState::Requeued => Meaning::Active,
            JobState::Completed => Meaning::Finished,
            JobState::Failed | JobState::Timeout | JobState::OutOfMemory | JobState::Deadline => {
                Meaning::TrialFailed
            }
            JobState::Cancelled | JobState::NodeFail | JobState::Preempted | JobState::BootFail => {
                Meaning::Interrupted
            }
            // Unknown words: keep polling; squeue drops the task eventually and the store
            // or sacct decides.
            JobState::Other(_) => Meaning::Active,
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Configuring => "CONFIGURING",
            JobState::Requeued => "REQUEUED",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Deadline => "DEADLINE",
            JobState::Cancelled => "CANCELLED",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Other(s) => s,
        }
    }
}

/// Whether slurmstepd's lines in a task's log say it killed the task for its memory limit.
/// Where memory is enforced by polling (`JobAcctGatherParams=OverMemoryKill`, no cgroups) the
/// task ends `FAILED`, not `OUT_OF_MEMORY`, and this line is the only sign of why.
pub fn killed_for_memory(log: &str) -> bool {
    log.lines().any(|l| {
        l.contains("slurmstepd")
            && (l.contains("Exceeded job memory limit")
                || l.contains("exceeded memory limit")
                || l.contains("oom_kill event")
                || l.contains("oom-kill event"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_and_classify() {
        assert_eq!(JobState::parse("PENDING").meaning(), Meaning::Active);
        assert_eq!(JobState::parse("COMPLETED").meaning(), Meaning::Finished);
        assert_eq!(JobState::parse("CANCELLED by 1000"), JobState::Cancelled);
        for s in ["NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "CANCELLED"] {
            assert_eq!(JobState::parse(s).meaning(), Meaning::Interrupted, "{s}");
        }
        for s in ["FAILED", "TIMEOUT", "OUT_OF_MEMORY"] {
            assert_eq!(JobState::parse(s).meaning(), Meaning::TrialFailed, "{s}");
        }
        assert_eq!(JobState::parse("WEIRD"), JobState::Other("WEIRD".into()));
    }

    #[test]
    fn memory_kills_are_read_from_slurmstepd_lines_only() {
        // As the test cluster's slurmstepd (jobacct_gather/linux, OverMemoryKill) writes them.
        let polled = "slurmstepd-aorta0: error: StepId=1.batch exceeded memory limit (329748480 > 52428800), being killed\n\
                      slurmstepd-aorta0: error: *** JOB 1 ON aorta0 CANCELLED AT 2026-12-03T14:58:00 ***\n\
                      slurmstepd-aorta0: error: Exceeded job memory limit\n";
        assert!(killed_for_memory(polled));
        // task/cgroup's wording.
        assert!(killed_for_memory(
            "slurmstepd: error: Detected 1 oom_kill event in StepId=7.batch. Some of the step tasks have been OOM Killed.\n"
        ));
        // The trial's own words are not slurmstepd's.
        assert!(!killed_for_memory("RuntimeError: exceeded memory limit\n"));
        assert!(!killed_for_memory(
            "slurmstepd-aorta0: error: *** JOB 3 ON aorta0 CANCELLED AT 2026-12-03T14:56:23 DUE TO TIME LIMIT ***\n"
        ));
    }
}
