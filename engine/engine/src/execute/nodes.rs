//! Slurm results are keyed by the environment of the node that ran them, not the submitter's
//! (a GPU-less login node, a TaskProlog exporting `NCCL_ALGO`, another driver).
//!
//! - The plan: with `--executor slurm` and no snapshot pinned (`--env-snapshot`), a build keys
//!   its trials by the partition's environment, probed once by a one-task job of the trials'
//!   resource shape and kept in the store (`slurm/partitions/<shape>.json`).
//! - Each task probes its own node (the probe's interpreter part is cached per user) and keys
//!   its trial by that. A node whose key is the plan's stores the result under the plan's key;
//!   any other stores it under its own key (a later plan of that environment reuses it) and
//!   leaves a [`NodeMismatch`] for the submitter, which reports the trial as not run for this
//!   plan, names the fields that differ, and forgets the partition's snapshot so the next
//!   build probes it again.

use crate::error::{EngineError, Result};
use aorta_exec::CancelToken;
use aorta_recipe::{Recipe, Resources};
use aorta_slurm::{ArrayJob, Meaning, Slurm, SlurmConfig};
use aorta_store::Key;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a task whose node's environment key is not the plan's leaves for the submitter
/// (`<store>/slurm/mismatch/<plan key>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeMismatch {
    pub host: String,
    /// The key the trial's result is stored under (the node's).
    pub node_trial_key: String,
    pub fields: Vec<FieldChange>,
}

/// One keyed snapshot field, as the plan and the node have it (JSON text; `null`: absent).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub plan: String,
    pub node: String,
}

impl NodeMismatch {
    fn path(slurm_root: &Path, plan_key: &Key) -> PathBuf {
        slurm_root.join("mismatch").join(format!("{plan_key}.json"))
    }

    /// The note a task left for `plan_key`, taken (removed) by the submitter.
    pub(crate) fn take(slurm_root: &Path, plan_key: &Key) -> Option<NodeMismatch> {
        let path = Self::path(slurm_root, plan_key);
        let note = serde_json::from_slice(&std::fs::read(&path).ok()?).ok();
        let _ = std::fs::remove_file(&path);
        note
    }

    /// The submitter's report of it.
    pub(crate) fn message(&self, plan_key: &Key) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .take(6)
            .map(|f| format!("{}: {} -> {}", f.field, f.plan, f.node))
            .collect();
        let more = self.fields.len().saturating_sub(6);
        format!(
            "trial {plan_key} ran on node {}, whose environment differs from the partition's snapshot ({}{}): its result is stored under the node's own key {}, never under this plan's; the partition is probed again at the next build (if its nodes differ, pin them with `constraint:`)",
            self.host,
            fields.join("; "),
            if more > 0 { format!("; {more} more") } else { String::new() },
            self.node_trial_key,
        )
    }
}

/// The keyed fields that differ between two environment keys.
fn changes(plan: &aorta_probe::EnvKey, node: &aorta_probe::EnvKey) -> Vec<FieldChange> {
    let text = |v: Option<&serde_json::Value>| v.map_or("null".to_owned(), |v| v.to_string());
    let mut names: Vec<&String> = plan.fields.keys().chain(node.fields.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| plan.fields.get(*n) != node.fields.get(*n))
        .map(|n| FieldChange {
            field: n.clone(),
            plan: text(plan.fields.get(n)),
            node: text(node.fields.get(n)),
        })
        .collect()
}

