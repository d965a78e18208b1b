//! `aorta explain`: for any node of a compiled target (a trial, a cell, an artifact), its key,
//! what the key is made of, and whether the next build would run (or render) it and why.

use crate::artifacts::{cell_key, ArtifactRecord, KeyBasis};
use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use crate::session::Session;
use aorta_graph::{Artifact, Key};
use aorta_store::{LocalStore, Lookup};
use aorta_trial::TrialRecord;
use std::fmt::Write;

/// Which node to explain.
#[derive(Debug, Clone)]
pub enum NodeQuery {
    Trial { cell: String, index: u32 },
    Cell { cell: String },
    Artifact(Artifact),
}

/// Whether the next build would do the node's work.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "store", content = "why", rename_all = "snake_case")]
pub enum Status {
    /// In the store: reused (a trial) or restored without rendering (an artifact).
    Cached(String),
    /// Not in the store: the next build executes or renders it, for this reason.
    WillRun(String),
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Explanation {
    pub target: String,
    pub node: String,
    /// None when it depends on trials that have not run yet (an artifact, a stop_after cell).
    pub key: Option<Key>,
    pub status: Status,
    /// Further lines: a cell's trials, an artifact's inputs.
    pub details: Vec<String>,
    /// A trial's key inputs: the canonical JSON hashed after the domain tag, pretty-printed
    /// (in `--json`, embedded as JSON).
    #[serde(serialize_with = "as_json")]
    pub key_inputs: Option<String>,
}

/// JSON text written as the JSON it is (not as a string of it).
fn as_json<S: serde::Serializer>(
    text: &Option<String>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::Serialize;
    match text {
        Some(t) => serde_json::from_str::<Box<serde_json::value::RawValue>>(t)
            .map_err(serde::ser::Error::custom)?
            .serialize(s),
        None => s.serialize_none(),
    }
}

impl std::fmt::Display for Explanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        let _ = writeln!(out, "target:  {}", self.target);
        let _ = writeln!(out, "node:    {}", self.node);
        let _ = writeln!(
            out,
            "key:     {}",
            self.key.as_ref().map_or_else(
                || "(known once its inputs have run)".to_string(),
                Key::to_string
            )
        );
        let _ = match &self.status {
            Status::Cached(why) => writeln!(out, "store:   cached ({why})"),
            Status::WillRun(why) => writeln!(out, "store:   not cached: {why}"),
        };
        for d in &self.details {
            let _ = writeln!(out, "  {d}");
        }
        if let Some(j) = &self.key_inputs {
            let _ = writeln!(
                out,
                "inputs (the canonical JSON hashed after the domain tag \"aorta.trial-key\\0\"):"
            );
            let _ = writeln!(out, "{j}");
        }
        f.write_str(&out)
    }
}

/// A trial's record in the store, or why there is none.
/// A reusable record comes with its result id (what a cell folds).
fn trial_status(
    store: Option<&LocalStore>,
    inputs: &crate::traced::Inputs,
    key: &Key,
) -> (Option<(TrialRecord, String)>, Status) {
    let Some(store) = store else {
        return (
            None,
            Status::WillRun("no store yet: the next build executes it".into()),
        );
    };
    match store.lookup_as::<TrialRecord>(key) {
        Ok(Lookup::Hit(m)) => {
            let why = format!(
                "executed {}, {:.2} s, verdict {}",
                m.created_at,
                m.exec_seconds,
                m.trial.verdict.as_str()
            );
            match crate::reuse::reusable(&m.trial, store, inputs) {
                Ok(()) => {
                    let id = crate::execute::result_id(key, m.exec_seconds, &m.trial);
                    (Some((m.trial, id)), Status::Cached(why))
                }
                Err(not) => (
                    None,
                    Status::WillRun(format!(
                        "stored ({why}), but {not}: the next build executes it"
                    )),
                ),
            }
        }
        Ok(Lookup::Miss) => (None, Status::WillRun("the next build executes it".into())),
        Ok(Lookup::Corrupt { reason }) => (
            None,
            Status::WillRun(format!(
                "the entry is corrupt ({reason}); the next build re-executes it"
            )),
        ),
        Err(e) => (
            None,
            Status::WillRun(format!("the store cannot be read ({e})")),
        ),
    }
}

