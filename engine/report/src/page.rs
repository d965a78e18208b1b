//! report.html from a run: what the page shows beyond the matrix — the environment section
//! (the snapshot's summary, each cell's `env diff` against the baseline), the first log line of
//! each detector that fired, the commands that reproduce the run — and the page again from a
//! run directory alone (`aorta report RUN_DIR`). All of it is covered by the artifact's key
//! (recipe, cells — hence trial keys and the wrapped command —, environment record, the
//! doctor's verdict).

use crate::html::{AgentPage, DetectorLine, EnvDiff, HtmlContext, TrialRow};
use crate::matrix::{Matrix, RunInfo};
use crate::verdict::Answer;
use aorta_classify::{classify_logs, ClassifierConfig, LogInput, LogKind, Severity};
use aorta_probe::{EnvKey, KeyRules, Prepared, Snapshot};
use aorta_recipe::Recipe;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// report.html's environment half: the brief and each cell's env diff against the baseline.
/// It needs only the recipe and the snapshot, not one trial, so a build can make it on a thread
/// while the trials run; the build's tail then only renders the page.
pub struct EnvSection {
    summary: String,
    /// The baseline the diffs are against: the recipe's. A run whose baseline moved (a
    /// triage baseline that did not run) is diffed again against its own at render time.
    baseline: String,
    diffs: Vec<EnvDiff>,
    /// The build's snapshot, ready to diff, and the recipe's `env_key` rules: what diffing
    /// again needs.
    machine: Prepared,
    rules: KeyRules,
}

impl EnvSection {
    /// The section for `recipe`'s cells on `snapshot`, keyed `key` under `rules`.
    pub fn new(recipe: &Recipe, snapshot: &Snapshot, key: EnvKey, rules: KeyRules) -> EnvSection {
        let summary = snapshot.summary_with_key(&key);
        let machine = Prepared::keyed(snapshot, key);
        let baseline = recipe.confound.resolved_baseline.clone();
        let cells = recipe
            .cells
            .iter()
            .map(|c| (c.name.as_str(), &c.resolved_env));
        let diffs = cell_env_diffs(cells, &baseline, &machine, &rules);
        EnvSection {
            summary,
            baseline,
            diffs,
            machine,
            rules,
        }
    }

    /// The summary, and the cells' diffs against the matrix's baseline.
    fn for_matrix(self, matrix: &Matrix) -> (String, Vec<EnvDiff>) {
        if self.baseline == matrix.baseline.name {
            return (self.summary, self.diffs);
        }
        let diffs = cell_env_diffs(
            matrix_cells(matrix),
            &matrix.baseline.name,
            &self.machine,
            &self.rules,
        );
        (self.summary, diffs)
    }
}

/// What a page needs besides the matrix and the environment.
pub struct PageInputs<'a> {
    /// The run directory the matrix's trial paths are relative to (their logs are read).
    pub run_dir: &'a Path,
    /// The wrapped command, when the recipe wraps one.
    pub argv: Option<&'a [String]>,
    /// Each cell's trials, in cell order.
    pub trial_keys: &'a [Vec<TrialRow>],
    /// The trials' own classifier (the recipe's patterns); `None` when the recipe's patterns
    /// do not compile (the trials said so).
    pub classifier: Option<&'a ClassifierConfig>,
}

/// report.html of a build.
pub fn render(matrix: &Matrix, env: EnvSection, inputs: &PageInputs) -> String {
    let lines = detector_lines(inputs.run_dir, matrix, inputs.classifier);
    let (summary, diffs) = env.for_matrix(matrix);
    page(
        matrix,
        inputs.argv,
        Some(&summary),
        inputs.trial_keys,
        &lines,
        &diffs,
        None,
    )
}

