//! Post-hoc classification (`aorta classify`): logs that already exist — a failed CI job's
//! output, a colleague's paste, a node's `dmesg` — judged by the detectors trials use.
//!
//! Output logs go through Tier 4 (the same prefiltered scan, `scan.rs`) and the recipe's
//! Tier-5 patterns; kernel logs (`dmesg`, `journalctl -k`, with or without timestamps) through
//! Tier 3's kernel-log patterns, which are unanchored and so ignore whatever prefix a line has.
//! The recipe's disables apply as in a trial. Each log is streamed in the trials' windows
//! (memory about 2 MiB per log, whatever its size) and each detector reports its first matching
//! line in each log.
//!
//! What a finished trial has and a log does not — exit status, hang monitor, GPU counters — is
//! absent: Tiers 1 and 2 and the counter checks never fire here, and custom conditions see
//! `exit_code` 0, `walltime_sec` 0 and no `peak_vram_mib`.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::ops::ControlFlow;

use serde::Serialize;

use crate::budget::{Budget, Meter, DEFAULT_BUDGET};
use crate::catalogue::{Tier, PATTERN_LIBRARY_VERSION};
use crate::model::{ClassifierConfig, CustomDetector, Observation, OnMatch};
use crate::patterns::{first_firing, State};
use crate::scan::TIER4;
use crate::stream::{scan_numbered, Window, WindowParams, DEFAULT_WINDOWS};
use crate::tier3::DMESG_REGEXES;
use crate::verdict::MISSING_PASS_SIGNAL;

/// Longest line text kept in a finding; the rest is cut (at a character boundary) and marked.
pub const MAX_FINDING_TEXT: usize = 500;

/// What a log holds, which decides the tiers that read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogKind {
    /// A process's stdout/stderr: Tiers 4 and 5.
    Output,
    /// `dmesg` / `journalctl -k` text: Tier 3.
    Kernel,
}

/// One log to classify: a name for reports (a path, or `-` for stdin) and its bytes.
pub struct LogInput<'a> {
    pub name: String,
    pub kind: LogKind,
    pub reader: Box<dyn Read + 'a>,
}

/// How a fired detector bears on the verdict (a custom pattern's `on_match`; built-ins fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Fail,
    Warn,
    Info,
}

/// A detector that fired in one log, at its first matching line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub detector: String,
    pub severity: Severity,
    pub log: String,
    /// 1-based; `None` for `meta:missing_pass_signal`, which is an absence.
    pub line: Option<u64>,
    /// The matching line (at most [`MAX_FINDING_TEXT`] bytes).
    pub text: String,
    /// The match's named groups (an Xid number, a custom pattern's captures).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub capture: BTreeMap<String, String>,
}

/// One log as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogSummary {
    pub name: String,
    pub kind: LogKind,
    /// Bytes read: the whole log unless every detector fired before its end.
    pub bytes_read: u64,
}

/// The result of [`classify_logs`]: the typed record `aorta classify --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogClassification {
    pub pattern_library: &'static str,
    pub logs: Vec<LogSummary>,
    /// Per log in input order, by line.
    pub findings: Vec<Finding>,
    /// Regex runtime errors and retired conditions (a trial's `capture.classifier_error`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl LogClassification {
    /// A failing or warning detector fired (`info` patterns only capture).
    pub fn fired(&self) -> bool {
        self.findings.iter().any(|f| f.severity != Severity::Info)
    }
}

/// A log that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {name}: {source}")]
pub struct LogReadError {
    pub name: String,
    #[source]
    pub source: io::Error,
}

/// Classifies `inputs` in order with `cfg` (the recipe's custom patterns and disables).
pub fn classify_logs<'a>(
    inputs: impl IntoIterator<Item = LogInput<'a>>,
    cfg: &ClassifierConfig,
) -> Result<LogClassification, LogReadError> {
    classify_logs_with(inputs, cfg, DEFAULT_WINDOWS, DEFAULT_BUDGET)
}