/// Cell `ci` as the next build would see it: every planned trial with its store status, and
/// what the cell folds: the trials in order, stop_after applied to the cached verdicts as the
/// scheduler applies it (none when the cell cannot run), or the first trial that must run first.
struct CellView<'a> {
    trials: Vec<(u32, &'a Key, Status)>,
    // String: the line `explain` prints for a cell that cannot be folded yet.
    fold: std::result::Result<Vec<(u32, String)>, String>,
}

fn cell_view<'a>(
    c: &'a Compiled,
    store: Option<&LocalStore>,
    inputs: &crate::traced::Inputs,
    ci: usize,
) -> CellView<'a> {
    let mut trials = Vec::new();
    let mut fold = Ok(Vec::new());
    let (mut events, mut stopped) = (0, cell_error(c).is_some());
    for i in c.dag.cell_trials(ci) {
        let p = &c.planned()[i];
        let (record, status) = trial_status(store, inputs, &p.key);
        trials.push((p.index, &p.key, status));
        let Ok(folded) = fold.as_mut() else { continue };
        if stopped {
            continue;
        }
        let Some((record, id)) = record else {
            fold = Err(format!(
                "trial {} of cell {} must run first",
                p.index, c.recipe.cells[ci].name
            ));
            continue;
        };
        folded.push((p.index, id));
        if let Some(s) = c.recipe.stop_after {
            if record.verdict == s.event_verdict {
                events += 1;
                stopped = events >= s.events;
            }
        }
    }
    CellView { trials, fold }
}

fn cell_error(c: &Compiled) -> Option<String> {
    match &c.workload {
        Some(Err(e)) => Some(e.to_string()),
        _ => None,
    }
}

impl Session {
    /// The doctor's verdict the next build's pages would show: the record a probe recipe's run
    /// directory holds (it is reused by every build; a workload recipe's is new each build, so
    /// it holds none until the build's own preflight writes one).
    fn recorded_verdict(&self, c: &Compiled) -> Option<aorta_doctor::NodeVerdict> {
        if c.recipe.mode != aorta_recipe::Mode::Probe {
            return None;
        }
        let output = self
            .opts
            .output
            .clone()
            .unwrap_or_else(|| crate::build::default_output(&c.recipe));
        let output = std::path::absolute(&output).unwrap_or(output);
        let run_dir = crate::outputs::run_dir_for(&c.recipe, &output, "");
        crate::doctor::verdict_for_run(None, &run_dir)
    }

