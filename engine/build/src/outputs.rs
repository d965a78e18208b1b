//! The run directory (AORTA's layouts, §3.3): materialised trial outputs and the report files.

use crate::engine::{Executed, TrialResult};
use crate::fsutil::{replace_dir, write_atomic};
use aorta_recipe::{safe_slug, Mode, Recipe};
use aorta_report::{CellStats, Matrix, RunInfo, SummaryOptions};
use aorta_store::LocalStore;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct RunPaths {
    pub run_dir: PathBuf,
    pub staging: PathBuf,
    pub timestamp: String,
}

fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}-{:02}-{:02}", rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// Howard Hinnant's days-to-civil, so no date crate is needed for one timestamp.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The run directory a recipe writes to under `output`: probe recipes use AORTA's flat,
/// reusable `<output>/<ticket>/`; workload recipes a timestamped `<output>/<ticket>/<workload>/<ts>`.
pub fn run_dir_for(recipe: &Recipe, output: &Path, timestamp: &str) -> PathBuf {
    let ticket = recipe.ticket.as_deref().map(safe_slug).unwrap_or_else(|| "_no_ticket_".into());
    match recipe.mode {
        Mode::Probe => output.join(ticket),
        Mode::Triage => output.join(ticket).join(safe_slug(&recipe.workload)).join(timestamp),
    }
}

