//! GPU sanitizers as diagnostic-axis entries: a cell whose diagnostic is
//! `compute_sanitizer_<tool>` runs its command under NVIDIA's compute-sanitizer, one whose
//! diagnostic is `rocjitsu_<tool>` under RocJITsu's combined Waitcheck + ConSan hook (AORTA
//! 0.3.0's ROCm sanitizers). They are not mitigations (a mitigation is an env-var bundle,
//! builtins.rs): they change how the command is run, so they live in a table of their own
//! that only the diagnostic axis reads.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// One sanitizer tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sanitizer {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
    /// RocJITsu ConSan (Record/Replay): data races on LDS between waves, as AORTA 0.3.0 runs
    /// it (`rocjitsu_sanitizers/consan.py::run_consan`).
    Consan,
    /// RocJITsu Waitcheck, the combined hook's stage that checks every loaded code object for
    /// a missing `s_wait` before a result is used.
    Waitcheck,
}

/// Whose sanitizer: decides how the command is wrapped and where the report is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// compute-sanitizer: a program in front of the command, logs in `sanitizer-<pid>.log`.
    Cuda,
    /// RocJITsu: a library the HSA runtime loads (`HSA_TOOLS_LIB`), its report on the
    /// process's own stdout and stderr.
    Rocm,
}

/// A sanitized trial's timeout and hang window are this many times the recipe's: the tools
/// instrument every memory access (NVIDIA documents slowdowns of 10x to 100x on kernels; a
/// small program measured 1.6x to 4x of wall time on the H100, docs/diagnostics.md).
pub const TIMEOUT_FACTOR: u32 = 20;

/// The combined Waitcheck + ConSan hook's file name (AORTA 0.3.0's `resolve_consan_hook`).
pub const ROCJITSU_HOOK: &str = "librocjitsu_dbi_hooks.so";

impl Sanitizer {
    pub const ALL: [Sanitizer; 6] = [
        Sanitizer::Memcheck,
        Sanitizer::Racecheck,
        Sanitizer::Synccheck,
        Sanitizer::Initcheck,
        Sanitizer::Consan,
        Sanitizer::Waitcheck,
    ];

    /// The tool's own name: compute-sanitizer's `--tool` value, AORTA 0.3.0's sanitizer name
    /// (`sanitizer_plan.sanitizers: [consan, waitcheck]`).
    pub fn tool(self) -> &'static str {
        match self {
            Sanitizer::Memcheck => "memcheck",
            Sanitizer::Racecheck => "racecheck",
            Sanitizer::Synccheck => "synccheck",
            Sanitizer::Initcheck => "initcheck",
            Sanitizer::Consan => "consan",
            Sanitizer::Waitcheck => "waitcheck",
        }
    }

    pub fn vendor(self) -> Vendor {
        match self {
            Sanitizer::Consan | Sanitizer::Waitcheck => Vendor::Rocm,
            _ => Vendor::Cuda,
        }
    }

    /// The diagnostic-axis name: `compute_sanitizer_<tool>`, or `rocjitsu_<tool>` after AORTA
    /// 0.3.0's module (`aorta.instrumentation.rocjitsu_sanitizers`).
    pub fn name(self) -> String {
        format!("{}{}", self.vendor().prefix(), self.tool())
    }

    pub fn from_name(name: &str) -> Option<Sanitizer> {
        Sanitizer::ALL
            .into_iter()
            .find(|s| name.strip_prefix(s.vendor().prefix()) == Some(s.tool()))
    }

    pub fn description(self) -> &'static str {
        match self {
            Sanitizer::Memcheck => "Runs the command under compute-sanitizer memcheck: out-of-bounds and misaligned global/shared/local accesses, invalid frees, CUDA API errors, with kernel, source line and allocation (CUDA; slow)",
            Sanitizer::Racecheck => "Runs the command under compute-sanitizer racecheck: shared-memory data races (read/write hazards between threads of a block) with the two source lines (CUDA; slow)",
            Sanitizer::Synccheck => "Runs the command under compute-sanitizer synccheck: barriers reached by divergent threads, invalid __syncwarp masks (CUDA; slow)",
            Sanitizer::Initcheck => "Runs the command under compute-sanitizer initcheck: reads of device global memory never written (CUDA; slow)",
            Sanitizer::Consan => "Runs the command under RocJITsu's ConSan (Record/Replay, strict): LDS data races between waves of every code object loaded; fails closed when its coverage is incomplete (ROCm; slow)",
            Sanitizer::Waitcheck => "Runs the command under RocJITsu's combined hook and judges its Waitcheck stage: a result used before the s_wait that orders it, in every code object loaded (ROCm; slow)",
        }
    }

    /// The variable that points at compute-sanitizer when it is not on `PATH` or under the
    /// toolkit.
    pub const PROGRAM_VAR: &'static str = "AORTA_COMPUTE_SANITIZER";

    /// The words before the command: one log per process (`%p`), every child process
    /// checked (a launch script's python too), the tool's own exit code left alone (aorta
    /// judges the report, docs/diagnostics.md). Empty for RocJITsu, which wraps through the
    /// environment ([`Sanitizer::rocjitsu_env`]).
    pub fn argv_prefix(self, program: &Path, log_dir: &Path) -> Vec<String> {
        if self.vendor() == Vendor::Rocm {
            return Vec::new();
        }
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

    /// The variables AORTA 0.3.0's `run_consan` pins over the inherited environment: the hook
    /// loaded by the HSA runtime, no auto-registration, Record/Replay, the strict policy its
    /// shipped recipes choose, and log level 3 (the per-site `coverage_site` lines the
    /// coverage cross-check needs are printed only at the debug level).
    pub fn rocjitsu_env(hook: &Path) -> Vec<(&'static str, String)> {
        vec![
            ("HSA_TOOLS_LIB", hook.display().to_string()),
            ("HSA_TOOLS_DISABLE_REGISTER", "1".into()),
            ("RJ_CONSAN_MODE", "record-replay".into()),
            ("RJ_CONSAN_POLICY", "strict".into()),
            ("RJ_CONSAN_LOG", "3".into()),
        ]
    }

    /// What `aorta build --dry-run` says the command runs under.
    pub fn runs_under(self) -> String {
        match self.vendor() {
            Vendor::Cuda => format!("compute-sanitizer --tool {}", self.tool()),
            Vendor::Rocm => format!(
                "RocJITsu {} (HSA_TOOLS_LIB={ROCJITSU_HOOK}, RJ_CONSAN_MODE=record-replay, RJ_CONSAN_POLICY=strict)",
                self.tool()
            ),
        }
    }
}

