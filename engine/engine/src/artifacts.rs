//! Cells and artifacts: the DAG's nodes after the trials. Each cell folds its trials' records;
//! each artifact (matrix.json, matrix.md, report.html, recipe.resolved.yaml, env.json) has a key that hashes
//! its inputs' keys and the renderer's version. An artifact already in the run directory under
//! its key is left alone; one the store holds is restored from it; only the rest is rendered
//! (and stored). So a rerun whose trials all hit renders nothing, and a renderer change
//! re-renders without re-running a trial.

use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use crate::outcome::{BuildOutcome, CellOutcome};
use crate::outputs::{RunIndex, RunPaths};
use crate::report_html::PendingEnvSection;
use crate::schedule::{Executed, TrialResult};
use aorta_graph::{hash_json, Artifact, HashError, Key};
use aorta_report::{CellStats, Matrix, RunInfo, SummaryOptions};
use aorta_store::{LocalStore, Lookup, Manifest};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Bump when any renderer's output changes for the same inputs: every cached artifact is
/// rendered again (trials are not re-run). 4: report.html's environment brief names the key
/// the trials were keyed by (under the recipe's `env_key` rules), not the default-rules key.
/// 6: the run's answer (each cell's call against the baseline) in every artifact. 7: the
/// summary leaves the `-v` tip to the CLI (which knows whether `-v` was given).
/// 8: report.html's matrix scrolls in its box; an agent run's page; a probe page's title.
/// 9: report.html's node-health section (aorta doctor's verdict, or "not checked") and each
/// trial's Xid linked to it.
pub const RENDERER_VERSION: u32 = 9;

const CELL_DOMAIN: &[u8] = b"aorta.cell\0";
const ARTIFACT_DOMAIN: &[u8] = b"aorta.artifact\0";
const RECIPE_DOMAIN: &[u8] = b"aorta.recipe\0";
const ENV_DOMAIN: &[u8] = b"aorta.env-record\0";
const DOCTOR_DOMAIN: &[u8] = b"aorta.doctor-verdict\0";

/// What the store records for an artifact (its bytes are the entry's one output).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArtifactRecord {
    pub artifact: String,
    pub renderer: u32,
    /// matrix.json only: what a fully cached rerun into the same run directory reports, so it
    /// needs neither the trial records nor a fold of the cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<RerunFacts>,
}

/// The outcome of a rebuild that finds every trial and artifact in place.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RerunFacts {
    pub run_dir: std::path::PathBuf,
    pub summary: String,
    pub incomplete: Option<String>,
    pub cells: Vec<CellOutcome>,
    /// The distinct traced-input lists (`inputs.json` digests) of the run's trials: a fully
    /// cached rebuild verifies them before it reports nothing to do.
    #[serde(default)]
    pub input_lists: Vec<String>,
    /// The run's answer, for `--json` on a fully cached rebuild.
    #[serde(default)]
    pub answer: Option<aorta_report::Answer>,
}

/// What a cell's key is made of: the results it folds, in trial order.
#[derive(Serialize)]
struct CellKeyInputs<'a> {
    cell: usize,
    name: &'a str,
    trials: &'a [(u32, String)],
    error: Option<&'a str>,
}

/// What an artifact's key is made of.
#[derive(Serialize)]
pub(crate) struct ArtifactKeyInputs<'a> {
    pub artifact: String,
    pub renderer: u32,
    pub aorta: &'static str,
    /// The resolved recipe's key.
    pub recipe: Option<&'a Key>,
    /// The cells' keys, in cell order.
    pub cells: Vec<&'a Key>,
    /// The run's warnings (trials that could not run).
    pub warnings: &'a [String],
    /// The environment record's key (env.json only).
    pub env: Option<&'a Key>,
    /// The doctor's verdict on the node (env.json, matrix.md, report.html), when the run has
    /// one: an input of what the node's pages say, never of a trial key. Left out when there
    /// is none, so a run without a preflight keeps the keys it had before there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doctor: Option<&'a Key>,
}

