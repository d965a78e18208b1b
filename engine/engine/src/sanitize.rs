//! Sanitizer cells (`compute_sanitizer_<tool>` on a probe recipe's diagnostic axis): the
//! command runs under the tool, with its timeout and hang window scaled, and the tool's
//! report is read into the trial's record. A hazard fails the trial (detector
//! `sanitizer:<tool>`); a tool that cannot be found makes the trial an error that says so,
//! never a silent pass. docs/diagnostics.md.

use aorta_classify::Classification;
use aorta_exec::ProcessSpec;
use aorta_registry::{Sanitizer, SANITIZER_LOG_PREFIX, SANITIZER_TIMEOUT_FACTOR};
use aorta_trial::{FailureDetail, SanitizerReport, TrialRecord, Verdict, WorkloadResult};
use std::path::Path;

/// The failure type and error detector of a trial whose sanitizer is not installed.
pub const UNAVAILABLE: &str = "sanitizer_unavailable";

/// Puts the tool in front of the command; the record's empty report marks the trial as
/// sanitized until [`judge`] fills it.
pub fn wrap(tool: Sanitizer, p: &mut ProcessSpec, dir: &Path) -> Result<SanitizerReport, String> {
    let program = aorta_exec::find_cuda_tool("compute-sanitizer", Sanitizer::PROGRAM_VAR)?;
    let mut argv = tool.argv_prefix(&program, dir);
    argv.append(&mut p.argv);
    p.argv = argv;
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
    let mut logs: Vec<(String, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name.starts_with(SANITIZER_LOG_PREFIX) && name.ends_with(".log"))
                .then(|| std::fs::read_to_string(e.path()).ok().map(|t| (name, t)))
                .flatten()
        })
        .collect();
    logs.sort();
    let report = aorta_classify::parse_sanitizer_logs(
        &tool,
        logs.iter().map(|(n, t)| (n.as_str(), t.as_str())),
    );
    let hint = if logs.is_empty() {
        if launched {
            cls.error_detectors_fired.push("sanitizer:no_report".into());
            if cls.verdict == Verdict::Pass {
                cls.verdict = Verdict::Error;
            }
        }
        Some(format!("{tool}: compute-sanitizer wrote no report"))
    } else if report.errors > 0 {
        // First: the most specific finding is the one matrix.md's "Top failure" names (the
        // program's own exit code often follows from it, e.g. a kernel memcheck aborted).
        cls.failure_detectors_fired
            .insert(0, format!("sanitizer:{tool}"));
        if cls.verdict == Verdict::Pass {
            cls.verdict = Verdict::Fail;
        }
        Some(report.summary())
    } else {
        None
    };
    record.sanitizer = Some(report);
    hint
}
