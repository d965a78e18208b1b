//! Tiers 4 and 5 — regexes over the child's stdout and stderr (AORTA §5.5, §5.6).
//!
//! Each stream is scanned whole, window by window ([`crate::stream`]); stdout first, then
//! stderr, as separate texts (AORTA joined them, which let a match straddle the seam). Every
//! detector fires at most once per trial.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use aorta_condition::Vars;
use aorta_trial::Capture;

use crate::budget::{span_end, span_restart, Cut, Meter};
use crate::model::{CustomDetector, Observation, OnMatch};
use crate::scan::TIER4;
use crate::stream::{scan_windows, WindowParams};

/// How many times one custom pattern's condition may be evaluated without firing before the
/// pattern is retired. AORTA tried only the first match per 10 MiB window; aorta tries every
/// match (a condition like `float(capture['loss']) > 9` must see the 1000th loss line too),
/// and this budget keeps a pattern matching everywhere with an always-false condition cheap.
pub const CONDITION_EVAL_BUDGET: u32 = 100_000;

/// Runs `visit` over every window of the stdout then the stderr log, until it breaks.
/// A log that cannot be read is reported in `errors`; what was scanned before the error counts.
fn scan_logs(
    obs: &Observation,
    params: WindowParams,
    errors: &mut Vec<String>,
    mut visit: impl FnMut(&str, usize) -> ControlFlow<()>,
) {
    let mut stopped = false;
    for (name, path) in [("stdout", &obs.stdout_log), ("stderr", &obs.stderr_log)] {
        let Some(path) = path else { continue };
        if stopped {
            return;
        }
        let result = File::open(path).and_then(|f| {
            scan_windows(f, params, |w, s| {
                let flow = visit(w, s);
                stopped = flow.is_break();
                flow
            })
        });
        if let Err(e) = result {
            errors.push(io_error(name, path, &e));
        }
    }
}

fn io_error(stream: &str, path: &Path, e: &std::io::Error) -> String {
    format!("IoError: reading {stream} log {}: {e}", path.display())
}

/// Tier 4: built-in pattern ids that matched, in catalogue order (prefiltered: `scan.rs`).
pub(crate) fn tier4(
    obs: &Observation,
    params: WindowParams,
    errors: &mut Vec<String>,
) -> Vec<String> {
    let lib = &*TIER4;
    let mut scan = lib.scan();
    scan_logs(obs, params, errors, |w, s| scan.window(w, s));
    for (id, e) in scan.broken() {
        errors.push(format!("PatternError: {id}: {e}"));
    }
    lib.ids()
        .iter()
        .zip(scan.fired())
        .filter(|(_, hit)| **hit)
        .map(|(id, _)| (*id).to_string())
        .collect()
}

/// What Tier 5 found. `capture` holds the merged named groups (later firings overwrite).
#[derive(Debug, Default)]
pub(crate) struct Tier5 {
    pub fail: Vec<String>,
    pub warn: Vec<String>,
    pub missing_required: bool,
}

/// One custom pattern's progress through a scan.
#[derive(Default)]
pub(crate) struct State {
    pub fired: bool,
    evals: u32,
    pub retired: bool,
    /// Time spent in its searches and conditions ([`crate::budget`]).
    spent: Duration,
}

