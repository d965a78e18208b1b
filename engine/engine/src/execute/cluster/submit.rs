//! Submitting arrays and finding earlier builds' submissions again: the intent is recorded
//! before sbatch ([`Submissions`]), so no kill leaves a task nobody follows.

use super::{ArrayState, SlurmExecutor, Submitted, TaskTrial, ON_ITS_WAY_SECS};
use crate::error::{EngineError, Result};
use crate::execute::nodes::{array_job, sh_quote};
use crate::execute::submissions::{now_secs, ArrayRecord, RecordedTrial};
use aorta_recipe::Resources;
use aorta_slurm::SlurmError;
use aorta_store::Key;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Slurm's default `MaxArraySize`.
const DEFAULT_MAX_ARRAY_SIZE: u32 = 1001;

impl SlurmExecutor<'_> {
    /// Reads the records of earlier builds' submissions: those whose every trial has a result
    /// go (with their folders); a record without a job id is settled (its submitter finishing
    /// sbatch, or squeue asked for the job by name); the open trials of the rest wait to be
    /// started here.
    pub(super) fn load_records(&mut self) -> Result<()> {
        let pruned = self.submissions.prune(&self.store);
        self.collected.extend(pruned.landed);
        for (record, open) in pruned.kept {
            let record = match record.job {
                Some(_) => record,
                None => match self.reattach(record)? {
                    Some(r) => r,
                    None => continue,
                },
            };
            let Some(job) = record.job.clone() else {
                continue;
            };
            let n_open = open.iter().filter(|o| **o).count();
            for (task, (t, is_open)) in record.trials.iter().zip(&open).enumerate() {
                if !is_open {
                    continue;
                }
                let s = Submitted {
                    job: job.clone(),
                    task: task as u32,
                    attempt: t.attempt,
                    array: record.name.clone(),
                    array_dir: record.dir.clone(),
                    at: record.at,
                    inherited: true,
                };
                // A trial resubmitted after an interruption is in two records: the later wins.
                match self.recorded.get(&t.key) {
                    Some(old) if old.attempt > t.attempt => {}
                    _ => {
                        self.recorded.insert(t.key.clone(), s);
                    }
                }
            }
            self.arrays.insert(
                record.name.clone(),
                ArrayState {
                    job,
                    done: 0,
                    open: n_open,
                    dir: record.dir.clone(),
                    keep: false,
                },
            );
        }
        Ok(())
    }

    /// A record without a job id: wait for a live submitter's lock, then ask squeue for the
    /// job by its unique name. Found: the record, with its id. Not found (and past the time an
    /// orphaned sbatch may still take): nothing reached Slurm; the record goes (`None`).
    fn reattach(&mut self, record: ArrayRecord) -> Result<Option<ArrayRecord>> {
        let Some(mut record) = self.submissions.settled(&record.name) else {
            return Ok(None);
        };
        if record.job.is_some() {
            return Ok(Some(record));
        }
        loop {
            let slurm = &self.slurm;
            let name = record.job_name.clone();
            let found = self
                .patience
                .call(
                    self.cfg,
                    &self.cancel,
                    "squeue",
                    SlurmError::is_transient,
                    |_| slurm.jobs_named(&name),
                )
                .map_err(|e| EngineError::infra(format!("cannot ask Slurm for {name}: {e}")))?;
            let Some(found) = found else {
                return Ok(None);
            };
            if let Some(job) = found.into_iter().next() {
                eprintln!(
                    "aorta: found Slurm job {job} ({name}), submitted by a build that stopped before recording it; following it"
                );
                record.job = Some(job);
                self.submissions.write(&record).map_err(|e| {
                    EngineError::infra(format!("cannot write a submission record: {e}"))
                })?;
                return Ok(Some(record));
            }
            let age = now_secs().saturating_sub(record.at);
            if age >= ON_ITS_WAY_SECS || self.cancel.is_cancelled() {
                self.submissions.remove(&record.name);
                let _ = std::fs::remove_dir_all(&record.dir);
                return Ok(None);
            }
            std::thread::sleep(
                Duration::from_secs(ON_ITS_WAY_SECS - age).min(self.cfg.max_backoff),
            );
        }
    }

    /// One of a followed array's trials ended here (or was forgotten): at the last, its record
    /// goes, and its folder unless a task failed (its log is named in the failure).
    pub(super) fn task_done(&mut self, array: &str, failed: bool) {
        if let Some(a) = self.arrays.get_mut(array) {
            a.done += 1;
            a.open = a.open.saturating_sub(1);
            a.keep |= failed;
            if a.open == 0 {
                self.submissions.remove(array);
                if !a.keep {
                    let _ = std::fs::remove_dir_all(&a.dir);
                }
            }
        }
    }

    /// Submits `keys` (each with its attempt number), one array per resource shape, split into
    /// arrays of at most the cluster's `MaxArraySize` tasks.
    pub(super) fn submit(&mut self, keys: Vec<(Key, u32)>) -> Result<()> {
        let t_submit = std::time::Instant::now();
        let n = keys.len();
        let mut by_shape: BTreeMap<Resources, Vec<(Key, u32)>> = BTreeMap::new();
        for (key, attempt) in keys {
            by_shape
                .entry(self.shape(&key))
                .or_default()
                .push((key, attempt));
        }
        let chunk = self.max_array_size() as usize;
        for (shape, mut keys) in by_shape {
            while !keys.is_empty() {
                let rest = keys.split_off(keys.len().min(chunk));
                self.submit_array(&shape, keys)?;
                keys = rest;
            }
        }
        crate::timing(&format!("slurm submit of {n} trial(s)"), t_submit);
        Ok(())
    }

    /// The most tasks one array may have: the cluster's `MaxArraySize` (task indices run from 0
    /// to it, exclusive), read once; Slurm's default 1001 when scontrol does not say.
    fn max_array_size(&mut self) -> u32 {
        *self.max_array.get_or_insert_with(|| {
            match self.slurm.max_array_size() {
                Ok(Some(n)) if n >= 1 => n,
                Ok(_) => DEFAULT_MAX_ARRAY_SIZE,
                Err(e) => {
                    eprintln!("aorta: cannot read the cluster's MaxArraySize ({e}); arrays of at most {DEFAULT_MAX_ARRAY_SIZE} tasks");
                    DEFAULT_MAX_ARRAY_SIZE
                }
            }
        })
    }

    /// One array: its folder (manifest, script), the intent record, sbatch (waiting out an
    /// outage; after a lost answer, squeue by the job's unique name first, so a retry never
    /// submits twice), then the job id in the record. Ctrl-C while the controller is away
    /// drops the array before anything reached Slurm.
    fn submit_array(&mut self, shape: &Resources, keys: Vec<(Key, u32)>) -> Result<()> {
        let infra = |what: &str, p: &Path, e: std::io::Error| {
            EngineError::infra(format!("cannot {what} {}: {e}", p.display()))
        };
        let name = format!(
            "{}-{}-{}",
            now_secs(),
            std::process::id(),
            &keys[0].0.as_str()[..12]
        );
        let dir = self.root.join("arrays").join(&name);
        std::fs::create_dir_all(&dir).map_err(|e| infra("create", &dir, e))?;
        let mut manifest = self.common.clone();
        manifest.trials = keys
            .iter()
            .map(|(k, _)| TaskTrial {
                cell: self.c.recipe.cells[self.jobs[k].cell].name.clone(),
                index: self.jobs[k].index,
                key: (*k).clone(),
            })
            .collect();
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| EngineError::infra(format!("cannot encode the manifest: {e}")))?;
        let manifest_path = dir.join("manifest.json");
        crate::dirs::write_atomic(&manifest_path, &json)
            .map_err(|e| infra("write", &manifest_path, e))?;
        let script = dir.join("task.sh");
        let text = format!(
            "#!/bin/sh\n# One trial per array task: the manifest maps SLURM_ARRAY_TASK_ID to a trial key.\nexec {} trial exec --manifest {}\n",
            sh_quote(&self.aorta.display().to_string()),
            sh_quote(&manifest_path.display().to_string())
        );
        crate::dirs::write_atomic(&script, text.as_bytes())
            .map_err(|e| infra("write", &script, e))?;
        let job_name = format!(
            "aorta-{}-{name}",
            self.c.recipe.ticket.as_deref().unwrap_or("trials")
        );
        let trials = keys
            .iter()
            .map(|(key, attempt)| RecordedTrial {
                key: key.clone(),
                attempt: *attempt,
            })
            .collect();
        let mut record = ArrayRecord::new(name.clone(), job_name.clone(), dir.clone(), trials);
        let lock = self
            .submissions
            .intend(&record)
            .map_err(|e| EngineError::infra(format!("cannot record a submission: {e}")))?;
        let job = array_job(
            self.cfg,
            shape,
            job_name.clone(),
            script,
            keys.len() as u32,
            &self.cwd,
        );
        let slurm = &self.slurm;
        let submitted = self.patience.call(
            self.cfg,
            &self.cancel,
            "sbatch",
            SlurmError::is_transient,
            |attempt| {
                if attempt > 0 {
                    // sbatch may have got through before its answer was lost.
                    if let Some(id) = slurm.jobs_named(&job_name)?.into_iter().next() {
                        return Ok(id);
                    }
                }
                slurm.submit(&job)
            },
        );
        let id = match submitted {
            Ok(Some(id)) => id,
            Ok(None) => {
                self.submissions.remove(&name);
                let _ = std::fs::remove_dir_all(&dir);
                return Ok(());
            }
            Err(e) => {
                self.submissions.remove(&name);
                let _ = std::fs::remove_dir_all(&dir);
                return Err(EngineError::infra_with_help(
                    format!("cannot submit the job array: {e}"),
                    "check the Slurm settings (docs/slurm.md) and that sbatch works here",
                ));
            }
        };
        record.job = Some(id.clone());
        self.submissions
            .write(&record)
            .map_err(|e| EngineError::infra(format!("cannot record a submission: {e}")))?;
        drop(lock);
        self.arrays.insert(
            name.clone(),
            ArrayState {
                job: id.clone(),
                done: 0,
                open: keys.len(),
                dir: dir.clone(),
                keep: false,
            },
        );
        let at = now_secs();
        for (task, (key, attempt)) in keys.into_iter().enumerate() {
            self.pending.insert(
                key,
                Submitted {
                    job: id.clone(),
                    task: task as u32,
                    attempt,
                    array: name.clone(),
                    array_dir: dir.clone(),
                    at,
                    inherited: false,
                },
            );
        }
        Ok(())
    }
}