/// [`classify_logs`] with its window geometry and time budget (one budget for all the logs).
pub(crate) fn classify_logs_with<'a>(
    inputs: impl IntoIterator<Item = LogInput<'a>>,
    cfg: &ClassifierConfig,
    params: WindowParams,
    budget: Budget,
) -> Result<LogClassification, LogReadError> {
    let mut meter = Meter::new(budget);
    let d = &cfg.disables;
    let custom: Vec<&CustomDetector> = cfg
        .custom
        .iter()
        .filter(|c| !d.detector_disabled(&c.detector_id()))
        .collect();
    let mut out = LogClassification {
        pattern_library: PATTERN_LIBRARY_VERSION,
        logs: Vec::new(),
        findings: Vec::new(),
        errors: Vec::new(),
    };
    let mut required_seen = vec![false; custom.len()];
    let mut any_output = false;
    for input in inputs {
        let mut reader = Counting {
            inner: input.reader,
            bytes: 0,
        };
        let mut found = Vec::new();
        let result = match input.kind {
            LogKind::Kernel if !d.tier_disabled(Tier::Tier3) => {
                kernel(&mut reader, cfg, params, &mut found, &mut out.errors)
            }
            LogKind::Output => {
                any_output = true;
                let t4 = !d.tier_disabled(Tier::Tier4);
                let t5: &[&CustomDetector] = if d.tier_disabled(Tier::Tier5) {
                    &[]
                } else {
                    &custom
                };
                output(
                    &mut reader,
                    cfg,
                    (t4, t5),
                    params,
                    &mut meter,
                    &mut found,
                    &mut out.errors,
                )
                .map(|seen| mark_seen(&mut required_seen, &seen))
            }
            LogKind::Kernel => Ok(()),
        };
        result.map_err(|source| LogReadError {
            name: input.name.clone(),
            source,
        })?;
        found.sort_by_key(|(line, order, ..)| (*line, *order));
        out.findings.extend(found.into_iter().map(
            |(line, _, detector, severity, text, capture)| Finding {
                detector,
                severity,
                log: input.name.clone(),
                line: Some(line),
                text,
                capture,
            },
        ));
        out.logs.push(LogSummary {
            name: input.name,
            kind: input.kind,
            bytes_read: reader.bytes,
        });
    }
    let missing = custom
        .iter()
        .zip(&required_seen)
        .any(|(c, seen)| c.required_for_pass && !seen);
    if any_output && missing && !d.tier_disabled(Tier::Tier5) {
        out.findings.push(Finding {
            detector: MISSING_PASS_SIGNAL.into(),
            severity: Severity::Fail,
            log: String::new(),
            line: None,
            text: String::new(),
            capture: BTreeMap::new(),
        });
    }
    Ok(out)
}

fn mark_seen(all: &mut [bool], seen: &[bool]) {
    for (a, s) in all.iter_mut().zip(seen) {
        *a |= s;
    }
}

/// `(line, catalogue order, detector, severity, text, capture)` before it names its log.
type Raw = (
    u64,
    usize,
    String,
    Severity,
    String,
    BTreeMap<String, String>,
);

fn raw(w: &Window<'_>, pos: usize, order: usize, id: String, sev: Severity) -> Raw {
    let mut text = w.line_at(pos);
    let mut cut = String::new();
    if text.len() > MAX_FINDING_TEXT {
        let mut end = MAX_FINDING_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text = &text[..end];
        cut.push('…');
    }
    (
        w.line_of(pos),
        order,
        id,
        sev,
        format!("{text}{cut}"),
        BTreeMap::new(),
    )
}

fn groups(
    re: &fancy_regex::Regex,
    caps: &fancy_regex::Captures<'_, str>,
) -> BTreeMap<String, String> {
    re.capture_names()
        .flatten()
        .filter_map(|n| {
            caps.name(n)
                .map(|m| (n.to_string(), m.as_str().to_string()))
        })
        .collect()
}

/// Tier 3's kernel-log patterns over one kernel log.
fn kernel(
    reader: impl Read,
    cfg: &ClassifierConfig,
    params: WindowParams,
    found: &mut Vec<Raw>,
    errors: &mut Vec<String>,
) -> io::Result<()> {
    let mut live: Vec<bool> = DMESG_REGEXES
        .iter()
        .map(|(id, re)| {
            if let Err(e) = re {
                errors.push(format!("PatternError: {id}: {e}"));
            }
            re.is_ok() && !cfg.disables.detector_disabled(id)
        })
        .collect();
    scan_numbered(reader, params, |w| {
        for (i, (id, re)) in DMESG_REGEXES.iter().enumerate() {
            let (true, Ok(re)) = (live[i], re) else {
                continue;
            };
            match re.captures_from_pos(w.text, w.start) {
                Ok(Some(caps)) => {
                    live[i] = false;
                    let pos = caps.get(0).map_or(w.start, |m| m.start());
                    let mut r = raw(w, pos, i, (*id).to_string(), Severity::Fail);
                    r.5 = groups(re, &caps);
                    found.push(r);
                }
                Ok(None) => {}
                Err(e) => {
                    live[i] = false;
                    errors.push(format!("RegexRuntimeError: {id}: {e}"));
                }
            }
        }
        if live.contains(&true) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    })
}

