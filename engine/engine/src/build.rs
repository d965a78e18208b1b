//! A whole build of a compiled target: remote pull, the trial nodes under the slots, remote
//! push, then the cells and the artifacts (rendered only when their keys are not cached).

use crate::bodies::bodies;
use crate::compile::Compiled;
use crate::error::{EngineError, Result};
use crate::execute::local::{LocalExecutor, LocalSettings};
use crate::outcome::BuildOutcome;
use crate::report_html::PendingEnvSection;
use crate::schedule::{Event, Schedule, Source, TrialResult};
use crate::session::Session;
use aorta_exec::Slots;
use aorta_graph::Key;
use aorta_recipe::{Mode, Recipe};
use std::collections::HashSet;
use std::path::PathBuf;

/// AORTA's default output directory for each flow.
pub(crate) fn default_output(recipe: &Recipe) -> PathBuf {
    PathBuf::from(match recipe.mode {
        Mode::Probe => "probe_results",
        Mode::Triage => "triage_results",
    })
}

impl Session {
    pub(crate) fn slots(&self, jobs: Option<usize>) -> Slots {
        let gpus = self.opts.gpus.clone();
        let jobs = jobs
            .or(self.opts.jobs)
            .unwrap_or(if gpus.is_empty() { 1 } else { gpus.len() });
        Slots::new(jobs.max(1), gpus)
    }

    /// GPUs per trial, by cell, on this machine: with `--gpus`, the cell's `gpus_per_trial`
    /// (default 1) of them; without, none are handed out (trials inherit the visibility).
    pub(crate) fn gpus_per_cell(&self, recipe: &Recipe) -> Vec<usize> {
        recipe
            .cells
            .iter()
            .map(|cell| match self.opts.gpus.is_empty() {
                true => 0,
                false => cell
                    .effective_resources(recipe)
                    .gpus_per_trial
                    .map_or(1, |g| g as usize),
            })
            .collect()
    }

    /// Builds a compiled target: every trial (reused or executed), then its cells and
    /// artifacts into the run directory.
    pub fn build(&self, c: &Compiled, on_event: &mut dyn FnMut(Event)) -> Result<BuildOutcome> {
        self.build_once(c, on_event, None)
    }

    /// `--executor slurm` with several targets: submits what `c`'s first wave of trials
    /// needs and returns without waiting, so that every target's arrays are queued before the
    /// first target is waited for (nodes never idle at one recipe's tail while the next waits
    /// its turn). `c`'s build then finds these submissions in their records and follows them.
    /// The trials submitted; 0 where nothing is submitted ahead (the local executor,
    /// `--detach`, `--rerun`).
    pub fn submit_ahead(&self, c: &Compiled) -> Result<usize> {
        if self.slurm.executor != aorta_slurm::Executor::Slurm
            || self.opts.detach
            || !self.opts.rerun.is_empty()
        {
            return Ok(0);
        }
        let bodies = bodies(self, c)?;
        let store = self.writable_store()?;
        let _build_lock = store
            .build_lock()
            .map_err(|e| EngineError::infra(format!("cannot lock the store: {e}")))?;
        if let Some(remote) = &self.remote {
            crate::remote_sync::pull(&store, remote, c.dag.trial_nodes.keys());
        }
        let schedule = Schedule::of(
            c,
            bodies,
            store.clone(),
            self.inputs(c)?,
            self.cancel_token()?,
        );
        let mut slurm = self.slurm_executor(c, &store)?.submit_only();
        Ok(schedule.run(&mut slurm, &mut |_| {})?.detached)
    }

