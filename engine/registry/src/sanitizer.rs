//! GPU sanitizers as diagnostic-axis entries: a cell whose diagnostic is
//! `compute_sanitizer_<tool>` runs its command under NVIDIA's compute-sanitizer. They are not
//! mitigations (a mitigation is an env-var bundle, builtins.rs): they change how the command
//! is run, so they live in a table of their own that only the diagnostic axis reads.

use serde::Serialize;

/// One compute-sanitizer tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sanitizer {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
}

/// A sanitized trial's timeout and hang window are this many times the recipe's: the tools
/// instrument every memory access (NVIDIA documents slowdowns of 10x to 100x on kernels; a
/// small program measured 1.6x to 4x of wall time on the H100, docs/diagnostics.md).
pub const TIMEOUT_FACTOR: u32 = 20;

impl Sanitizer {
    pub const ALL: [Sanitizer; 4] = [
        Sanitizer::Memcheck,
        Sanitizer::Racecheck,
        Sanitizer::Synccheck,
        Sanitizer::Initcheck,
    ];

    /// The `--tool` value.
    pub fn tool(self) -> &'static str {
        match self {
            Sanitizer::Memcheck => "memcheck",
            Sanitizer::Racecheck => "racecheck",
            Sanitizer::Synccheck => "synccheck",
            Sanitizer::Initcheck => "initcheck",
        }
    }

    /// The diagnostic-axis name.
    pub fn name(self) -> String {
        format!("compute_sanitizer_{}", self.tool())
    }

    pub fn from_name(name: &str) -> Option<Sanitizer> {
        let tool = name.strip_prefix("compute_sanitizer_")?;
        Sanitizer::ALL.into_iter().find(|s| s.tool() == tool)
    }

    pub fn description(self) -> &'static str {
        match self {
            Sanitizer::Memcheck => "Runs the command under compute-sanitizer memcheck: out-of-bounds and misaligned global/shared/local accesses, invalid frees, CUDA API errors, with kernel, source line and allocation (CUDA; slow)",
            Sanitizer::Racecheck => "Runs the command under compute-sanitizer racecheck: shared-memory data races (read/write hazards between threads of a block) with the two source lines (CUDA; slow)",
            Sanitizer::Synccheck => "Runs the command under compute-sanitizer synccheck: barriers reached by divergent threads, invalid __syncwarp masks (CUDA; slow)",
            Sanitizer::Initcheck => "Runs the command under compute-sanitizer initcheck: reads of device global memory never written (CUDA; slow)",
        }
    }

    /// The variable that points at the tool when it is not on `PATH` or under the toolkit.
    pub const PROGRAM_VAR: &'static str = "AORTA_COMPUTE_SANITIZER";

    /// The words before the command: one log per process (`%p`), every child process
    /// checked (a launch script's python too), the tool's own exit code left alone (aorta
    /// judges the report, docs/diagnostics.md).
    pub fn argv_prefix(self, program: &std::path::Path, log_dir: &std::path::Path) -> Vec<String> {
        vec![
            program.display().to_string(),
            "--tool".into(),
            self.tool().into(),
            "--target-processes".into(),
            "all".into(),
            "--log-file".into(),
            log_dir
                .join(format!("{LOG_PREFIX}%p.log"))
                .display()
                .to_string(),
        ]
    }
}

/// The tool's logs in the trial directory are `sanitizer-<pid>.log`.
pub const LOG_PREFIX: &str = "sanitizer-";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_sanitizers() {
        for s in Sanitizer::ALL {
            assert_eq!(Sanitizer::from_name(&s.name()), Some(s));
        }
        assert_eq!(Sanitizer::from_name("compute_sanitizer_leakcheck"), None);
        assert_eq!(Sanitizer::from_name("memcheck"), None);
    }
}