/// Tier 4 (when `tier4`) and the custom patterns over one output log. Returns which custom
/// patterns fired, for `required_for_pass`.
fn output(
    reader: impl Read,
    cfg: &ClassifierConfig,
    (tier4, custom): (bool, &[&CustomDetector]),
    params: WindowParams,
    meter: &mut Meter,
    found: &mut Vec<Raw>,
    errors: &mut Vec<String>,
) -> io::Result<Vec<bool>> {
    let lib = &*TIER4;
    let mut scan = lib.scan();
    let mut t4_done = !tier4;
    let mut state: Vec<State> = custom.iter().map(|_| State::default()).collect();
    let obs = Observation::default();
    let base = lib.ids().len();
    scan_numbered(reader, params, |w| {
        if !t4_done {
            t4_done = scan.window(w.text, w.start).is_break();
            let hits: Vec<_> = scan.take_hits().collect();
            for (i, start, end) in hits {
                let id = lib.ids()[i];
                if cfg.disables.detector_disabled(id) {
                    continue;
                }
                let mut r = raw(w, start, i, id.to_string(), Severity::Fail);
                if let Some(re) = scan.regex(i) {
                    if let Ok(Some(caps)) = re.captures_from_pos(&w.text[..end], start) {
                        r.5 = groups(re, &caps);
                    }
                }
                found.push(r);
            }
        }
        for (i, (d, st)) in custom.iter().zip(state.iter_mut()).enumerate() {
            if st.fired || st.retired {
                continue;
            }
            if let Some((groups, pos)) = first_firing(d, w.text, w.start, &obs, st, meter, errors) {
                st.fired = true;
                let sev = match d.on_match {
                    OnMatch::Fail => Severity::Fail,
                    OnMatch::Warn => Severity::Warn,
                    OnMatch::Info => Severity::Info,
                };
                let mut r = raw(w, pos, base + i, d.detector_id(), sev);
                r.5 = groups;
                found.push(r);
            }
        }
        if t4_done && state.iter().all(|st| st.fired || st.retired) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    Ok(state.iter().map(|st| st.fired).collect())
}

/// Counts the bytes a reader hands out.
struct Counting<R> {
    inner: R,
    bytes: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{classify, CustomDetector, Disables};

    fn input(name: &str, kind: LogKind, text: &str) -> LogInput<'static> {
        LogInput {
            name: name.into(),
            kind,
            reader: Box::new(io::Cursor::new(text.as_bytes().to_vec())),
        }
    }

    fn ids_lines(c: &LogClassification) -> Vec<(&str, Option<u64>)> {
        c.findings
            .iter()
            .map(|f| (f.detector.as_str(), f.line))
            .collect()
    }

    const TRAIN: &str = "step 1 loss=2.5\nstep 2 loss=2.4\n[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 9\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";

    #[test]
    fn findings_name_the_first_matching_line_at_any_window_geometry() {
        let log: String = (0..500)
            .map(|i| format!("step {i} ok\n"))
            .collect::<String>()
            + TRAIN;
        let cfg = ClassifierConfig::default();
        let big = classify_logs([input("train.log", LogKind::Output, &log)], &cfg).unwrap();
        let tiny = WindowParams {
            chunk: 50,
            overlap: 120,
        };
        let small = classify_logs_with(
            [input("train.log", LogKind::Output, &log)],
            &cfg,
            tiny,
            DEFAULT_BUDGET,
        )
        .unwrap();
        assert_eq!(big, small);
        assert_eq!(
            ids_lines(&big),
            [
                ("tier4:python_traceback", Some(503)),
                ("tier4:cuda_oom", Some(505))
            ]
        );
        assert!(big.fired());
        assert_eq!(big.findings[1].text, TRAIN.lines().nth(4).unwrap());
        assert_eq!(big.logs[0].bytes_read, log.len() as u64);
    }

    #[test]
    fn the_same_ids_fire_as_in_a_trial() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{TRAIN}NCCL error: unhandled system error\nloss: nan\n");
        let path = dir.path().join("stdout.log");
        std::fs::write(&path, &text).unwrap();
        let obs = Observation {
            stdout_log: Some(path),
            ..Default::default()
        };
        let cfg = ClassifierConfig::default();
        let trial = classify(&obs, &cfg).failure_detectors_fired;
        let post = classify_logs([input("x", LogKind::Output, &text)], &cfg).unwrap();
        let mut ids: Vec<String> = post.findings.iter().map(|f| f.detector.clone()).collect();
        ids.sort();
        let mut want = trial.clone();
        want.sort();
        assert_eq!(ids, want);
        assert!(trial.len() >= 4, "{trial:?}");
    }

    #[test]
    fn kernel_logs_with_and_without_timestamps() {
        let dmesg = "[    0.000000] Linux version 6.8.0\n[ 8812.118220] NVRM: Xid (PCI:0000:18:00): 79, pid=4121, GPU has fallen off the bus.\n";
        let journal = "Dec 03 12:00:01 node7 kernel: amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!\nDec 03 12:00:02 node7 kernel: pcieport 0000:00:01.1: AER: Fatal error received\n";
        let plain = "amdgpu: SDMA hang detected\n";
        let c = classify_logs(
            [
                input("dmesg", LogKind::Kernel, dmesg),
                input("journal", LogKind::Kernel, journal),
                input("plain", LogKind::Kernel, plain),
            ],
            &ClassifierConfig::default(),
        )
        .unwrap();
        assert_eq!(
            ids_lines(&c),
            [
                ("tier3:nvidia_xid", Some(2)),
                ("tier3:amdgpu_reset", Some(1)),
                ("tier3:pcie_aer_fatal", Some(2)),
                ("tier3:sdma_timeout", Some(1)),
            ]
        );
        assert_eq!(c.findings[0].capture["xid"], "79");
        // Kernel patterns do not read output logs, nor output patterns kernel logs.
        let c = classify_logs(
            [
                input("out", LogKind::Output, plain),
                input("k", LogKind::Kernel, TRAIN),
            ],
            &ClassifierConfig::default(),
        )
        .unwrap();
        assert!(c.findings.is_empty() && !c.fired());
    }

    #[test]
    fn custom_patterns_conditions_disables_and_required_signals() {
        let loss = CustomDetector::new(
            "loss_spike",
            r"loss=(?P<loss>[\d.]+)",
            Some("float(capture['loss']) > 2.45"),
            OnMatch::Warn,
            false,
        )
        .unwrap();
        let done = CustomDetector::new("done", r"training done", None, OnMatch::Info, true);
        let mut cfg = ClassifierConfig {
            custom: vec![loss, done.unwrap()],
            ..Default::default()
        };
        let run = |cfg: &ClassifierConfig| {
            classify_logs([input("t", LogKind::Output, TRAIN)], cfg).unwrap()
        };
        let c = run(&cfg);
        assert_eq!(
            ids_lines(&c),
            [
                ("custom:loss_spike", Some(1)),
                ("tier4:python_traceback", Some(3)),
                ("tier4:cuda_oom", Some(5)),
                ("meta:missing_pass_signal", None),
            ]
        );
        assert_eq!(c.findings[0].capture["loss"], "2.5");
        assert_eq!(c.findings[0].severity, Severity::Warn);
        cfg.disables = Disables::default();
        cfg.disables.add_tier(Tier::Tier5);
        cfg.disables.add_detector("tier4:cuda_oom".into());
        assert_eq!(ids_lines(&run(&cfg)), [("tier4:python_traceback", Some(3))]);
        cfg.disables.add_tier(Tier::Tier4);
        assert!(!run(&cfg).fired());
    }

    #[test]
    fn a_failing_reader_is_an_error_naming_the_log() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let e = classify_logs(
            [LogInput {
                name: "bad.log".into(),
                kind: LogKind::Output,
                reader: Box::new(Broken),
            }],
            &ClassifierConfig::default(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "cannot read bad.log: disk on fire");
    }
}