impl NodeMismatch {
    /// What a task whose node keys `plan_key`'s trial as `node_trial_key` leaves for the
    /// submitter: written atomically to `<store>/slurm/mismatch/`, and said on stderr.
    pub(crate) fn leave(
        store: &Path,
        plan_key: &str,
        plan: &aorta_probe::EnvKey,
        node: &crate::environment::EnvRecord,
        node_trial_key: &Key,
    ) -> Result<()> {
        let note = NodeMismatch {
            host: node
                .snapshot
                .host
                .hostname
                .clone()
                .unwrap_or_else(|| "(unnamed)".into()),
            node_trial_key: node_trial_key.to_string(),
            fields: changes(plan, &node.key),
        };
        let plan_key = Key::parse(plan_key).map_err(|e| {
            EngineError::infra(format!("the manifest's key {plan_key} is not a key: {e}"))
        })?;
        let path = NodeMismatch::path(&store.join("slurm"), &plan_key);
        let json = serde_json::to_vec_pretty(&note)
            .map_err(|e| EngineError::infra(format!("cannot encode {}: {e}", path.display())))?;
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
            .and_then(|_| crate::dirs::write_atomic(&path, &json))
            .map_err(|e| EngineError::infra(format!("cannot write {}: {e}", path.display())))?;
        eprintln!("aorta: {}", note.message(&plan_key));
        Ok(())
    }
}

/// An array of `tasks` running `script` with `shape`'s resources (the configured `sbatch_args`
/// first, the shape's after), its log `task-%a.log` beside the script.
pub(super) fn array_job(
    cfg: &SlurmConfig,
    shape: &Resources,
    name: String,
    script: PathBuf,
    tasks: u32,
    chdir: &Path,
) -> ArrayJob {
    let mut extra = cfg.sbatch_args.clone();
    extra.extend(shape.sbatch_args.clone().unwrap_or_default());
    ArrayJob {
        name,
        output: script.with_file_name("task-%a.log"),
        script,
        tasks,
        max_parallel: cfg.max_parallel,
        gpus: shape.gpus_per_trial.unwrap_or(0),
        cpus: shape.cpus_per_trial,
        mem: shape.mem_per_trial.clone(),
        time_limit_secs: shape.time_limit_secs,
        partition: shape.partition.clone(),
        account: shape.account.clone(),
        constraint: shape.constraint.clone(),
        extra,
        chdir: chdir.to_path_buf(),
    }
}

/// Single-quoted for sh.
pub(super) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// How long a partition's snapshot is trusted without a node disagreeing:
/// `$AORTA_SLURM_PROBE_MAX_AGE` seconds, one hour by default (0: probe at every build). A
/// cluster's driver update is noticed by the next probe, or by the first trial that runs.
fn max_age() -> Result<Duration> {
    match std::env::var("AORTA_SLURM_PROBE_MAX_AGE") {
        Err(_) => Ok(Duration::from_secs(3600)),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                EngineError::usage(
                    format!("AORTA_SLURM_PROBE_MAX_AGE={v:?} is not a number of seconds"),
                    "AORTA_SLURM_PROBE_MAX_AGE=3600 (0: probe the partition at every build)",
                )
            }),
    }
}

/// The shape a partition probe job asks for: the first cell's resources over the configured
/// defaults (a cell of another partition is checked by its nodes, as any trial is).
fn probe_shape(cfg: &SlurmConfig, recipe: &Recipe) -> Resources {
    let defaults = Resources {
        partition: cfg.partition.clone(),
        account: cfg.account.clone(),
        ..Resources::default()
    };
    match recipe.cells.first() {
        Some(cell) => cell.effective_resources(recipe).over(&defaults),
        None => recipe.resources.over(&defaults),
    }
}

/// Why a one-task job gave no file.
enum JobError {
    Submit(String),
    Interrupted,
    Ended {
        id: String,
        state: String,
        log: PathBuf,
    },
}

/// Where a build's partition probes live.
pub(crate) struct PartitionProbe<'a> {
    pub cfg: &'a SlurmConfig,
    /// `<store>/slurm`.
    pub root: PathBuf,
    pub cwd: &'a Path,
    pub python: Option<&'a Path>,
    pub cancel: CancelToken,
}