/// Why a run directory's page cannot be made again.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a trial record: {source}", path.display())]
    NotARecord {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// report.html again from what a run directory holds (each trial's result.json, each
/// `environments/<name>/env.json`), for `recipe` (its recipe.resolved.yaml, compiled by the
/// caller). `info`: the page's timestamp and the doctor's verdict (the caller reads the run's
/// doctor.json). With `agent`, an `aorta agent` run's page: its answer replaces the matrix's,
/// and its search is shown.
pub fn render_run_dir(
    run_dir: &Path,
    recipe: &Recipe,
    rules: &KeyRules,
    classifier: Option<&ClassifierConfig>,
    info: RunInfo,
    agent: Option<(&Answer, &AgentPage)>,
) -> Result<String, RunDirError> {
    let mut argv: Option<Vec<String>> = None;
    let mut stats = Vec::with_capacity(recipe.cells.len());
    let mut keys = Vec::with_capacity(recipe.cells.len());
    for cell in &recipe.cells {
        let records = trial_records(&run_dir.join(crate::cell_dir(recipe.mode, &cell.name)))?;
        if argv.is_none() {
            argv = records.iter().find_map(|r| r.argv.clone());
        }
        keys.push(records.iter().map(TrialRow::of).collect());
        stats.push(crate::CellStats::aggregate(
            cell,
            recipe,
            records.iter(),
            None,
        ));
    }
    let mut matrix = Matrix::new(recipe, stats, info);
    if let Some((answer, _)) = agent {
        matrix.answer = answer.clone();
    }
    let mut environments: Vec<(String, Snapshot)> = std::fs::read_dir(run_dir.join("environments"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("env.json")).ok()?;
            let snap = Snapshot::from_json(&text).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), snap))
        })
        .collect();
    environments.sort_by(|a, b| a.0.cmp(&b.0));
    let env = environments
        .first()
        .map(|(_, s)| s.summary_with_key(&s.key(rules)));
    let lines = detector_lines(run_dir, &matrix, classifier);
    let machine = environments.first().map(|(_, s)| Prepared::new(s, rules));
    let diffs = env_diffs(&matrix, machine.as_ref(), &environments, rules);
    Ok(page(
        &matrix,
        argv.as_deref(),
        env.as_deref(),
        &keys,
        &lines,
        &diffs,
        agent.map(|(_, a)| a),
    ))
}

/// A cell directory's `trial_*/result.json` records, in trial order.
fn trial_records(dir: &Path) -> Result<Vec<aorta_trial::TrialRecord>, RunDirError> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path().join("result.json");
        if !entry.file_name().to_string_lossy().starts_with("trial_") || !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| RunDirError::Read {
            path: path.clone(),
            source,
        })?;
        let record = serde_json::from_str(&text)
            .map_err(|source| RunDirError::NotARecord { path, source })?;
        records.push(record);
    }
    records.sort_by_key(|r: &aorta_trial::TrialRecord| r.trial_index);
    Ok(records)
}

/// A shell word, quoted when it needs to be.
fn sh(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn env_diff(between: String, d: &aorta_probe::Diff, a: &str, b: &str) -> EnvDiff {
    EnvDiff {
        between,
        differences: d.len(),
        key_relevant: d.key_relevant_len(),
        text: d.render(a, b),
    }
}

/// Each cell with its trials' env vars, as the matrix lists them.
fn matrix_cells<'m>(
    matrix: &'m Matrix,
) -> impl Iterator<Item = (&'m str, &'m BTreeMap<String, String>)> + Clone {
    matrix
        .rows
        .iter()
        .map(|r| (r.stats.name.as_str(), &r.stats.resolved_env_vars))
}

/// Where cells differ, `aorta env diff` (the probe's own differ, under the recipe's `env_key`
/// rules) between them: each cell whose trials got env vars the baseline's did not, as the
/// snapshot with each cell's vars set. Only `env_vars` differs between cells, so only it is
/// walked: cheap enough per cell that a thread pool would cost more than it saves.
fn cell_env_diffs<'a>(
    cells: impl Iterator<Item = (&'a str, &'a BTreeMap<String, String>)> + Clone,
    baseline: &str,
    machine: &Prepared,
    rules: &KeyRules,
) -> Vec<EnvDiff> {
    let Some((_, vars)) = cells.clone().find(|(name, _)| *name == baseline) else {
        return Vec::new();
    };
    let label_a = format!("baseline cell {baseline}");
    let base_side = machine.env_vars_side(vars, rules);
    cells
        .filter(|(name, v)| *name != baseline && *v != vars)
        .filter_map(|(name, v)| {
            let side = machine.env_vars_side(v, rules);
            let d = aorta_probe::diff_env_vars_sides(&base_side, &side, rules);
            let label_b = format!("cell {name}");
            (!d.is_empty())
                .then(|| env_diff(format!("{label_a} → {label_b}"), &d, &label_a, &label_b))
        })
        .collect()
}