impl RunPaths {
    pub fn create(recipe: &Recipe, output: &Path) -> std::io::Result<RunPaths> {
        let timestamp = utc_timestamp();
        // Absolute, because trials run with their own working directory.
        let output = std::path::absolute(output)?;
        let mut run_dir = run_dir_for(recipe, &output, &timestamp);
        if recipe.mode == Mode::Triage {
            // Same-second reruns get -2, -3, … (AORTA's rule), created exclusively.
            let base = run_dir.clone();
            let mut n = 1;
            loop {
                if let Some(p) = run_dir.parent() {
                    std::fs::create_dir_all(p)?;
                }
                match std::fs::create_dir(&run_dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => {
                        n += 1;
                        run_dir = base.with_file_name(format!("{}-{n}", base.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()));
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            std::fs::create_dir_all(&run_dir)?;
        }
        let staging = run_dir.join(".aorta-staging");
        std::fs::create_dir_all(&staging)?;
        Ok(RunPaths { run_dir, staging, timestamp })
    }
}

const MATERIALIZED_INDEX: &str = ".aorta-materialized.json";

/// Copies each trial's outputs from the store into `<cell dir>/trial_<N>/`. A trial directory
/// that already holds the same key (per the index file) is left alone, so a cached rerun of a
/// flat probe run touches no trial files.
pub fn materialize(store: &LocalStore, recipe: &Recipe, paths: &RunPaths, results: &[TrialResult]) -> Result<(), String> {
    let index_path = paths.run_dir.join(MATERIALIZED_INDEX);
    let mut index: BTreeMap<String, String> = std::fs::read(&index_path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let mut changed = false;
    for r in results {
        let cell = &recipe.cells[r.cell].name;
        let rel = format!("{}trial_{}", aorta_report::cell_dir(recipe.mode, cell), r.index);
        let dest = paths.run_dir.join(&rel);
        if index.get(&rel) == Some(&r.key.to_string()) && dest.join("result.json").is_file() {
            continue;
        }
        let staged = match r.staged.as_ref().filter(|d| d.is_dir()) {
            // Executed in this build: the staging dir already holds exactly these outputs.
            Some(d) => d.clone(),
            None => {
                let staged = paths.staging.join(format!("m-{}-{}", r.cell, r.index));
                let _ = std::fs::remove_dir_all(&staged);
                let manifest = match store.lookup(&r.key) {
                    Ok(aorta_store::Lookup::Hit(m)) => m,
                    Ok(_) => return Err(format!("cannot materialise {rel}: its store entry {} vanished or went bad during the build; run the build again", r.key)),
                    Err(e) => return Err(format!("cannot materialise {rel}: {e}")),
                };
                store.materialize(&manifest, &staged).map_err(|e| format!("cannot materialise {rel}: {e}"))?;
                // The record as this cell sees it (a shared key reports under each cell's name).
                let json = serde_json::to_vec_pretty(&*r.record).unwrap_or_default();
                write_atomic(&staged.join("result.json"), &json).map_err(|e| format!("cannot write {rel}/result.json: {e}"))?;
                staged
            }
        };
        if let Some(retain) = recipe.probe.as_ref().and_then(|p| p.retain.as_ref()) {
            let (level, deleted, freed) = crate::retention::apply(&staged, retain, r.record.verdict);
            if !deleted.is_empty() {
                // Stamp the outcome into this directory's record, as AORTA does.
                let mut record = (*r.record).clone();
                record.capture.insert("retention".into(), serde_json::json!({"level": level, "deleted": deleted, "freed_bytes": freed}));
                let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
                write_atomic(&staged.join("result.json"), &json).map_err(|e| format!("cannot write {rel}/result.json: {e}"))?;
            }
        }
        replace_dir(&staged, &dest).map_err(|e| format!("cannot place {rel}: {e}"))?;
        index.insert(rel, r.key.to_string());
        changed = true;
    }
    if changed {
        write_atomic(&index_path, &serde_json::to_vec(&index).unwrap_or_default()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Aggregates and writes matrix.json, matrix.md, recipe.resolved.yaml and env.json.
/// Returns the end-of-run summary and the matrix's incomplete reason, if any.
pub fn write_report(recipe: &Recipe, paths: &RunPaths, ex: &Executed, argv: Option<&[String]>, env_record: Option<&serde_json::Value>) -> Result<(String, Option<String>), String> {
    let mut cells = Vec::new();
    for (c, cell) in recipe.cells.iter().enumerate() {
        let mine: Vec<&TrialResult> = ex.results.iter().filter(|r| r.cell == c).collect();
        let records: Vec<aorta_trial::TrialRecord> = mine.iter().map(|r| (*r.record).clone()).collect();
        let reused = mine.iter().filter(|r| r.source == crate::Source::Reused).count();
        cells.push(CellStats::aggregate(cell, recipe, &records, ex.cell_errors.get(&c).cloned(), reused));
    }
    let mut warnings: Vec<String> = ex.failures.iter().map(|f| format!("trial could not run: {f}")).collect();
    if recipe.mode == Mode::Probe && argv.is_none() {
        warnings.push("no command given".into());
    }
    let matrix = Matrix::new(recipe, cells, RunInfo { run_timestamp: paths.timestamp.clone(), warnings });
    let dir = &paths.run_dir;
    let w = |name: &str, bytes: &[u8]| write_atomic(&dir.join(name), bytes).map_err(|e| format!("cannot write {name}: {e}"));
    let mut json = Vec::new();
    matrix.write_json(&mut json).map_err(|e| format!("cannot render matrix.json: {e}"))?;
    json.push(b'\n');
    w("matrix.json", &json)?;
    w("matrix.md", matrix.to_markdown().as_bytes())?;
    w("recipe.resolved.yaml", aorta_report::resolved_recipe_yaml(recipe).as_bytes())?;
    let env = env_record.cloned().unwrap_or_else(|| {
        let host = aorta_graph::HostBasics::current();
        serde_json::json!({"schema_version": host.schema, "key": host.key(), "host": host, "note": "host basics only: no environment snapshot was given"})
    });
    let mut env_bytes = serde_json::to_vec_pretty(&env).unwrap_or_default();
    env_bytes.push(b'\n');
    let mut envs: Vec<&str> = recipe.cells.iter().map(|c| c.environment.name.as_str()).collect();
    envs.sort_unstable();
    envs.dedup();
    for e in envs {
        w(&format!("environments/{}/env.json", safe_slug(e)), &env_bytes)?;
    }
    let run_dir = dir.display().to_string();
    let summary = matrix.summary(SummaryOptions { run_dir: &run_dir, verbose: false });
    Ok((summary, matrix.incomplete_reason().map(str::to_string)))
}
