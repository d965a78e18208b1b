//! The run directory (AORTA's layouts, §3.3): materialised trial outputs and the report files.

use crate::dirs::write_atomic;
use crate::placement::{place_trial, retain, trial_rel, StagedDir};
use crate::schedule::{TrialDir, TrialResult};
use aorta_recipe::{safe_slug, Mode, Recipe};
use aorta_store::LocalStore;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct RunPaths {
    pub run_dir: PathBuf,
    pub staging: PathBuf,
    pub timestamp: String,
    /// Held for the whole build: builds of one run directory (a probe ticket built twice at
    /// once) take turns, so neither removes the other's staging or half-writes its index.
    _lock: std::fs::File,
}

/// The run directory's lock file (left in place: removing a lock file while another build
/// waits on it would let a third build lock a new one). `aorta bundle` leaves `.aorta-*` out.
const RUN_LOCK: &str = ".aorta-build.lock";

/// Locks `run_dir` for one build, saying so if another build holds it.
fn lock_run_dir(run_dir: &Path) -> std::io::Result<std::fs::File> {
    let path = run_dir.join(RUN_LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    // By path: std's inherent `File::lock` is newer than the workspace's MSRV.
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => return Ok(file),
        Err(fs4::TryLockError::WouldBlock) => {}
        Err(fs4::TryLockError::Error(e)) => return Err(e),
    }
    eprintln!(
        "aorta: waiting for another build of this run directory ({}) to finish",
        run_dir.display()
    );
    loop {
        match fs4::FileExt::lock(&file) {
            Ok(()) => return Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}-{:02}-{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
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
    let ticket = recipe
        .ticket
        .as_deref()
        .map(safe_slug)
        .unwrap_or_else(|| "_no_ticket_".into());
    match recipe.mode {
        Mode::Probe => output.join(ticket),
        Mode::Triage => output
            .join(ticket)
            .join(safe_slug(&recipe.workload))
            .join(timestamp),
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
                        run_dir = base.with_file_name(format!(
                            "{}-{n}",
                            base.file_name()
                                .map(|f| f.to_string_lossy().into_owned())
                                .unwrap_or_default()
                        ));
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            std::fs::create_dir_all(&run_dir)?;
        }
        let lock = lock_run_dir(&run_dir)?;
        let staging = run_dir.join(".aorta-staging");
        std::fs::create_dir_all(&staging)?;
        Ok(RunPaths {
            run_dir,
            staging,
            timestamp,
            _lock: lock,
        })
    }
}

const MATERIALIZED_INDEX: &str = ".aorta-materialized.json";

/// Which key each trial directory and artifact of a run directory holds, so a rerun leaves
/// what is already in place alone.
pub(crate) struct RunIndex {
    path: PathBuf,
    entries: BTreeMap<String, String>,
    changed: bool,
    /// What this build placed or found in place: the rest is an earlier matrix's.
    current: std::collections::BTreeSet<String>,
}

impl RunIndex {
    pub(crate) fn load(run_dir: &Path) -> RunIndex {
        let path = run_dir.join(MATERIALIZED_INDEX);
        let entries = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        RunIndex {
            path,
            entries,
            changed: false,
            current: Default::default(),
        }
    }

    /// Whether `rel` holds `key` (and the file it names exists).
    pub(crate) fn holds(&self, rel: &str, key: &str, file: &Path) -> bool {
        self.entries.get(rel).is_some_and(|k| k == key) && file.is_file()
    }

    /// What `rel` holds, if anything.
    pub(crate) fn get(&self, rel: &str) -> Option<&str> {
        self.entries.get(rel).map(String::as_str)
    }

    pub(crate) fn set(&mut self, rel: String, key: String) {
        self.current.insert(rel.clone());
        self.entries.insert(rel, key);
        self.changed = true;
    }

    /// `rel` is part of this build as it is.
    pub(crate) fn keep(&mut self, rel: &str) {
        self.current.insert(rel.to_owned());
    }

    /// Removes what an earlier build placed that this one did not (a cell or trials no longer
    /// in the recipe, an environment no longer used), so the run directory — and a bundle of
    /// it — holds this matrix only. Only paths this index recorded are touched; a cell
    /// directory left empty goes too. Returns the paths removed.
    pub(crate) fn prune(&mut self, run_dir: &Path) -> Vec<String> {
        let stale: Vec<String> = self
            .entries
            .keys()
            .filter(|rel| !self.current.contains(*rel))
            .cloned()
            .collect();
        for rel in &stale {
            let path = run_dir.join(rel);
            let gone = match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
                Ok(_) => std::fs::remove_file(&path),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            };
            if gone.is_ok() {
                self.entries.remove(rel);
                self.changed = true;
                // Empty parents up to the run directory (a cell's, an environment's).
                let mut parent = path.parent();
                while let Some(p) = parent.filter(|p| *p != run_dir && p.starts_with(run_dir)) {
                    if std::fs::remove_dir(p).is_err() {
                        break;
                    }
                    parent = p.parent();
                }
            }
        }
        stale
    }

    /// Saves the index once what it names is durable: trial directories are written plainly in
    /// private staging directories and renamed into place, so their files are synced here, with
    /// one `syncfs` for the run directory's filesystem, before the index claims them.
    pub(crate) fn save(&self) -> std::io::Result<()> {
        if !self.changed {
            return Ok(());
        }
        if let Some(run_dir) = self.path.parent() {
            aorta_store::sync_filesystem(run_dir)?;
        }
        let bytes = serde_json::to_vec(&self.entries).map_err(std::io::Error::other)?;
        write_atomic(&self.path, &bytes)
    }
}

