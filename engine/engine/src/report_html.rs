//! report.html's engine side: what the page shows beyond the matrix (the environment summary,
//! the commands that reproduce the run, the trial keys), all covered by the artifact's key
//! (recipe, cells — hence trial keys and the wrapped command —, environment record).

use crate::compile::Compiled;
use crate::environment::{key_rules, EnvRecord};
use aorta_classify::{classify_logs, LogInput, LogKind, Severity};
use aorta_probe::{KeyRules, Prepared, Snapshot};
use aorta_recipe::Recipe;
use aorta_report::{DetectorLine, EnvDiff, HtmlContext, Matrix};
use std::collections::BTreeMap;
use std::path::Path;

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

/// report.html's environment half: the brief and each cell's env diff against the baseline.
/// It needs only the recipe and the snapshot, not one trial, so a build makes it on a thread
/// while the trials run ([`PendingEnvSection`]); the build's tail then only renders the page.
pub(crate) struct EnvSection {
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
    fn new(recipe: &Recipe, env: &EnvRecord) -> EnvSection {
        let key = env.key.clone();
        let summary = env.snapshot.summary_with_key(&key);
        let machine = Prepared::keyed(&env.snapshot, key);
        let rules = key_rules(recipe);
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

/// An [`EnvSection`] made on its own thread once [`PendingEnvSection::start`]ed.
#[derive(Default)]
pub(crate) struct PendingEnvSection {
    started: bool,
    thread: Option<std::thread::JoinHandle<EnvSection>>,
}

impl PendingEnvSection {
    /// Starts making `c`'s section on a thread, the first time it is called.
    pub(crate) fn start(&mut self, c: &Compiled) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        let (recipe, env) = (c.recipe.clone(), c.env.clone());
        self.thread = std::thread::Builder::new()
            .name("aorta-report-env".into())
            .spawn(move || EnvSection::new(&recipe, &env))
            .ok();
    }

    /// The section: the thread's, or made here if none was started or it failed.
    pub(crate) fn wait(self, c: &Compiled) -> EnvSection {
        self.thread
            .and_then(|h| h.join().ok())
            .unwrap_or_else(|| EnvSection::new(&c.recipe, &c.env))
    }
}

pub(crate) fn render(
    c: &Compiled,
    run_dir: &Path,
    matrix: &Matrix,
    trial_keys: &[Vec<aorta_report::TrialRow>],
    env: EnvSection,
) -> String {
    let lines = detector_lines(run_dir, matrix);
    let (summary, diffs) = env.for_matrix(matrix);
    page(
        matrix,
        c.argv.as_deref(),
        Some(&summary),
        trial_keys,
        &lines,
        &diffs,
    )
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
) -> Vec<EnvDiff> {
    let rules = key_rules(matrix.recipe);
    let mut out = match machine {
        Some(m) => cell_env_diffs(matrix_cells(matrix), &matrix.baseline.name, m, &rules),
        None => Vec::new(),
    };
    if let Some(((first, a), rest)) = environments.split_first() {
        for (name, b) in rest {
            let d = aorta_probe::diff(a, b, &rules);
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
fn detector_lines(run_dir: &Path, matrix: &Matrix) -> Vec<Vec<DetectorLine>> {
    let Ok(cfg) = crate::bodies::classifier_config(matrix.recipe) else {
        return Vec::new();
    };
    matrix
        .rows
        .iter()
        .map(|row| {
            if row.stats.failed_count == 0 {
                return Vec::new();
            }
            for p in row.stats.trial_paths.iter().take(TRIALS_SEARCHED) {
                let dir = p.strip_suffix("result.json").unwrap_or(p);
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
                let Ok(found) = classify_logs(inputs, &cfg) else {
                    continue;
                };
                let lines: Vec<DetectorLine> = found
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
                    .collect();
                if !lines.is_empty() {
                    return lines;
                }
            }
            Vec::new()
        })
        .collect()
}

/// The page, from the matrix, the wrapped command, the environment summary and the keys.
fn page(
    matrix: &Matrix,
    argv: Option<&[String]>,
    env: Option<&str>,
    trial_keys: &[Vec<aorta_report::TrialRow>],
    detector_lines: &[Vec<DetectorLine>],
    env_diffs: &[EnvDiff],
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
    })
}

/// `aorta report RUN_DIR`: report.html rendered again from what a run directory holds (its
/// recipe.resolved.yaml, each trial's result.json, its env.json), for a run built before
/// report.html existed or received in a bundle. `sidecars`: registries the recipe's
/// mitigations need. Returns the page's path.
pub fn render_run_dir(
    run_dir: &std::path::Path,
    sidecars: &[std::path::PathBuf],
) -> crate::Result<std::path::PathBuf> {
    use crate::EngineError;
    let resolved = run_dir.join("recipe.resolved.yaml");
    if !resolved.is_file() {
        return Err(EngineError::usage(
            format!(
                "{} is not a run directory (it has no recipe.resolved.yaml)",
                run_dir.display()
            ),
            "point at a run directory such as probe_results/<ticket>",
        ));
    }
    // Through a compile database of its own, like every recipe (no session: nothing runs).
    let mut compiler = crate::compile::Compiler::new();
    let id = compiler.add(crate::compile::TargetSpec {
        label: None,
        origin: crate::compile::RecipeOrigin::File {
            path: resolved.clone(),
            sidecars: sidecars.to_vec(),
            overlays: Default::default(),
        },
        argv: None,
    });
    let mut recipe = crate::session::recipe_of(&compiler, &compiler.targets[id.0])?;
    // The resolved file names the recipe it came from: that is what reproduces the run.
    let text = std::fs::read_to_string(&resolved).unwrap_or_default();
    let source = text
        .lines()
        .find_map(|l| l.strip_prefix("# Source: "))
        .and_then(|l| l.rsplit_once(" (blake3:"));
    if let (Some((path, hash)), Some(s)) = (source, recipe.source.as_mut()) {
        s.path = path.into();
        s.blake3 = hash.trim_end_matches(')').to_string();
    }
    let mut argv: Option<Vec<String>> = None;
    let mut stats = Vec::with_capacity(recipe.cells.len());
    let mut keys = Vec::with_capacity(recipe.cells.len());
    for cell in &recipe.cells {
        let dir = run_dir.join(aorta_report::cell_dir(recipe.mode, &cell.name));
        let mut records = Vec::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path().join("result.json");
            if !entry.file_name().to_string_lossy().starts_with("trial_") || !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| EngineError::infra(format!("cannot read {}: {e}", path.display())))?;
            let record: aorta_trial::TrialRecord = serde_json::from_str(&text).map_err(|e| {
                EngineError::usage(
                    format!("{}: not a trial record: {e}", path.display()),
                    "the run directory was written by another aorta, or edited",
                )
            })?;
            records.push(record);
        }
        records.sort_by_key(|r| r.trial_index);
        if argv.is_none() {
            argv = records.iter().find_map(|r| r.argv.clone());
        }
        keys.push(records.iter().map(aorta_report::TrialRow::of).collect());
        stats.push(aorta_report::CellStats::aggregate(
            cell,
            &recipe,
            records.iter(),
            None,
        ));
    }
    let matrix = Matrix::new(
        &recipe,
        stats,
        aorta_report::RunInfo {
            run_timestamp: crate::outputs::utc_timestamp(),
            warnings: Vec::new(),
        },
    );
    let mut environments: Vec<(String, Snapshot)> = std::fs::read_dir(run_dir.join("environments"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let snap = crate::environment::load_snapshot(&e.path().join("env.json")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), snap))
        })
        .collect();
    environments.sort_by(|a, b| a.0.cmp(&b.0));
    let rules = key_rules(&recipe);
    let env = environments
        .first()
        .map(|(_, s)| s.summary_with_key(&s.key(&rules)));
    let lines = detector_lines(run_dir, &matrix);
    let machine = environments.first().map(|(_, s)| Prepared::new(s, &rules));
    let diffs = env_diffs(&matrix, machine.as_ref(), &environments);
    let html = page(
        &matrix,
        argv.as_deref(),
        env.as_deref(),
        &keys,
        &lines,
        &diffs,
    );
    let dest = run_dir.join("report.html");
    crate::write_atomic(&dest, html.as_bytes())
        .map_err(|e| EngineError::infra(format!("cannot write {}: {e}", dest.display())))?;
    Ok(dest)
}
