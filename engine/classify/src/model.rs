//! What the classifier consumes ([`Observation`], [`ClassifierConfig`]) and produces
//! ([`Classification`]).
//!
//! The executor fills an `Observation` after the child has exited; the recipe crate turns its
//! validated `custom_patterns` into [`CustomDetector`]s once, at load, so the classifier never
//! compiles or validates user input itself.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aorta_condition::{Condition, ConditionError};
use aorta_trial::{Capture, Verdict};

use crate::disables::Disables;

/// Backtracking budget for custom regexes (the recipe crate uses the same value): a hostile
/// pattern gives up with a runtime error instead of hanging the classifier.
pub const REGEX_BACKTRACK_LIMIT: usize = 1_000_000;

/// One GPU-metrics snapshot, taken before spawn or after exit. Each field is `None` when the
/// source could not report it (a missing value never fires a detector).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuSnapshot {
    /// VRAM in use, summed over the GPUs the trial may touch, in MiB.
    pub vram_used_mib: Option<i64>,
    /// A throttle-event counter or status; only its increase matters.
    pub throttle: Option<i64>,
}

/// Everything the executor observed about one finished trial.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Exit status; negative = killed by that signal (Python's convention), -1 with `timed_out`.
    pub exit_code: i32,
    /// The executor killed the trial at its deadline.
    pub timed_out: bool,
    /// The command was never launched (ENOENT, EACCES, ENOEXEC ...).
    pub exec_failed: bool,
    pub walltime_sec: f64,
    /// The child's stdout / stderr logs, streamed by Tiers 4 and 5. `None` = no such stream;
    /// a path that cannot be read is recorded in `capture.classifier_error`.
    pub stdout_log: Option<PathBuf>,
    pub stderr_log: Option<PathBuf>,
    /// The trial directory, searched (non-recursively) for `core` / `core.*`.
    pub trial_dir: PathBuf,
    /// Further directories searched the same way, e.g. the child's working directory (AORTA
    /// only looked in the trial dir, where the child never runs: §12.3.2).
    pub core_dirs: Vec<PathBuf>,
    /// When the trial started: a core file in `core_dirs` older than this is some earlier
    /// crash's and does not count (the trial directory is new for each trial). `None`: any.
    pub started_at: Option<std::time::SystemTime>,
    /// The executor's hang monitor latched.
    pub hang_detected: bool,
    /// ... and aorta killed the tree for it: the exit signal is aorta's, so Tier 1 reports no
    /// status of its own (as with a timeout) and Tier 2's hang is the failure.
    pub killed_on_hang: bool,
    pub peak_vram_mib: Option<i64>,
    pub gpu_pre: Option<GpuSnapshot>,
    pub gpu_post: Option<GpuSnapshot>,
    /// Kernel log since shortly before the trial ([`crate::collect_dmesg`]); `None` when it
    /// could not be collected (no dmesg detectors then).
    pub dmesg_text: Option<String>,
    /// Tier-3 ids already found elsewhere (e.g. by the workload's own kernel-log scan).
    pub tier3_extra: Vec<String>,
}

/// What a custom pattern does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnMatch {
    /// The trial fails (`custom:<id>` in `failure_detectors_fired`).
    #[default]
    Fail,
    /// Listed in `warn_detectors_fired`; the verdict is unaffected.
    Warn,
    /// Only its named groups reach `capture`.
    Info,
}

/// A validated Tier-5 detector (a recipe's `custom_patterns[]` entry).
#[derive(Debug, Clone)]
pub struct CustomDetector {
    /// The recipe id, without the `custom:` prefix.
    pub id: String,
    /// Compiled with [`REGEX_BACKTRACK_LIMIT`] (see [`compile_custom_regex`]).
    pub regex: fancy_regex::Regex,
    pub condition: Option<Condition>,
    pub on_match: OnMatch,
    /// The trial fails with `meta:missing_pass_signal` unless this pattern fired.
    pub required_for_pass: bool,
    /// The regex has look-around, back-references or another construct the linear-time engine
    /// lacks, so one search can cost more than linear time: it is handed bounded spans
    /// (`crate::budget`). Set by [`CustomDetector::new`].
    pub(crate) backtracks: bool,
}

/// Why a recipe's custom detector is rejected: its regex or its condition.
#[derive(Debug, thiserror::Error)]
pub enum DetectorError {
    #[error("regex does not compile: {0}")]
    Regex(#[source] Box<fancy_regex::Error>),
    #[error("condition: {0}")]
    Condition(#[source] ConditionError),
}

impl CustomDetector {
    /// Compiles a detector from recipe text: the regex with [`compile_custom_regex`], the
    /// condition with the sandbox's parser. The error says which of the two was rejected.
    pub fn new(
        id: impl Into<String>,
        regex: &str,
        condition: Option<&str>,
        on_match: OnMatch,
        required_for_pass: bool,
    ) -> Result<CustomDetector, DetectorError> {
        let regex = compile_custom_regex(regex).map_err(DetectorError::Regex)?;
        let condition = condition
            .map(Condition::parse)
            .transpose()
            .map_err(DetectorError::Condition)?;
        Ok(CustomDetector {
            id: id.into(),
            backtracks: crate::budget::backtracks(regex.as_str()),
            regex,
            condition,
            on_match,
            required_for_pass,
        })
    }

    /// The detector id used in verdict lists and disables: `custom:<id>`.
    pub fn detector_id(&self) -> String {
        format!("custom:{}", self.id)
    }
}

/// Compiles a custom regex (Python `re` dialect via fancy-regex) with the backtracking budget.
/// `seek`, as for the built-ins: a look-around pattern first skips to where its
/// look-around-free approximation can match instead of starting the backtracking VM at every
/// position (`(?<!b)c` over 50 MiB without a `c`: 2 s of VM time before, a linear scan now).
pub fn compile_custom_regex(pattern: &str) -> Result<fancy_regex::Regex, Box<fancy_regex::Error>> {
    fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(REGEX_BACKTRACK_LIMIT)
        .seek(true)
        .build()
        .map_err(Box::new)
}

/// The recipe's classifier knobs.
#[derive(Debug, Clone)]
pub struct ClassifierConfig {
    /// Tier-5 detectors in declaration order.
    pub custom: Vec<CustomDetector>,
    /// `tier3_vram_growth: false` in the recipe skips the VRAM-growth check.
    pub tier3_vram_growth: bool,
    pub disables: Disables,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            custom: Vec::new(),
            tier3_vram_growth: true,
            disables: Disables::default(),
        }
    }
}

/// The classifier's judgement of one trial (AORTA §5.9's output).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Classification {
    pub verdict: Verdict,
    /// Detectors that make the trial `fail`, in tier order T1 → T2 → T3 → T4 → custom → meta.
    pub failure_detectors_fired: Vec<String>,
    /// `tier1:timeout` and `tier1:exec_failed`: the trial could not be judged.
    pub error_detectors_fired: Vec<String>,
    /// Advisory detectors (Tier-3 VRAM growth, custom `warn`); never change the verdict.
    pub warn_detectors_fired: Vec<String>,
    /// Named groups of fired custom patterns plus classifier breadcrumbs (see the crate docs).
    pub capture: Capture,
    /// Wall time spent per tier (`tier1` … `tier5`), in milliseconds; 0.0 for skipped tiers.
    pub tier_durations_ms: BTreeMap<String, f64>,
}