impl Vendor {
    fn prefix(self) -> &'static str {
        match self {
            Vendor::Cuda => "compute_sanitizer_",
            Vendor::Rocm => "rocjitsu_",
        }
    }

    /// What the tool is, for messages: "compute-sanitizer", "RocJITsu's hook".
    pub fn tool_name(self) -> &'static str {
        match self {
            Vendor::Cuda => "compute-sanitizer",
            Vendor::Rocm => "RocJITsu's hook",
        }
    }
}

/// The combined hook as AORTA 0.3.0 finds it (`consan.py::resolve_consan_hook`):
/// `$ROCJITSU_PREBUILT/lib/` (an unpacked prebuilt sanitizer bundle) first, then
/// `$ROCJITSU_BUILD/lib/rocjitsu/src/rocjitsu/hooks/` (a CMake build tree). There is no
/// `PATH` for a library. `Err` says where it looked and how to provide it.
pub fn find_rocjitsu_hook() -> Result<PathBuf, String> {
    let layouts = [
        ("ROCJITSU_PREBUILT", "lib"),
        ("ROCJITSU_BUILD", "lib/rocjitsu/src/rocjitsu/hooks"),
    ];
    let mut looked = Vec::new();
    for (var, sub) in layouts {
        let root = std::env::var(var).unwrap_or_default();
        let root = root.trim();
        if root.is_empty() {
            looked.push(format!("${var}/{sub} (unset)"));
            continue;
        }
        let candidate = Path::new(root).join(sub).join(ROCJITSU_HOOK);
        if candidate.is_file() {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    Err(format!(
        "{ROCJITSU_HOOK} not found (looked in {}): RocJITsu's prebuilt sanitizer bundle ships it; set ROCJITSU_PREBUILT to the unpacked bundle, or ROCJITSU_BUILD to a rocm-systems build tree",
        looked.join("; ")
    ))
}

/// compute-sanitizer's logs in the trial directory are `sanitizer-<pid>.log`.
pub const LOG_PREFIX: &str = "sanitizer-";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_sanitizers() {
        for s in Sanitizer::ALL {
            assert_eq!(Sanitizer::from_name(&s.name()), Some(s));
        }
        assert_eq!(
            Sanitizer::from_name("rocjitsu_consan"),
            Some(Sanitizer::Consan)
        );
        assert_eq!(Sanitizer::from_name("compute_sanitizer_leakcheck"), None);
        assert_eq!(Sanitizer::from_name("compute_sanitizer_consan"), None);
        assert_eq!(Sanitizer::from_name("rocjitsu_memcheck"), None);
        assert_eq!(Sanitizer::from_name("memcheck"), None);
        assert_eq!(Sanitizer::from_name("consan"), None);
    }

    #[test]
    fn rocjitsu_wraps_through_the_environment_only() {
        let p = Sanitizer::Consan.argv_prefix(Path::new("/x"), Path::new("/d"));
        assert!(p.is_empty());
        let env = Sanitizer::rocjitsu_env(Path::new("/b/lib/librocjitsu_dbi_hooks.so"));
        assert!(env.contains(&("RJ_CONSAN_MODE", "record-replay".into())));
        assert!(env.contains(&("HSA_TOOLS_LIB", "/b/lib/librocjitsu_dbi_hooks.so".into())));
    }
}