/// Why trial directories could not be placed.
pub(crate) enum PlaceError {
    /// Stored trials whose outputs could not be read back (a corrupt blob, now quarantined, or
    /// a missing one): re-running them heals the store. Every other trial was placed.
    Unreadable(Vec<(aorta_store::Key, String)>),
    Other(String),
}

/// Puts each trial's outputs from the store into `<cell dir>/trial_<N>/`: hard links to the
/// store's read-only blobs where the run directory and the store share a filesystem, else
/// copies. A trial directory that already holds the same key (per the index) is left alone, so
/// a cached rerun of a flat probe run touches no trial files. The work runs on a pool of its
/// own: a copied file is fsync'd, and the syncs of many trials overlap (10,000 trials
/// collected from a cluster are all placed here).
pub fn materialize(
    store: &LocalStore,
    recipe: &Recipe,
    paths: &RunPaths,
    results: &[TrialResult],
    index: &mut RunIndex,
) -> Result<(), PlaceError> {
    let mut todo = Vec::new();
    for r in results {
        let rel = trial_rel(recipe, &recipe.cells[r.cell].name, r.index);
        let id = r.result_id();
        if r.dir == TrialDir::Placed {
            index.set(rel, id);
            continue;
        }
        let dest = paths.run_dir.join(&rel);
        if index.holds(&rel, &id, &dest.join("result.json")) {
            index.keep(&rel);
            continue;
        }
        todo.push((r, rel, id, dest));
    }
    let copy = |(r, rel, _, dest): &(&TrialResult, String, String, PathBuf)| {
        copy_out(store, recipe, paths, r, rel, dest)
    };
    // More threads than cores: a copied file's fsync overlaps the others' work. Links need no
    // overlap, yet one thread per core measured worse for them on the development VM's ext4
    // (docs/benchmarks.md, "Slurm at scale"; the threads contend for the shared parent
    // directories), so both use the one pool.
    let copied: Vec<Result<(), Copied>> = match todo.len() {
        0..=7 => todo.iter().map(copy).collect(),
        _ => {
            use rayon::prelude::*;
            let threads = std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .max(8);
            match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                Ok(pool) => pool.install(|| todo.par_iter().map(copy).collect()),
                Err(_) => todo.iter().map(copy).collect(),
            }
        }
    };
    let (mut unreadable, mut failed) = (Vec::new(), None);
    for ((r, rel, id, _), done) in todo.into_iter().zip(copied) {
        match done {
            Ok(()) => index.set(rel, id),
            Err(Copied::Unreadable(why)) => unreadable.push((r.key.clone(), why)),
            Err(Copied::Failed(e)) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(PlaceError::Other(e));
    }
    if unreadable.is_empty() {
        Ok(())
    } else {
        Err(PlaceError::Unreadable(unreadable))
    }
}

/// Why one trial was not copied out: its store entry reads back wrong (re-run it), or
/// anything else (the build's error).
enum Copied {
    Unreadable(String),
    Failed(String),
}

/// One stored trial into its place in the run directory, through staging.
fn copy_out(
    store: &LocalStore,
    recipe: &Recipe,
    paths: &RunPaths,
    r: &TrialResult,
    rel: &str,
    dest: &Path,
) -> Result<(), Copied> {
    let mut staged = match &r.dir {
        // Executed in this build: the staging dir already holds exactly these outputs.
        TrialDir::Staged(d) if d.dir.is_dir() => d.clone(),
        _ => {
            let staged = paths.staging.join(format!("m-{}-{}", r.cell, r.index));
            // A leftover of an interrupted build is removed; usually there is none.
            if std::fs::create_dir(&staged).is_err() {
                let _ = std::fs::remove_dir_all(&staged);
            }
            let manifest = match store.lookup_as::<serde::de::IgnoredAny>(&r.key) {
                Ok(aorta_store::Lookup::Hit(m)) => m,
                // Gone bad since the build looked it up (a blob it shares with a trial
                // placed before it was found corrupt and quarantined): re-run it, as one
                // whose blob reads back wrong.
                Ok(_) => {
                    return Err(Copied::Unreadable(format!("{rel}: its store entry went bad during the build (a blob it shares was quarantined)")));
                }
                Err(e) => return Err(Copied::Failed(format!("cannot materialise {rel}: {e}"))),
            };
            // Links where the filesystem allows: the staging directory is private, and
            // nothing writes into a placed trial's files (they are replaced, never edited).
            match store.link_out(&manifest, &staged) {
                Ok(()) => {}
                Err(
                    e @ (aorta_store::StoreError::Corrupt { .. }
                    | aorta_store::StoreError::MissingBlob { .. }),
                ) => {
                    let _ = std::fs::remove_dir_all(&staged);
                    return Err(Copied::Unreadable(format!("{rel}: {e}")));
                }
                Err(e) => return Err(Copied::Failed(format!("cannot materialise {rel}: {e}"))),
            }
            // The record as this cell sees it (a shared key reports under each cell's name).
            let json = serde_json::to_vec_pretty(&*r.record)
                .map_err(|e| Copied::Failed(format!("cannot encode {rel}/result.json: {e}")))?;
            // Unlinked first: were it among the outputs (an older manifest), it would be a
            // link to a store blob, and writing into it would change the store.
            let result = staged.join("result.json");
            let _ = std::fs::remove_file(&result);
            std::fs::write(&result, &json)
                .map_err(|e| Copied::Failed(format!("cannot write {rel}/result.json: {e}")))?;
            StagedDir::new(staged)
        }
    };
    place_trial(&mut staged, dest, retain(recipe), &r.record)
        .map_err(|e| Copied::Failed(format!("cannot place {rel}: {e}")))
}