/// env.json: the environment record and, when the run has one, the doctor's verdict on the
/// node (a reader taking env.json as a snapshot ignores it: it is no field of the snapshot).
#[derive(Serialize)]
struct EnvJson<'a> {
    #[serde(flatten)]
    record: &'a crate::EnvRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    doctor: Option<&'a aorta_doctor::NodeVerdict>,
}

fn recipe_key(c: &Compiled) -> std::result::Result<Key, HashError> {
    hash_json(RECIPE_DOMAIN, "the resolved recipe", &*c.recipe)
}

/// The environment record's key: the snapshot's key and the fields that fed it. Not the whole
/// record: a fresh probe differs in `captured_at` and timings, and env.json documents the
/// snapshot that determined the trial keys, which those fields identify.
fn env_key(c: &Compiled) -> std::result::Result<Key, HashError> {
    hash_json(
        ENV_DOMAIN,
        "the environment record",
        &(&c.env.key.hash, &c.env.key.fields),
    )
}

/// A cell's key from the results it folds: `(trial index, result id)` in index order.
pub(crate) fn cell_key(
    cell: usize,
    name: &str,
    trials: &[(u32, String)],
    error: Option<&str>,
) -> std::result::Result<Key, HashError> {
    hash_json(
        CELL_DOMAIN,
        "a cell's results",
        &CellKeyInputs {
            cell,
            name,
            trials,
            error,
        },
    )
}

/// An artifact's key; its inputs are chosen by what the DAG says it depends on.
fn artifact_key(
    artifact: &Artifact,
    recipe: &Key,
    cells: &[Key],
    warnings: &[String],
    env: &Key,
    doctor: Option<&Key>,
) -> std::result::Result<Key, HashError> {
    let depends_on_cells = matches!(
        artifact,
        Artifact::MatrixJson | Artifact::MatrixMd | Artifact::ReportHtml
    );
    let depends_on_env = matches!(artifact, Artifact::EnvJson(_) | Artifact::ReportHtml);
    let shows_doctor = artifact.shows_doctor();
    let inputs = ArtifactKeyInputs {
        artifact: artifact.path(),
        renderer: RENDERER_VERSION,
        aorta: env!("CARGO_PKG_VERSION"),
        recipe: (!matches!(artifact, Artifact::EnvJson(_))).then_some(recipe),
        cells: if depends_on_cells {
            cells.iter().collect()
        } else {
            Vec::new()
        },
        warnings: if depends_on_cells { warnings } else { &[] },
        env: depends_on_env.then_some(env),
        doctor: doctor.filter(|_| shows_doctor),
    };
    hash_json(ARTIFACT_DOMAIN, "an artifact's inputs", &inputs)
}

/// What a cell folds: its `(trial index, result id)` in index order
/// ([`crate::schedule::TrialResult::result_id`]), and its cell error.
pub(crate) type CellFold<'a> = (Vec<(u32, String)>, Option<&'a str>);

/// Everything artifact keys are made of, hashed once: the recipe's and the environment
/// record's keys, every cell's key, the run's warnings, the doctor's verdict. The one place a
/// build, the cached-rebuild check and `explain` get artifact keys from.
pub(crate) struct KeyBasis<'w> {
    recipe: Key,
    env: Key,
    cells: Vec<Key>,
    warnings: &'w [String],
    doctor: Option<Key>,
}

impl<'w> KeyBasis<'w> {
    /// `cells`: every cell's fold, in cell order (empty when only artifacts that depend on no
    /// cell will be asked for); `doctor`: the verdict the run's pages show
    /// ([`crate::doctor::verdict_for_run`]).
    pub(crate) fn new(
        c: &Compiled,
        cells: &[CellFold],
        warnings: &'w [String],
        doctor: Option<&aorta_doctor::NodeVerdict>,
    ) -> std::result::Result<Self, HashError> {
        let cells = cells
            .iter()
            .enumerate()
            .map(|(i, (trials, error))| cell_key(i, &c.recipe.cells[i].name, trials, *error))
            .collect::<std::result::Result<_, _>>()?;
        Ok(KeyBasis {
            recipe: recipe_key(c)?,
            env: env_key(c)?,
            cells,
            warnings,
            doctor: doctor
                .map(|v| hash_json(DOCTOR_DOMAIN, "the doctor's verdict", v))
                .transpose()?,
        })
    }