/// Tier 5 over `detectors` (disabled ones already removed), in declaration order per window.
/// A match fires when its condition (if any) is true; a false condition or a runtime error
/// moves on to the pattern's next match.
pub(crate) fn tier5(
    obs: &Observation,
    detectors: &[&CustomDetector],
    params: WindowParams,
    meter: &mut Meter,
    capture: &mut Capture,
    errors: &mut Vec<String>,
) -> Tier5 {
    let mut out = Tier5::default();
    if detectors.is_empty() {
        return out;
    }
    let mut state: Vec<State> = detectors.iter().map(|_| State::default()).collect();
    let mut notes: Vec<String> = Vec::new();
    scan_logs(obs, params, errors, |w, s| {
        for (d, st) in detectors.iter().zip(state.iter_mut()) {
            if st.fired || st.retired {
                continue;
            }
            if let Some((groups, _)) = first_firing(d, w, s, obs, st, meter, &mut notes) {
                st.fired = true;
                for (k, v) in groups {
                    capture.groups.insert(k, v);
                }
                match d.on_match {
                    OnMatch::Fail => out.fail.push(d.detector_id()),
                    OnMatch::Warn => out.warn.push(d.detector_id()),
                    OnMatch::Info => {}
                }
            }
        }
        if state.iter().all(|st| st.fired || st.retired) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    errors.extend(notes);
    out.missing_required = detectors
        .iter()
        .zip(&state)
        .any(|(d, st)| d.required_for_pass && !st.fired);
    out
}

/// Why a search for a pattern's next match stopped without one.
enum Stop {
    Regex(fancy_regex::Error),
    Cut(Cut),
}

/// The first match of `d` in `w` starting at or after `pos` (context before it visible), with
/// its time charged to the pattern and the scan. A backtracking pattern searches bounded spans
/// (`crate::budget`), and the budget is checked before every search.
fn next_match<'t>(
    d: &CustomDetector,
    w: &'t str,
    pos: usize,
    st: &mut State,
    meter: &mut Meter,
) -> Result<Option<fancy_regex::Captures<'t, str>>, Stop> {
    let span = meter.budget.span;
    let mut a = pos;
    loop {
        meter.check(st.spent).map_err(Stop::Cut)?;
        let b = if d.backtracks && a < w.len() {
            span_end(w, a, span)
        } else {
            w.len()
        };
        let start = Instant::now();
        let found = d.regex.captures_from_pos(&w[..b], a);
        meter.charge(&mut st.spent, start);
        match found {
            Ok(Some(caps)) => return Ok(Some(caps)),
            Ok(None) if b >= w.len() => return Ok(None),
            Ok(None) => a = span_restart(w, a, b, span),
            Err(e) => return Err(Stop::Regex(e)),
        }
    }
}

/// The named groups and start of the first match in `w[s..]` whose condition holds, if any.
/// A pattern whose time is spent ([`Meter`]) is retired with a note naming it.
pub(crate) fn first_firing(
    d: &CustomDetector,
    w: &str,
    s: usize,
    obs: &Observation,
    st: &mut State,
    meter: &mut Meter,
    notes: &mut Vec<String>,
) -> Option<(BTreeMap<String, String>, usize)> {
    let mut pos = s;
    while pos <= w.len() {
        let caps = match next_match(d, w, pos, st, meter) {
            Ok(Some(c)) => c,
            Ok(None) => return None,
            Err(Stop::Regex(e)) => {
                notes.push(format!("RegexRuntimeError: {}: {e}", d.detector_id()));
                return None;
            }
            Err(Stop::Cut(cut)) => {
                st.retired = true;
                notes.push(meter.note(&d.detector_id(), cut, st.spent));
                return None;
            }
        };
        let groups: BTreeMap<String, String> = d
            .regex
            .capture_names()
            .flatten()
            .filter_map(|name| {
                caps.name(name)
                    .map(|m| (name.to_string(), m.as_str().to_string()))
            })
            .collect();
        let start = caps.get(0).map_or(pos, |m| m.start());
        let Some(cond) = &d.condition else {
            return Some((groups, start));
        };
        let vars = Vars {
            capture: &groups,
            exit_code: i64::from(obs.exit_code),
            walltime_sec: obs.walltime_sec,
            peak_vram_mib: obs.peak_vram_mib,
        };
        let clock = Instant::now();
        let holds = cond.evaluate(&vars).unwrap_or(false);
        meter.charge(&mut st.spent, clock);
        if holds {
            return Some((groups, start));
        }
        st.evals += 1;
        if st.evals >= CONDITION_EVAL_BUDGET {
            st.retired = true;
            notes.push(format!(
                "ConditionBudgetExceeded: {}: condition false for {CONDITION_EVAL_BUDGET} matches; pattern retired",
                d.detector_id()
            ));
            return None;
        }
        // Next match: after this one, or one character on for an empty match.
        let m = caps.get(0)?;
        pos = if m.end() > m.start() {
            m.end()
        } else {
            w[m.start()..]
                .chars()
                .next()
                .map_or(w.len() + 1, |c| m.start() + c.len_utf8())
        };
    }
    None
}
