//! What the Slurm executor has submitted, recorded in the store (`slurm/submitted/<array>.json`,
//! one record per array) so that no build loses track of a task: the record is written, and
//! fsync'd, *before* sbatch runs, under the array's lock (`<array>.lock`), and gets the job id
//! once sbatch returns. A kill at any point leaves either nothing submitted (a record without
//! an id whose job name squeue does not know: dropped) or a record the next build re-attaches
//! to (by id, or by the job's unique name). A record goes when every trial in it has a
//! result or has ended in this build.

use aorta_store::{Key, LocalStore, Lookup};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

const FORMAT: u32 = 2;

/// One array's submission.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ArrayRecord {
    pub format: u32,
    /// The array's name: its folder under `slurm/arrays/` and its record's file name.
    pub name: String,
    /// `--job-name`, unique to this array: how squeue finds a job whose id was never recorded.
    pub job_name: String,
    /// sbatch's job id; `None` between the intent and sbatch's answer.
    pub job: Option<String>,
    /// The array's folder (manifest, script, task logs).
    pub dir: PathBuf,
    /// Seconds since the epoch when the intent was written.
    pub at: u64,
    /// Task `i` runs `trials[i]`.
    pub trials: Vec<RecordedTrial>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RecordedTrial {
    pub key: Key,
    /// 1 for a first submission; more for a resubmission after the cluster took a task away.
    pub attempt: u32,
}

/// Seconds since the epoch, as records keep time.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What [`Submissions::prune`] left and found.
#[derive(Default)]
pub(crate) struct Pruned {
    /// The records with trials still open, and which are (`true`: no result yet).
    pub kept: Vec<(ArrayRecord, Vec<bool>)>,
    /// The records removed.
    pub removed: usize,
    /// The recorded trials with a result.
    pub landed: Vec<Key>,
}

/// The records' folder, `slurm/submitted/` in the store.
pub(crate) struct Submissions {
    dir: PathBuf,
}

/// Held from the intent until the job id is recorded: a reader that finds a record without an
/// id takes the lock before deciding the submitter died.
pub(crate) struct IntentLock(#[allow(dead_code)] File);

impl ArrayRecord {
    pub fn new(name: String, job_name: String, dir: PathBuf, trials: Vec<RecordedTrial>) -> Self {
        ArrayRecord {
            format: FORMAT,
            name,
            job_name,
            job: None,
            dir,
            at: now_secs(),
            trials,
        }
    }
}

impl Submissions {
    pub fn new(slurm_root: &Path) -> Submissions {
        Submissions {
            dir: slurm_root.join("submitted"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    fn lock_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.lock"))
    }

    /// Every record (an unreadable one, or one of an older format, is skipped and said).
    pub fn load_all(&self) -> Vec<ArrayRecord> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if !name.ends_with(".json") {
                // A per-trial record of an aorta before records per array: its task is
                // found again by nothing, so its trial simply runs (a result is never lost).
                if !name.ends_with(".lock") {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            match std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<ArrayRecord>(&b).ok())
            {
                Some(r) if r.format == FORMAT => out.push(r),
                _ => eprintln!(
                    "aorta: skipping the unreadable Slurm submission record {}",
                    path.display()
                ),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    pub fn read(&self, name: &str) -> Option<ArrayRecord> {
        let bytes = std::fs::read(self.path(name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the intent (no job id yet), durably, and returns the lock that says its
    /// submitter is alive.
    pub fn intend(&self, r: &ArrayRecord) -> std::io::Result<IntentLock> {
        std::fs::create_dir_all(&self.dir)?;
        let lock = File::create(self.lock_path(&r.name))?;
        fs4::FileExt::lock(&lock)?;
        self.write(r)?;
        Ok(IntentLock(lock))
    }

    /// Rewrites a record (its job id learnt, or trials moved out of it).
    pub fn write(&self, r: &ArrayRecord) -> std::io::Result<()> {
        let json = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        aorta_fsutil::write_atomic(&self.path(&r.name), &json)
    }

    /// Waits for a submitter that holds the array's lock (sbatch running), then reads the
    /// record again: after this, a record still without an id has no live submitter here.
    pub fn settled(&self, name: &str) -> Option<ArrayRecord> {
        if let Ok(lock) = File::open(self.lock_path(name)) {
            let _ = fs4::FileExt::lock_shared(&lock);
        }
        self.read(name)
    }

    pub fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.path(name));
        let _ = std::fs::remove_file(self.lock_path(name));
    }

    /// Removes the records whose every trial has a result in `store`, with their arrays'
    /// folders (what `aorta cache gc` and each Slurm build do first).
    pub fn prune(&self, store: &LocalStore) -> Pruned {
        let mut out = Pruned::default();
        for r in self.load_all() {
            if r.job.is_none() {
                // Its submitter may be in sbatch now: never pruned unseen.
                let open = vec![true; r.trials.len()];
                out.kept.push((r, open));
                continue;
            }
            let open: Vec<bool> = r
                .trials
                .iter()
                // Whether a result is there, not what it says: its record is not parsed.
                .map(|t| {
                    !matches!(
                        store.lookup_as::<serde::de::IgnoredAny>(&t.key),
                        Ok(Lookup::Hit(_))
                    )
                })
                .collect();
            for (t, o) in r.trials.iter().zip(&open) {
                if !o {
                    out.landed.push(t.key.clone());
                }
            }
            if open.iter().any(|o| *o) {
                out.kept.push((r, open));
            } else {
                self.remove(&r.name);
                let _ = std::fs::remove_dir_all(&r.dir);
                out.removed += 1;
            }
        }
        out
    }
}
