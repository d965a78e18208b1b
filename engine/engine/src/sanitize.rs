//! Sanitizer cells (`compute_sanitizer_<tool>` or `rocjitsu_<tool>` on a probe recipe's
//! diagnostic axis): the command runs under the tool, with its timeout and hang window
//! scaled, and the tool's report is read into the trial's record. A hazard fails the trial
//! (detector `sanitizer:<tool>`); a tool that cannot be found makes the trial an error that
//! says so, never a silent pass; a report that does not cover the run (RocJITsu's coverage
//! gate) makes it an error too. docs/diagnostics.md.

use aorta_classify::Classification;
use aorta_exec::ProcessSpec;
use aorta_registry::{Sanitizer, SanitizerVendor, SANITIZER_LOG_PREFIX, SANITIZER_TIMEOUT_FACTOR};
use aorta_trial::{FailureDetail, SanitizerReport, TrialRecord, Verdict, WorkloadResult};
use std::path::Path;

/// The failure type and error detector of a trial whose sanitizer is not installed.
pub const UNAVAILABLE: &str = "sanitizer_unavailable";

/// Puts the tool in front of the command (compute-sanitizer) or into its environment
/// (RocJITsu's hook, pinned over inherited values as AORTA 0.3.0 does); the record's empty
/// report marks the trial as sanitized until [`judge`] fills it.
pub fn wrap(tool: Sanitizer, p: &mut ProcessSpec, dir: &Path) -> Result<SanitizerReport, String> {
    match tool.vendor() {
        SanitizerVendor::Cuda => {
            let program = aorta_exec::find_cuda_tool("compute-sanitizer", Sanitizer::PROGRAM_VAR)?;
            let mut argv = tool.argv_prefix(&program, dir);
            argv.append(&mut p.argv);
            p.argv = argv;
        }
        SanitizerVendor::Rocm => {
            let hook = aorta_registry::find_rocjitsu_hook()?;
            for (k, v) in Sanitizer::rocjitsu_env(&hook) {
                p.env_remove.retain(|r| r != k);
                p.env.insert(k.to_string(), v);
            }
        }
    }
    p.timeout = p.timeout.map(|t| t * SANITIZER_TIMEOUT_FACTOR);
    if let Some(h) = p.hang.as_mut() {
        h.window *= SANITIZER_TIMEOUT_FACTOR;
        h.grace *= SANITIZER_TIMEOUT_FACTOR;
    }
    Ok(SanitizerReport {
        tool: tool.tool().into(),
        errors: 0,
        hazards: Vec::new(),
        logs: Vec::new(),
        complete: false,
        gaps: Vec::new(),
    })
}

/// The record of a sanitizer trial that could not start: not applicable here, and why.
pub fn unavailable(mut record: TrialRecord, dir: &Path, reason: String) -> TrialRecord {
    let message = format!("not applicable: {reason}");
    let _ = std::fs::write(dir.join("stderr.log"), format!("aorta: {message}\n"));
    record.verdict = Verdict::Error;
    record.exit_code = 127;
    record.error_detectors_fired = vec!["sanitizer:unavailable".into()];
    record.failure_type = Some(UNAVAILABLE.into());
    record.result = WorkloadResult {
        failure_count: 1,
        failure_details: vec![FailureDetail {
            error: Some(message.clone()),
            ..FailureDetail::of_kind(UNAVAILABLE)
        }],
        main_work_started: Some(false),
        executed_iterations: Some(0),
        configured_iterations: Some(1),
        ..Default::default()
    };
    record.error_message = Some(message);
    record
}

/// Reads the tool's logs into the record and the verdict: hazards fail the trial; no report
/// at all from a command that ran leaves it an error. Returns the line matrix.md quotes.
pub fn judge(
    record: &mut TrialRecord,
    cls: &mut Classification,
    dir: &Path,
    launched: bool,
) -> Option<String> {
    let tool = record.sanitizer.as_ref()?.tool.clone();
    let rocm = Sanitizer::ALL
        .into_iter()
        .find(|s| s.tool() == tool)
        .is_some_and(|s| s.vendor() == SanitizerVendor::Rocm);
    // compute-sanitizer writes its own logs; RocJITsu's hook prints into the process's.
    let wanted = |name: &str| match rocm {
        true => name == "stdout.log" || name == "stderr.log",
        false => name.starts_with(SANITIZER_LOG_PREFIX) && name.ends_with(".log"),
    };
    let mut logs: Vec<(String, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let text = match (wanted(&name), rocm) {
                (false, _) => None,
                // A workload's own output need not be UTF-8; the hook's lines are.
                (true, true) => std::fs::read(e.path())
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned()),
                (true, false) => std::fs::read_to_string(e.path()).ok(),
            };
            text.map(|t| (name, t))
        })
        .collect();
    logs.sort();
    let named = logs.iter().map(|(n, t)| (n.as_str(), t.as_str()));
    let report = match rocm {
        true => aorta_classify::parse_rocjitsu_logs(&tool, named),
        false => aorta_classify::parse_sanitizer_logs(&tool, named),
    };
    let hint = if report.logs.is_empty() {
        if launched {
            cls.error_detectors_fired.push("sanitizer:no_report".into());
            if cls.verdict == Verdict::Pass {
                cls.verdict = Verdict::Error;
            }
        }
        Some(match rocm {
            true => format!(
                "{tool}: RocJITsu's hook printed nothing (HSA_TOOLS_LIB not loaded by the HSA runtime?)"
            ),
            false => format!("{tool}: compute-sanitizer wrote no report"),
        })
    } else if report.errors > 0 {
        // First: the most specific finding is the one matrix.md's "Top failure" names (the
        // program's own exit code often follows from it, e.g. a kernel memcheck aborted).
        cls.failure_detectors_fired
            .insert(0, format!("sanitizer:{tool}"));
        if cls.verdict == Verdict::Pass {
            cls.verdict = Verdict::Fail;
        }
        Some(report.summary())
    } else if !report.gaps.is_empty() {
        // No finding, but the tool did not see the whole run: AORTA 0.3.0 fails it closed.
        cls.error_detectors_fired
            .push("sanitizer:incomplete".into());
        if cls.verdict == Verdict::Pass {
            cls.verdict = Verdict::Error;
        }
        Some(report.summary())
    } else {
        None
    };
    record.sanitizer = Some(report);
    hint
}