    pub(crate) fn key(&self, artifact: &Artifact) -> std::result::Result<Key, HashError> {
        artifact_key(
            artifact,
            &self.recipe,
            &self.cells,
            self.warnings,
            &self.env,
            self.doctor.as_ref(),
        )
    }
}

fn hashing(e: HashError) -> EngineError {
    EngineError::infra(e.to_string())
}

fn render(
    artifact: &Artifact,
    c: &Compiled,
    run_dir: &std::path::Path,
    matrix: &Matrix,
    trial_keys: &[Vec<aorta_report::TrialRow>],
    report_env: &std::sync::Mutex<PendingEnvSection>,
) -> Result<Vec<u8>> {
    let bytes = match artifact {
        Artifact::MatrixJson => {
            let mut json = Vec::new();
            matrix
                .write_json(&mut json)
                .map_err(|e| EngineError::infra(format!("cannot render matrix.json: {e}")))?;
            json.push(b'\n');
            json
        }
        Artifact::MatrixMd => matrix.to_markdown().into_bytes(),
        Artifact::ReportHtml => {
            let pending =
                std::mem::take(&mut *report_env.lock().unwrap_or_else(|e| e.into_inner()));
            let env = pending.wait(c);
            let classifier = crate::bodies::classifier_config(&c.recipe).ok();
            let inputs = aorta_report::PageInputs {
                run_dir,
                argv: c.argv.as_deref(),
                trial_keys,
                classifier: classifier.as_ref(),
            };
            aorta_report::render_page(matrix, env, &inputs).into_bytes()
        }
        Artifact::ResolvedRecipe => aorta_report::resolved_recipe_yaml(&c.recipe).into_bytes(),
        Artifact::EnvJson(_) => {
            let record = EnvJson {
                record: &c.env,
                doctor: matrix.doctor.as_ref(),
            };
            let mut b = serde_json::to_vec_pretty(&record)
                .map_err(|e| EngineError::infra(format!("cannot render env.json: {e}")))?;
            b.push(b'\n');
            b
        }
    };
    Ok(bytes)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placed {
    Unchanged,
    Restored,
    Rendered,
}

/// Puts one artifact in place: left alone, restored from the store, or rendered and stored
/// (the caller records the last two in the run directory's index).
fn place(
    store: &LocalStore,
    run_dir: &std::path::Path,
    index: &RunIndex,
    artifact: &Artifact,
    key: &Key,
    rerun: Option<RerunFacts>,
    render: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Placed> {
    let rel = artifact.path();
    let dest = run_dir.join(&rel);
    if index.holds(&rel, key.as_str(), &dest) {
        return Ok(Placed::Unchanged);
    }
    let io = |what: &str, e: &dyn std::fmt::Display| {
        EngineError::infra(format!("cannot {what} {rel}: {e}"))
    };
    if let Ok(Lookup::Hit(m)) = store.lookup_as::<ArtifactRecord>(key) {
        if store.materialize(&m, run_dir).is_ok() {
            return Ok(Placed::Restored);
        }
    }
    let bytes = render()?;
    let blob = store.put_blob_bytes(&bytes).map_err(|e| io("store", &e))?;
    let mut m = Manifest::new(
        key.clone(),
        ArtifactRecord {
            artifact: rel.clone(),
            renderer: RENDERER_VERSION,
            rerun,
        },
    );
    m.outputs.insert(rel.clone(), blob);
    store.put_manifest(&m).map_err(|e| io("store", &e))?;
    crate::dirs::write_atomic(&dest, &bytes).map_err(|e| io("write", &e))?;
    Ok(Placed::Rendered)
}

/// Folds the cells, places every artifact and fills the outcome's summary and counts.
/// `doctor`: the verdict the run's pages show.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    store: &LocalStore,
    c: &Compiled,
    paths: &RunPaths,
    ex: &Executed,
    index: &mut RunIndex,
    outcome: &mut BuildOutcome,
    report_env: PendingEnvSection,
    doctor: Option<aorta_doctor::NodeVerdict>,
) -> Result<()> {
    let recipe = &c.recipe;
    let mut by_cell: Vec<Vec<&TrialResult>> = vec![Vec::new(); recipe.cells.len()];
    for r in &ex.results {
        by_cell[r.cell].push(r);
    }
    let mut cells = Vec::with_capacity(recipe.cells.len());
    let mut folds: Vec<CellFold> = Vec::with_capacity(recipe.cells.len());
    for (i, cell) in recipe.cells.iter().enumerate() {
        let error = ex.cell_errors.get(&i).cloned();
        let trials = by_cell[i]
            .iter()
            .map(|r| (r.index, r.result_id()))
            .collect();
        folds.push((trials, ex.cell_errors.get(&i).map(String::as_str)));
        let stats = CellStats::aggregate(
            cell,
            recipe,
            by_cell[i].iter().map(|r| &*r.record),
            error.clone(),
        );
        outcome.cells.push(CellOutcome {
            name: cell.name.clone(),
            trials: stats.trials,
            passed: stats.passed_count,
            errored: stats.error_count,
            unrecorded: ex.unrecorded.get(&i).copied().unwrap_or(0),
            error,
        });
        cells.push(stats);
    }
    let warnings: Vec<String> = ex
        .failures
        .iter()
        .map(|f| format!("trial could not run: {f}"))
        .collect();
    let matrix = Matrix::new(
        recipe,
        cells,
        RunInfo {
            run_timestamp: paths.timestamp.clone(),
            warnings: warnings.clone(),
            doctor,
        },
    );
    let basis = KeyBasis::new(c, &folds, &warnings, matrix.doctor.as_ref()).map_err(hashing)?;
    let trial_keys: Vec<Vec<aorta_report::TrialRow>> = by_cell
        .iter()
        .map(|t| {
            t.iter()
                .map(|r| aorta_report::TrialRow {
                    index: r.index,
                    key: r.key.to_string(),
                    ..aorta_report::TrialRow::of(&r.record)
                })
                .collect()
        })
        .collect();
    let trials = outcome.executed + outcome.reused;
    let lost: Vec<usize> = (0..recipe.cells.len())
        .map(|i| ex.unrecorded.get(&i).copied().unwrap_or(0))
        .collect();
    let rerun = RerunFacts {
        run_dir: paths.run_dir.clone(),
        summary: matrix.summary(SummaryOptions {
            run_dir: &paths.run_dir.display().to_string(),
            executed: 0,
            reused: trials,
            unrecorded: &lost,
        }),
        incomplete: matrix.incomplete_reason().map(str::to_string),
        cells: outcome.cells.clone(),
        input_lists: ex
            .results
            .iter()
            .filter_map(|r| r.record.inputs.as_ref()?.digest.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        answer: Some(matrix.answer.clone()),
    };
    outcome.answer = Some(matrix.answer.clone());
    // Each artifact on its own rayon task: rendering is most of a build's tail.
    let report_env = std::sync::Mutex::new(report_env);
    let keyed = c
        .dag
        .artifacts()
        .map(|a| Ok((a, basis.key(a).map_err(hashing)?)))
        .collect::<Result<Vec<_>>>()?;
    let placed = keyed
        .par_iter()
        .map(|(artifact, key)| {
            let facts = (**artifact == Artifact::MatrixJson).then(|| rerun.clone());
            place(store, &paths.run_dir, index, artifact, key, facts, || {
                render(
                    artifact,
                    c,
                    &paths.run_dir,
                    &matrix,
                    &trial_keys,
                    &report_env,
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    for ((artifact, key), how) in keyed.iter().zip(placed) {
        match how {
            Placed::Unchanged => outcome.unchanged += 1,
            Placed::Restored => outcome.restored += 1,
            Placed::Rendered => outcome.rendered += 1,
        }
        if how != Placed::Unchanged {
            index.set(artifact.path(), key.to_string());
        } else {
            index.keep(&artifact.path());
        }
    }
    outcome.pruned = index.prune(&paths.run_dir);
    index
        .save()
        .map_err(|e| EngineError::infra(format!("cannot write the run directory's index: {e}")))?;
    // Nothing executed: this build's summary is the rerun summary already rendered.
    outcome.summary = if outcome.executed == 0 {
        rerun.summary
    } else {
        matrix.summary(SummaryOptions {
            run_dir: &paths.run_dir.display().to_string(),
            executed: outcome.executed,
            reused: outcome.reused,
            unrecorded: &lost,
        })
    };
    outcome.incomplete = rerun.incomplete;
    Ok(())
}

/// The fast path of a fully cached rebuild, top-down as Buck2 checks an action's outputs: when
/// no stop rule makes the cells depend on verdicts, every key is known before anything runs.
/// If the run directory already holds every trial and artifact under its key and the store has
/// matrix.json's entry with its rerun facts, the build is done: no trial lookup, no fold, no
/// render. Returns None (take the full path) otherwise.
pub(crate) fn cached_rebuild(
    store: &LocalStore,
    c: &Compiled,
    paths: &RunPaths,
    inputs: &crate::traced::Inputs,
    doctor: Option<&aorta_doctor::NodeVerdict>,
) -> Option<BuildOutcome> {
    if c.recipe.stop_after.is_some() || matches!(c.workload, Some(Err(_))) {
        return None;
    }
    let index = RunIndex::load(&paths.run_dir);
    let mut folds: Vec<CellFold> = Vec::with_capacity(c.recipe.cells.len());
    for (ci, cell) in c.recipe.cells.iter().enumerate() {
        let dir = aorta_report::cell_dir(c.recipe.mode, &cell.name);
        let mut trials = Vec::new();
        for i in c.dag.cell_trials(ci) {
            let p = &c.planned()[i];
            let rel = format!("{dir}trial_{}", p.index);
            // The result in place, if it is one of this key's.
            let id = index.get(&rel).filter(|id| {
                id.strip_prefix(p.key.as_str())
                    .is_some_and(|s| s.starts_with('@'))
            })?;
            if !paths.run_dir.join(&rel).join("result.json").is_file() {
                return None;
            }
            trials.push((p.index, id.to_owned()));
        }
        folds.push((trials, None));
    }
    let basis = KeyBasis::new(c, &folds, &[], doctor).ok()?;
    let mut facts = None;
    for artifact in c.dag.artifacts() {
        let key = basis.key(artifact).ok()?;
        let rel = artifact.path();
        if !index.holds(&rel, key.as_str(), &paths.run_dir.join(&rel)) {
            return None;
        }
        if *artifact == Artifact::MatrixJson {
            match store.lookup_as::<ArtifactRecord>(&key) {
                Ok(Lookup::Hit(m)) => facts = m.trial.rerun,
                _ => return None,
            }
        }
    }
    let facts = facts.filter(|f| f.run_dir == paths.run_dir)?;
    // An errored trial runs again (errors are never reused): the full path executes it.
    if facts.cells.iter().any(|c| c.errored > 0) {
        return None;
    }
    // A traced input that changed sends the build down the full path, which re-runs its trials.
    for digest in &facts.input_lists {
        let summary = aorta_trial::InputsSummary {
            traced: true,
            reason: None,
            count: 0,
            digest: Some(digest.clone()),
        };
        inputs.verify(store, Some(&summary)).ok()?;
    }
    let artifacts = c.dag.artifacts().count();
    Some(BuildOutcome {
        detached: 0,
        healed: 0,
        pruned: Vec::new(),
        run_dir: paths.run_dir.clone(),
        executed: 0,
        reused: c.planned().len(),
        rendered: 0,
        restored: 0,
        unchanged: artifacts,
        failed_to_run: Vec::new(),
        unrecorded_infrastructure: false,
        cancelled: false,
        summary: facts.summary,
        incomplete: facts.incomplete,
        cells: facts.cells,
        answer: facts.answer,
        doctor: doctor.cloned(),
    })
}
