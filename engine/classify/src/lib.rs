//! The failure classifier: its catalogue (tiers, detector ids, built-in log patterns) and the
//! five-tier classifier for subprocess trials (AORTA §5).
//!
//! This crate is the single source of truth for detector ids, so recipes (which may disable
//! detectors), `aorta sweep list-patterns` and the classifier agree on one vocabulary.
//!
//! The executor runs the child and gathers an [`Observation`]; [`classify`] turns it into a
//! [`Classification`] (pure, apart from reading the log files and trial directory):
//!
//! | tier | looks at | ids |
//! |---|---|---|
//! | 1 | exit status, signal, timeout, exec failure, `core` files | `tier1:*` |
//! | 2 | the executor's hang flag, dropped on a clean exit | `tier2:hang` |
//! | 3 | dmesg text ([`collect_dmesg`]), GPU counters before/after | `tier3:*` |
//! | 4 | [`TIER4_PATTERNS`] over the whole stdout and stderr, prefiltered by literals | `tier4:*` |
//! | 5 | the recipe's [`CustomDetector`]s over the same streams, in bounded time ([`PATTERN_TIME_BUDGET`], [`CUSTOM_TIME_BUDGET`], [`BACKTRACKING_SPAN_BYTES`]) | `custom:<id>` |
//!
//! [`classify_logs`] judges logs that already exist (`aorta classify`) by Tiers 3–5.
//!
//! Unlike AORTA, logs are streamed whole (AORTA scanned only their first 10 MiB); the exact
//! guarantee is in the `stream` module: a match of at most [`LOG_OVERLAP_BYTES`] is never
//! missed because of chunking.
//!
//! What the classifier notes beside the verdict goes into the typed
//! [`aorta_trial::Capture`]: named regex groups (custom patterns' and `xid`, `xid_pci` from the
//! first NVIDIA Xid in dmesg) in its string map, and `tier2_hang_latched_but_reconciled`,
//! `classifier_error` (unreadable logs, regex runtime errors, a contained panic),
//! `disabled_detectors` and `disabled_detector_tiers` (the effective disables, sorted, when the
//! recipe set any) as fields. The JSON is AORTA's flat dict.

mod budget;
mod catalogue;
mod classify;
mod disables;
mod dmesg;
mod kmsg;
mod logs;
mod model;
mod patterns;
mod sanitizer;
mod scan;
mod stream;
mod tier1;
mod tier3;
mod verdict;

pub use aorta_trial::Verdict;
pub use budget::{BACKTRACKING_SPAN_BYTES, CUSTOM_TIME_BUDGET, PATTERN_TIME_BUDGET};
pub use catalogue::{
    detector_ids, Pattern, PatternFlags, Tier, Trigger, PATTERN_LIBRARY_VERSION,
    TIER3_LOG_PATTERNS, TIER4_PATTERNS,
};
pub use classify::classify;
pub use disables::{DisableError, Disables};
pub use dmesg::{collect_dmesg, DmesgError, DMESG_TIMEOUT};
pub use kmsg::{KernelLog, KmsgError, Mark as KernelLogMark};
pub use logs::{
    classify_logs, Finding, LogClassification, LogInput, LogKind, LogReadError, LogSummary,
    Severity, MAX_FINDING_TEXT,
};
pub use model::{
    compile_custom_regex, Classification, ClassifierConfig, CustomDetector, DetectorError,
    GpuSnapshot, Observation, OnMatch, REGEX_BACKTRACK_LIMIT,
};
pub use patterns::CONDITION_EVAL_BUDGET;
pub use sanitizer::{
    parse_rocjitsu_logs, parse_sanitizer_logs, ROCJITSU_PARSER_VERSION, SANITIZER_PARSER_VERSION,
};
pub use tier3::{MAX_DMESG_BYTES, VRAM_GROWTH_THRESHOLD_MIB};
pub use verdict::{
    failure_type, ENV_FILE_VALIDATION_DETECTOR, ENV_FILE_VALIDATION_FAILED, ERROR_DETECTOR_IDS,
    MISSING_PASS_SIGNAL,
};

/// Bytes read (and, at least, newly scanned) per window when streaming a log.
pub const LOG_CHUNK_BYTES: usize = stream::DEFAULT_WINDOWS.chunk;
/// Bytes each window shares with the previous one: the longest match chunking cannot hide.
pub const LOG_OVERLAP_BYTES: usize = stream::DEFAULT_WINDOWS.overlap;