    /// One build. The first pass (`executed_earlier: None`) heals: stored trials whose outputs
    /// no longer read back are re-run by a second pass (see the materialise step), which is
    /// given the keys the first pass executed, so its counts and summary cover the invocation.
    fn build_once(
        &self,
        c: &Compiled,
        on_event: &mut dyn FnMut(Event),
        executed_earlier: Option<&HashSet<Key>>,
    ) -> Result<BuildOutcome> {
        let bodies = bodies(self, c)?;
        let store = self.writable_store()?;
        let cancel = self.cancel_token()?;
        // Shared lock for the whole build: gc waits until no build holds it.
        let build_lock = store
            .build_lock()
            .map_err(|e| EngineError::infra(format!("cannot lock the store: {e}")))?;
        crate::timing_mark("store open, writable and locked");
        let output = self
            .opts
            .output
            .clone()
            .unwrap_or_else(|| default_output(&c.recipe));
        // The user's --output: a read-only one is exit 2, as for every writer.
        let paths = crate::outputs::RunPaths::create(&c.recipe, &output).map_err(|e| {
            EngineError::output(
                format!("cannot create the run directory under {}", output.display()),
                &e,
            )
        })?;
        crate::timing_mark("run directory made");
        // What the node's pages say: this invocation's preflight (recorded here now), else the
        // record an earlier build left.
        let doctor = crate::doctor::verdict_for_run(self.preflight_record(), &paths.run_dir);
        let forced = match self.take_rerun() {
            Some(rerun) => {
                let forced = rerun.apply(&store, c)?;
                eprintln!(
                    "aorta: --rerun: {} stored trial(s) will run again",
                    forced.len()
                );
                forced
            }
            None => HashSet::new(),
        };
        let t_fast = std::time::Instant::now();
        let inputs = self.inputs(c)?;
        let fast = match forced.is_empty() {
            true => crate::artifacts::cached_rebuild(&store, c, &paths, &inputs, doctor.as_ref()),
            false => None,
        };
        if let Some(done) = fast {
            self.inputs_checked(&inputs);
            let _ = std::fs::remove_dir_all(&paths.staging);
            crate::timing("cached rebuild (every trial and artifact in place)", t_fast);
            return Ok(done);
        }
        if let Some(remote) = &self.remote {
            // A forced key is not fetched back from the remote tier either.
            let keys = c.dag.trial_nodes.keys().filter(|k| !forced.contains(*k));
            crate::remote_sync::pull(&store, remote, keys);
        }
        // report.html's environment half needs no trial: it is made on a thread while they
        // run, from the first trial's event on (sooner, it slows the first trial's start,
        // which sets up containment on a 2-core machine's other core).
        let mut report_env = PendingEnvSection::default();
        let mut on_trial_event = |e: Event| {
            report_env.start(c);
            on_event(e)
        };
        let t_run = std::time::Instant::now();
        let schedule = Schedule::of(c, bodies, store.clone(), inputs.clone(), cancel.clone());
        let executed = if self.slurm.executor == aorta_slurm::Executor::Slurm {
            let mut slurm = self.slurm_executor(c, &store)?;
            schedule.run(&mut slurm, &mut on_trial_event)?
        } else {
            let mut local = LocalExecutor::new(
                &c.recipe,
                LocalSettings {
                    store: store.clone(),
                    build_lock: build_lock.clone(),
                    staging: paths.staging.clone(),
                    run_dir: Some(paths.run_dir.clone()),
                    slots: self.slots(None),
                    gpus_per_cell: self.gpus_per_cell(&c.recipe),
                    cancel,
                    inputs: inputs.clone(),
                },
            );
            schedule.run(&mut local, &mut on_trial_event)?
        };
        crate::timing("schedule (lookups + execution)", t_run);
        self.inputs_checked(&inputs);
        // A trial the first pass of this invocation executed counts as executed here too.
        let ran_here = |r: &&TrialResult| {
            r.source == Source::Executed || executed_earlier.is_some_and(|k| k.contains(&r.key))
        };
        let n_executed = executed.results.iter().filter(ran_here).count();
        let n_reused = executed
            .results
            .iter()
            .filter(|r| r.source == Source::Reused && !ran_here(r))
            .count();
        // Write-back (readwrite mode) of what ran here; after Ctrl-C, exit first.
        if let Some(remote) = self.remote.as_ref().filter(|_| !executed.cancelled) {
            crate::remote_sync::push(
                &store,
                remote,
                executed
                    .results
                    .iter()
                    .filter(|r| r.source == Source::Executed)
                    .map(|r| &r.key),
            );
        }
        let mut outcome = BuildOutcome {
            run_dir: paths.run_dir.clone(),
            executed: n_executed,
            reused: n_reused,
            rendered: 0,
            restored: 0,
            unchanged: 0,
            failed_to_run: executed.failures.clone(),
            unrecorded_infrastructure: executed.infrastructure,
            cancelled: executed.cancelled,
            detached: executed.detached,
            healed: 0,
            pruned: Vec::new(),
            answer: None,
            summary: String::new(),
            incomplete: None,
            cells: Vec::new(),
            doctor: doctor.clone(),
        };
        if executed.cancelled || executed.detached > 0 {
            let _ = std::fs::remove_dir_all(&paths.staging);
            return Ok(outcome);
        }
        let t_mat = std::time::Instant::now();
        let mut index = crate::outputs::RunIndex::load(&paths.run_dir);
        let placed =
            crate::outputs::materialize(&store, &c.recipe, &paths, &executed.results, &mut index);
        crate::timing("materialise", t_mat);
        let _ = std::fs::remove_dir_all(&paths.staging);
        match placed {
            Ok(()) => {}
            Err(crate::outputs::PlaceError::Other(e)) => return Err(EngineError::infra(e)),
            // Stored outputs that no longer read back (the store quarantined a corrupt blob, or
            // one is missing): forget those entries and build again, once, which re-runs just
            // them and reuses everything else, so the store heals instead of failing the build.
            Err(crate::outputs::PlaceError::Unreadable(bad)) if executed_earlier.is_none() => {
                for (key, why) in &bad {
                    eprintln!("aorta: {why}; re-running the trial to heal the store");
                    store
                        .invalidate(key)
                        .map_err(|e| EngineError::infra(e.to_string()))?;
                }
                drop(build_lock);
                // The second pass locks the run directory again.
                drop(paths);
                let first: HashSet<Key> = executed
                    .results
                    .iter()
                    .filter(|r| r.source == Source::Executed)
                    .map(|r| r.key.clone())
                    .collect();
                let mut healed = self.build_once(c, on_event, Some(&first))?;
                healed.healed = bad.len();
                return Ok(healed);
            }
            Err(crate::outputs::PlaceError::Unreadable(bad)) => {
                let why: Vec<String> = bad.into_iter().map(|(_, why)| why).collect();
                return Err(EngineError::infra(format!(
                    "stored outputs are unreadable even after re-running their trials: {}",
                    why.join("; ")
                )));
            }
        }
        let t_rep = std::time::Instant::now();
        crate::artifacts::finish(
            &store,
            c,
            &paths,
            &executed,
            &mut index,
            &mut outcome,
            report_env,
            doctor,
        )?;
        crate::timing("cells and artifacts", t_rep);
        // Durable directory entries for the store and the run directory, once for the whole build.
        let t_sync = std::time::Instant::now();
        store
            .sync()
            .map_err(|e| EngineError::infra(e.to_string()))?;
        aorta_store::sync_filesystem(&paths.run_dir).map_err(|e| {
            EngineError::infra(format!("cannot sync {}: {e}", paths.run_dir.display()))
        })?;
        crate::timing("sync", t_sync);
        Ok(outcome)
    }

    /// After the trials: saves what the digest cache learned, and says what reuse could not
    /// check (results reused from untraced trials).
    fn inputs_checked(&self, inputs: &crate::traced::Inputs) {
        self.save_digests();
        crate::timing_mark(&format!(
            "traced inputs: {} file(s) hashed this session",
            inputs
                .digests
                .hashed
                .load(std::sync::atomic::Ordering::Relaxed)
        ));
        for (why, n) in inputs.take_untraced() {
            eprintln!(
                "aorta: reused {n} trial(s) that ran untraced ({why}): only the files their command names were checked; --rerun all traces them"
            );
        }
    }

    /// The plan a dry run prints: the compiled keys, nothing executed, no store opened.
    pub fn plan(&self, c: &Compiled) -> aorta_plan::Plan {
        aorta_plan::plan(
            &c.recipe,
            c.target_label.as_deref(),
            c.argv.as_deref(),
            c.planned(),
        )
    }
}