    pub fn explain(&self, c: &Compiled, query: &NodeQuery) -> Result<Explanation> {
        let store = self.existing_store()?;
        let store = store.as_deref();
        let inputs = self.inputs(c)?;
        let hashing = |e: aorta_graph::HashError| EngineError::infra(e.to_string());
        match query {
            NodeQuery::Trial { cell, index } => {
                let ci = c.cell_index(cell)?;
                let p = c.trial(ci, *index)?;
                let (record, status) = trial_status(store, &inputs, &p.key);
                let json = p.inputs.canonical_json().map_err(hashing)?;
                let pretty = serde_json::from_str::<serde_json::Value>(&json)
                    .and_then(|v| serde_json::to_string_pretty(&v))
                    .unwrap_or(json);
                let mut details = Vec::new();
                let stored = match (&record, store) {
                    (Some((r, _)), _) => Some(r.clone()),
                    (None, Some(s)) => match s.lookup_as::<TrialRecord>(&p.key) {
                        Ok(Lookup::Hit(m)) => Some(m.trial),
                        _ => None,
                    },
                    (None, None) => None,
                };
                if let (Some(r), Some(s)) = (&stored, store) {
                    details.extend(inputs.describe(s, r.inputs.as_ref()));
                }
                if c.dag.users(&p.key) > 1 {
                    details.push(format!("shared by {} cells with the same resolved env: it runs once for all of them", c.dag.users(&p.key)));
                }
                Ok(Explanation {
                    target: c.label.clone(),
                    node: format!("cell {cell} trial {index}"),
                    key: Some(p.key.clone()),
                    status,
                    details,
                    key_inputs: Some(pretty),
                })
            }
            NodeQuery::Cell { cell } => {
                let ci = c.cell_index(cell)?;
                let view = cell_view(c, store, &inputs, ci);
                let missing = view
                    .trials
                    .iter()
                    .filter(|t| matches!(t.2, Status::WillRun(_)))
                    .count();
                let mut details: Vec<String> = view
                    .trials
                    .iter()
                    .map(|(index, key, st)| {
                        format!(
                            "trial {index}: {key} {}",
                            if matches!(st, Status::Cached(_)) {
                                "cached"
                            } else {
                                "not cached"
                            }
                        )
                    })
                    .collect();
                let error = cell_error(c);
                if let Some(e) = &error {
                    details.insert(0, format!("the cell cannot run: {e}"));
                }
                let (key, status) = match view.fold {
                    Ok(folded) => {
                        let key = cell_key(ci, cell, &folded, error.as_deref()).map_err(hashing)?;
                        (Some(key), Status::Cached(format!("all {} trial(s) it folds are cached; the next build executes none", folded.len())))
                    }
                    Err(first) => (None, Status::WillRun(format!("{missing} trial(s) not cached ({first}); the next build executes them and folds the cell again"))),
                };
                Ok(Explanation {
                    target: c.label.clone(),
                    node: format!("cell {cell}"),
                    key,
                    status,
                    details,
                    key_inputs: None,
                })
            }
            NodeQuery::Artifact(a) => {
                if !c.dag.artifacts().any(|x| x == a) {
                    let names: Vec<String> = c.dag.artifacts().map(Artifact::path).collect();
                    return Err(EngineError::usage(
                        format!("{} has no artifact {}", c.label, a.path()),
                        format!("artifacts: {}", names.join(", ")),
                    ));
                }
                let error = cell_error(c);
                let deps = c.dag.artifact_cells(a).len();
                let mut folds = Vec::new();
                let mut blocked = None;
                // Only artifacts rendered from cells need the cells' folds.
                for ci in (0..c.recipe.cells.len()).filter(|_| deps > 0) {
                    match cell_view(c, store, &inputs, ci).fold {
                        Ok(folded) => folds.push((folded, error.as_deref())),
                        Err(first) => {
                            blocked = Some(first);
                            break;
                        }
                    }
                }
                let mut details = vec![format!(
                    "renderer version {} (aorta {})",
                    crate::RENDERER_VERSION,
                    env!("CARGO_PKG_VERSION")
                )];
                details.push(if deps > 0 && matches!(a, Artifact::ReportHtml) {
                    format!("rendered from the recipe, {deps} cell(s) and the environment snapshot")
                } else if deps > 0 {
                    format!("rendered from the recipe and {deps} cell(s)")
                } else if matches!(a, Artifact::EnvJson(_)) {
                    "rendered from the environment snapshot".into()
                } else {
                    "rendered from the recipe".into()
                });
                if let Some(first) = blocked {
                    let status = Status::WillRun(format!(
                        "its inputs change when trials run ({first}); the next build renders it"
                    ));
                    return Ok(Explanation {
                        target: c.label.clone(),
                        node: format!("artifact {}", a.path()),
                        key: None,
                        status,
                        details,
                        key_inputs: None,
                    });
                }
                let doctor = self.recorded_verdict(c);
                if let Some(v) = doctor.as_ref().filter(|_| a.shows_doctor()) {
                    details.push(format!(
                        "and the node's doctor verdict (doctor.json: {})",
                        v.summary_line()
                    ));
                }
                let key = KeyBasis::new(c, &folds, &[], doctor.as_ref())
                    .and_then(|b| b.key(a))
                    .map_err(hashing)?;
                let status = match store.map(|s| s.lookup_as::<ArtifactRecord>(&key)) {
                    Some(Ok(Lookup::Hit(m))) => Status::Cached(format!(
                        "rendered {}; the next build restores it without rendering",
                        m.created_at
                    )),
                    _ => Status::WillRun("the next build renders it".into()),
                };
                Ok(Explanation {
                    target: c.label.clone(),
                    node: format!("artifact {}", a.path()),
                    key: Some(key),
                    status,
                    details,
                    key_inputs: None,
                })
            }
        }
    }
}
