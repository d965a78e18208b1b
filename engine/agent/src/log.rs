//! `agent_log.jsonl`: one JSON object per line, `{…payload, ts, type}`, append-only, mode
//! 0600 (it may quote the command and the model's words). Each line is written with one
//! `write` on an `O_APPEND` descriptor and synced, so a `kill -9` leaves at worst a torn last
//! line, which reading skips (AORTA's rule for malformed lines). The log is what lets a
//! killed agent continue: the proposer's steps are replayed from it instead of asked again.

use crate::policy::AgentStep;
use crate::stats::{BaselineStep, CandidateStep, Counts, Design};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub const LOG_FILE: &str = "agent_log.jsonl";

/// Declares [`Event`] and, per variant, a payload struct that serde reads and writes flat.
/// The file's shape is AORTA's `{"type", "ts", …payload}`; it is not read back through an
/// internally tagged enum because serde buffers those, and buffered numbers cannot be read
/// under serde_json's arbitrary_precision (which starlark enables for the whole build).
macro_rules! events {
    ($($(#[$vdoc:meta])* $variant:ident = $kind:literal { $($(#[$doc:meta])* $field:ident : $ty:ty),* $(,)? }),* $(,)?) => {
        /// What happened, in order; the `type` of each line names it.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Event {
            $($(#[$vdoc])* $variant { $($(#[$doc])* $field: $ty),* }),*
        }

        mod payload {
            use super::*;
            $(
                #[derive(Serialize, Deserialize)]
                pub struct $variant { $(pub $field: $ty),* }
            )*
        }

        impl Event {
            fn line(&self, ts: &str) -> serde_json::Result<Vec<u8>> {
                match self {
                    $(Event::$variant { $($field),* } => serde_json::to_vec(&Line {
                        kind: $kind,
                        ts,
                        payload: &payload::$variant { $($field: $field.clone()),* },
                    })),*
                }
            }

            fn parse(kind: &str, line: &[u8]) -> Option<Event> {
                match kind {
                    $($kind => {
                        let p: payload::$variant = serde_json::from_slice(line).ok()?;
                        Some(Event::$variant { $($field: p.$field),* })
                    })*
                    _ => None,
                }
            }
        }
    };
}

events! {
    SessionStart = "session_start" {
        ticket: Option<String>,
        ticket_slug: String,
        argv: Vec<String>,
        symptom: Option<String>,
        llm_backend: String,
        /// Identifies "the same arguments": a re-run with the same fingerprint resumes.
        fingerprint: String,
        design: Design,
    },
    /// A re-run found an earlier session with the same arguments and replays its steps.
    Resume = "resume" { replayed_steps: usize },
    BaselineLook = "baseline_look" {
        counts: Counts,
        interval: (f64, f64),
        step: BaselineStep,
    },
    LlmStep = "llm_step" { iteration: u32, step: AgentStep },
    MitigationTried = "mitigation_tried" { mitigation: String },
    CandidateLook = "candidate_look" {
        mitigation: String,
        counts: Counts,
        step: CandidateStep,
    },
    CandidateVerdict = "candidate_verdict" {
        mitigation: String,
        verdict: String,
        confound: String,
    },
    IterationComplete = "iteration_complete" { iterations_completed: u32 },
    Converged = "converged" { mitigation: String },
    Outcome = "outcome" { outcome: crate::outcome::Outcome, detail: Option<String> },
}

/// One line as written: the payload's fields follow `type` and `ts`.
#[derive(Serialize)]
struct Line<'a, P: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    ts: &'a str,
    #[serde(flatten)]
    payload: &'a P,
}

/// What every line has, read first to pick the payload's type.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: String,
    ts: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub event: Event,
    pub ts: String,
}

pub struct AgentLog {
    path: PathBuf,
    file: File,
}

impl AgentLog {
    /// Opens (creating, mode 0600) `<run_dir>/agent_log.jsonl` for appending. Only a regular
    /// file: a symlink there is refused, never followed into some other file, and a FIFO or
    /// device is refused at once, never waited on (`aorta_fsutil::open_append_regular`).
    pub fn open(run_dir: &Path) -> std::io::Result<AgentLog> {
        let path = run_dir.join(LOG_FILE);
        let file = aorta_fsutil::open_append_regular(&path, 0o600)?;
        Ok(AgentLog { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event as one line and syncs it; the mode is forced back to 0600 each
    /// time, as AORTA does, in case someone loosened it.
    pub fn append(&mut self, event: Event) -> std::io::Result<()> {
        let ts = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let mut line = event.line(&ts).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()?;
        // On the open descriptor: a name swapped for a symlink since is not followed.
        self.file
            .set_permissions(std::fs::Permissions::from_mode(0o600))
    }
}

/// Every well-formed entry of a log (missing file, or anything but a regular file: none; a FIFO
/// is not waited on). Malformed lines are skipped.
pub fn read(run_dir: &Path) -> Vec<Entry> {
    let Ok(f) = aorta_fsutil::open_regular(&run_dir.join(LOG_FILE)) else {
        return Vec::new();
    };
    BufReader::new(f)
        .split(b'\n')
        .map_while(Result::ok)
        .filter_map(|l| {
            let head: Head = serde_json::from_slice(&l).ok()?;
            Some(Entry {
                event: Event::parse(&head.kind, &l)?,
                ts: head.ts,
            })
        })
        .collect()
}

/// The proposer steps of the latest session with this fingerprint, in order: what a resumed
/// run replays. A later session with other arguments ends the chance to resume.
pub fn steps_to_replay(entries: &[Entry], fingerprint: &str) -> Vec<AgentStep> {
    let start = entries.iter().rposition(
        |e| matches!(&e.event, Event::SessionStart { fingerprint: f, .. } if f == fingerprint),
    );
    let Some(start) = start else {
        return Vec::new();
    };
    let later = &entries[start + 1..];
    if later
        .iter()
        .any(|e| matches!(e.event, Event::SessionStart { .. }))
    {
        return Vec::new();
    }
    later
        .iter()
        .filter_map(|e| match &e.event {
            Event::LlmStep { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_with_numbers_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = AgentLog::open(dir.path()).unwrap();
        let events = vec![
            Event::BaselineLook {
                counts: Counts::new(3, 8),
                interval: (0.1, 0.7),
                step: BaselineStep::More(16),
            },
            Event::LlmStep {
                iteration: 2,
                step: AgentStep {
                    confidence: 0.5,
                    ..AgentStep::stop("unknown", "x")
                },
            },
            Event::CandidateLook {
                mitigation: "xnack".into(),
                counts: Counts::new(0, 4),
                step: CandidateStep::More {
                    p_value: 0.25,
                    next: 8,
                },
            },
        ];
        for e in &events {
            log.append(e.clone()).unwrap();
        }
        let back: Vec<Event> = read(dir.path()).into_iter().map(|e| e.event).collect();
        assert_eq!(back, events);
    }

    #[test]
    fn torn_lines_are_skipped_and_the_mode_is_0600() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = AgentLog::open(dir.path()).unwrap();
        log.append(Event::MitigationTried {
            mitigation: "xnack".into(),
        })
        .unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(b"{\"type\":\"mitigation_tr")
            .unwrap();
        let mode = std::fs::metadata(log.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let entries = read(dir.path());
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].event,
            Event::MitigationTried {
                mitigation: "xnack".into()
            }
        );
    }
}