impl PartitionProbe<'_> {
    /// The snapshot file of the nodes `recipe`'s trials run on: kept from an earlier build
    /// ([`max_age`]), or probed now by a one-task job of their shape (waiting for it).
    pub(crate) fn snapshot(&self, recipe: &Recipe) -> Result<PathBuf> {
        let shape = probe_shape(self.cfg, recipe);
        let deep = crate::environment::key_rules(recipe).needs_deep();
        let mut h = blake3::Hasher::new();
        let described = serde_json::to_string(&(&shape, &self.cfg.sbatch_args, deep))
            .map_err(|e| EngineError::infra(format!("cannot describe the probe job: {e}")))?;
        h.update(described.as_bytes());
        let id = &h.finalize().to_hex()[..16];
        let dir = self.root.join("partitions");
        let file = dir.join(format!("{id}.json"));
        let age = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok());
        let max_age = max_age()?;
        if age.is_some_and(|age| age < max_age) {
            return Ok(file);
        }
        let infra = |what: &str, p: &Path, e: std::io::Error| {
            EngineError::infra(format!("cannot {what} {}: {e}", p.display()))
        };
        let work = dir.join(format!("{id}-probe-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(|e| infra("create", &work, e))?;
        let aorta = self.aorta()?;
        let q = |p: &Path| sh_quote(&p.display().to_string());
        let tmp = format!("{}.tmp.$SLURM_JOB_ID", q(&file));
        let mut probe = format!("{} env probe --output {tmp}", q(&aorta));
        if deep {
            probe.push_str(" --deep");
        }
        if let Some(py) = self.python {
            probe.push_str(&format!(" --python {}", q(py)));
        }
        let script = work.join("probe.sh");
        let text = format!(
            "#!/bin/sh\n# The environment this partition gives trials: their keys are computed from it.\n{probe} >/dev/null || exit 1\nmv {tmp} {}\n",
            q(&file)
        );
        crate::dirs::write_atomic(&script, text.as_bytes())
            .map_err(|e| infra("write", &script, e))?;
        self.run_job(
            &shape,
            "aorta-probe",
            script,
            &file,
            &work,
            "probing the environment of partition",
            "(trials are keyed by the nodes that run them; kept for later builds)",
        )
        .map_err(|e| match e {
            JobError::Submit(e) => EngineError::infra_with_help(
                format!("cannot submit the partition's probe job: {e}"),
                "check the Slurm settings (docs/slurm.md), or pin the environment with --env-snapshot",
            ),
            JobError::Interrupted => EngineError::infra("interrupted while probing the partition"),
            JobError::Ended { id, state, log } => EngineError::infra_with_help(
                format!(
                    "the partition's probe job {id} ended {state} without a snapshot (log: {})",
                    log.display()
                ),
                "pin the environment with --env-snapshot FILE (an env.json from `aorta env probe` on a node)",
            ),
        })?;
        let _ = std::fs::remove_dir_all(&work);
        Ok(file)
    }

    /// `aorta doctor --level LEVEL` on a node of the partition `recipe`'s trials run on, as a
    /// one-task job of their shape (so it sees the GPUs a trial is given), waited for: the
    /// `--doctor` preflight under `--executor slurm`. Its report names that node.
    pub(crate) fn doctor(
        &self,
        recipe: &Recipe,
        level: aorta_doctor::Level,
    ) -> Result<aorta_doctor::Report> {
        let shape = probe_shape(self.cfg, recipe);
        let work = self
            .root
            .join("doctor")
            .join(format!("job-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work)
            .map_err(|e| EngineError::infra(format!("cannot create {}: {e}", work.display())))?;
        let file = work.join("report.json");
        let aorta = self.aorta()?;
        let q = |p: &Path| sh_quote(&p.display().to_string());
        let tmp = format!("{}.tmp.$SLURM_JOB_ID", q(&file));
        // aorta doctor exits 1 when a check failed: the report is what counts.
        let text = format!(
            "#!/bin/sh\n# The node's health before a sweep's trials run there (docs/doctor.md).\n{} doctor --level {} --out {tmp} >/dev/null\n[ -s {tmp} ] || exit 1\nmv {tmp} {}\n",
            q(&aorta),
            level.word(),
            q(&file)
        );
        let script = work.join("doctor.sh");
        crate::dirs::write_atomic(&script, text.as_bytes())
            .map_err(|e| EngineError::infra(format!("cannot write {}: {e}", script.display())))?;
        self.run_job(
            &shape,
            "aorta-doctor",
            script,
            &file,
            &work,
            "checking a node of partition",
            "with aorta doctor before any trial (a one-task job of the trials' shape)",
        )
        .map_err(|e| match e {
            JobError::Submit(e) => EngineError::infra_with_help(
                format!("cannot submit the doctor's job: {e}"),
                "check the Slurm settings (docs/slurm.md)",
            ),
            JobError::Interrupted => {
                EngineError::infra("interrupted while the doctor checked a node")
            }
            JobError::Ended { id, state, log } => EngineError::infra_with_help(
                format!(
                    "the doctor's job {id} ended {state} without a report (log: {})",
                    log.display()
                ),
                "`srun -p PARTITION aorta doctor` shows what the node says",
            ),
        })?;
        let report = crate::doctor::read_recorded(&file)
            .map(|r| r.report)
            .map_err(|e| EngineError::infra(e.to_string()))?;
        let _ = std::fs::remove_dir_all(&work);
        Ok(report)
    }

    fn aorta(&self) -> Result<PathBuf> {
        match &self.cfg.aorta {
            Some(p) => Ok(p.clone()),
            None => std::env::current_exe().map_err(|e| {
                EngineError::infra(format!("cannot find this aorta's executable: {e}"))
            }),
        }
    }

    /// Runs `script` as a one-task job of `shape` named `name` and waits for it; Ok once it
    /// ended and `file` exists, else why not (its log kept in `work`).
    #[allow(clippy::too_many_arguments)]
    fn run_job(
        &self,
        shape: &Resources,
        name: &str,
        script: PathBuf,
        file: &Path,
        work: &Path,
        doing: &str,
        why: &str,
    ) -> std::result::Result<(), JobError> {
        let log = work.join(format!("{name}.log"));
        let mut job = array_job(self.cfg, shape, name.into(), script, 1, self.cwd);
        job.max_parallel = None;
        job.output = work.join(format!("{name}-%a.log"));
        let slurm = Slurm::new(self.cfg.bin_dir.clone());
        let id = slurm
            .submit(&job)
            .map_err(|e| JobError::Submit(e.to_string()))?;
        eprintln!(
            "aorta: {doing} {} with Slurm job {id} {why}",
            shape.partition.as_deref().unwrap_or("(default)")
        );
        let submitted = Instant::now();
        let state = loop {
            if self.cancel.is_cancelled() {
                let _ = slurm.cancel(std::slice::from_ref(&id));
                return Err(JobError::Interrupted);
            }
            let states = match slurm.states(std::slice::from_ref(&id)) {
                Ok(s) => s,
                Err(e) => {
                    let state = format!("in a state Slurm could not tell ({e})");
                    return Err(JobError::Ended { id, state, log });
                }
            };
            match states.get(&(id.clone(), 0)) {
                Some(s) if s.meaning() != Meaning::Active => break s.as_str().to_owned(),
                None if submitted.elapsed() > Duration::from_secs(30) => {
                    break "gone from squeue and sacct".to_owned()
                }
                _ => std::thread::sleep(self.cfg.poll_interval.max(Duration::from_millis(100))),
            }
        };
        if file.is_file() {
            return Ok(());
        }
        let _ = std::fs::rename(work.join(format!("{name}-0.log")), &log);
        Err(JobError::Ended { id, state, log })
    }

    /// Forgets every partition snapshot (a node found the partition changed).
    pub(crate) fn forget_all(slurm_root: &Path) {
        let dir = slurm_root.join("partitions");
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