/// [`cell_env_diffs`], then each recorded environment snapshot
/// (`environments/<name>/env.json`) that differs from the first.
fn env_diffs(
    matrix: &Matrix,
    machine: Option<&Prepared>,
    environments: &[(String, Snapshot)],
    rules: &KeyRules,
) -> Vec<EnvDiff> {
    let mut out = match machine {
        Some(m) => cell_env_diffs(matrix_cells(matrix), &matrix.baseline.name, m, rules),
        None => Vec::new(),
    };
    if let Some(((first, a), rest)) = environments.split_first() {
        for (name, b) in rest {
            let d = aorta_probe::diff(a, b, rules);
            if !d.is_empty() {
                let (la, lb) = (
                    format!("environments/{first}/env.json"),
                    format!("environments/{name}/env.json"),
                );
                out.push(env_diff(
                    format!("environment {first} → environment {name}"),
                    &d,
                    &la,
                    &lb,
                ));
            }
        }
    }
    out
}

/// Trials per failing cell whose logs are searched for the first one with findings.
const TRIALS_SEARCHED: usize = 3;

/// Per cell, the first matching line of each detector in the logs of its first failing trial
/// (of the first few), found by the trials' own classifier with the recipe's patterns. The
/// logs are outputs of the trials whose keys the artifact's key holds.
fn detector_lines(
    run_dir: &Path,
    matrix: &Matrix,
    classifier: Option<&ClassifierConfig>,
) -> Vec<Vec<DetectorLine>> {
    let Some(cfg) = classifier else {
        return Vec::new();
    };
    let first_lines = |dir: &str| -> Vec<DetectorLine> {
        let inputs: Vec<LogInput> = ["stdout.log", "stderr.log"]
            .iter()
            .filter_map(|name| {
                let f = std::fs::File::open(run_dir.join(dir).join(name)).ok()?;
                Some(LogInput {
                    name: format!("{dir}{name}"),
                    kind: LogKind::Output,
                    reader: Box::new(f),
                })
            })
            .collect();
        let Ok(found) = classify_logs(inputs, cfg) else {
            return Vec::new();
        };
        found
            .findings
            .into_iter()
            .filter(|f| f.severity != Severity::Info)
            .filter_map(|f| {
                Some(DetectorLine {
                    line: f.line?,
                    detector: f.detector,
                    log: f.log,
                    text: f.text,
                })
            })
            .collect()
    };
    matrix
        .rows
        .iter()
        .map(|row| {
            if row.stats.failed_count == 0 {
                return Vec::new();
            }
            row.stats
                .trial_paths
                .iter()
                .take(TRIALS_SEARCHED)
                .map(|p| first_lines(p.strip_suffix("result.json").unwrap_or(p)))
                .find(|lines| !lines.is_empty())
                .unwrap_or_default()
        })
        .collect()
}

/// The page, from the matrix, the wrapped command, the environment summary and the keys.
fn page(
    matrix: &Matrix,
    argv: Option<&[String]>,
    env: Option<&str>,
    trial_keys: &[Vec<TrialRow>],
    detector_lines: &[Vec<DetectorLine>],
    env_diffs: &[EnvDiff],
    agent: Option<&AgentPage>,
) -> String {
    let recipe = matrix
        .recipe
        .source
        .as_ref()
        .map(|s| sh(&s.path.display().to_string()));
    let mut reproduce = Vec::new();
    if let Some(r) = &recipe {
        let mut build = format!("aorta build {r}");
        if let Some(argv) = argv.filter(|a| !a.is_empty()) {
            build.push_str(" --");
            for w in argv {
                build.push(' ');
                build.push_str(&sh(w));
            }
        }
        reproduce.push(build);
        reproduce.push(format!(
            "aorta explain {r} --cell {} --trial 0   # one trial's key and inputs",
            sh(&matrix.baseline.name)
        ));
    }
    matrix.to_html(&HtmlContext {
        environment: env,
        reproduce: &reproduce,
        trial_keys,
        detector_lines,
        env_diffs,
        command: argv,
        agent,
    })
}
