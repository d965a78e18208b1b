//! The one scheduling policy for the DAG's trial nodes, whichever executor runs them: look
//! every trial key up in the store (all at once, on all cores), reuse what the reuse rule
//! allows ([`crate::reuse::reusable`], saying why a stored result is not reused), hand every
//! other trial to the [`Executor`] (a key shared by several cells runs once for all of them),
//! relabel a shared result for each cell, apply `stop_after` or `trials: auto` (forgetting
//! trials no cell needs any more), and report it all as [`Event`]s. Cells and artifacts follow
//! in `build` once the trials are done.
//!
//! Under `trials: auto` each cell may start only the trials its sequential test asks for next
//! ([`aorta_report::sequential::plan`], re-evaluated as each trial ends, in trial order), the
//! cells take turns one trial at a time (the baseline first, then the cell closest to a
//! verdict), and a decided cell keeps its first n trials.

use crate::execute::process::TrialSpec;
pub(crate) use crate::execute::{result_id, TrialDir};
pub use crate::execute::{ArrayProgress, Source};
use crate::execute::{Executor, Job, Outcome, Waited};
use crate::workloads::WorkloadError;
use aorta_exec::CancelToken;
use aorta_graph::{Dag, PlannedTrial};
use aorta_recipe::{AutoTrials, Recipe};
use aorta_report::sequential::{self, Decision, Design, Outcome as Seen};
use aorta_store::{Key, LocalStore, Lookup, Manifest};
use aorta_trial::{TrialRecord, Verdict};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// A store lookup that failed (not a miss): the trial is reported as one that could not run.
#[derive(Debug, thiserror::Error)]
#[error("store lookup of {key} failed: {source}")]
struct LookupFailed {
    key: Key,
    #[source]
    source: aorta_store::StoreError,
}

#[derive(Debug, Clone)]
pub struct TrialResult {
    pub cell: usize,
    pub index: u32,
    /// The store entry's key. The entry itself is not kept (a 10,000-trial rerun would hold
    /// 10,000 of them): materialising looks it up again for the trials whose directory needs it.
    pub key: Key,
    /// How long the trial took when it was executed.
    pub exec_seconds: f64,
    pub record: Arc<TrialRecord>,
    pub source: Source,
    /// Where this cell's directory for the trial comes from (the build's own business).
    pub(crate) dir: TrialDir,
}

impl TrialResult {
    /// Which result this is: the key and a stamp of its execution. One key can hold
    /// different results over time (an error run again, a traced input edited, `--rerun`), so
    /// cells fold results, not keys, and the run directory's index says which one is in place.
    pub fn result_id(&self) -> String {
        result_id(&self.key, self.exec_seconds, &self.record)
    }
}

/// A store entry reduced to what the build needs, its record parsed once.
pub(crate) struct Resolved {
    key: Key,
    exec_seconds: f64,
    record: Arc<TrialRecord>,
    dir: TrialDir,
}

pub enum Event<'a> {
    Reused(&'a TrialResult),
    Executed(&'a TrialResult),
    Failed {
        cell: &'a str,
        index: u32,
        error: &'a str,
    },
    /// The Slurm executor's arrays: queued, running and done tasks of each.
    Cluster(&'a [ArrayProgress]),
    /// A stored result this build does not reuse (and executes instead), and why.
    Stale {
        cell: &'a str,
        index: u32,
        why: &'a crate::reuse::NotReused,
    },
}

/// What a store lookup found for a key.
pub(crate) enum Found {
    Hit(Arc<Resolved>),
    Miss,
    /// A stored result that may not be reused ([`crate::reuse::reusable`]), and which.
    Stale {
        why: crate::reuse::NotReused,
        result_id: String,
    },
}

/// Builds a trial's spec from its plan entry (per cell: the body and env are fixed).
pub type MakeSpec = Arc<dyn Fn(&PlannedTrial) -> TrialSpec + Send + Sync>;

/// The one scheduling policy, whichever executor runs the trials (see the module's doc).
pub(crate) struct Schedule<'a> {
    pub recipe: &'a Recipe,
    pub planned: &'a [PlannedTrial],
    /// The compiled graph: which planned trials each cell has, which keys cells share.
    pub dag: &'a Dag,
    /// Body settings per cell (`Err`: the cell cannot run, e.g. unknown workload; its error).
    pub bodies: Vec<Result<MakeSpec, WorkloadError>>,
    pub store: Arc<LocalStore>,
    /// Traced inputs: verified before a stored result is reused.
    pub inputs: Arc<crate::traced::Inputs>,
    pub cancel: CancelToken,
}

impl<'a> Schedule<'a> {
    /// The schedule of a compiled target's trials.
    pub(crate) fn of(
        c: &'a crate::compile::Compiled,
        bodies: Vec<Result<MakeSpec, WorkloadError>>,
        store: Arc<LocalStore>,
        inputs: Arc<crate::traced::Inputs>,
        cancel: CancelToken,
    ) -> Schedule<'a> {
        Schedule {
            recipe: &c.recipe,
            planned: c.planned(),
            dag: &c.dag,
            bodies,
            store,
            inputs,
            cancel,
        }
    }
}

pub struct Executed {
    pub results: Vec<TrialResult>,
    pub cell_errors: BTreeMap<usize, String>,
    pub failures: Vec<String>,
    /// Trials of each cell (by index) that ended without a result: counted as errors.
    pub unrecorded: BTreeMap<usize, usize>,
    /// Whether any failure was the store's or the run directory's (infrastructure), not the
    /// trial's own.
    pub infrastructure: bool,
    pub cancelled: bool,
    /// Trials left running on the cluster (`--detach`): a later build collects them.
    pub detached: usize,
}

fn resolve(m: Manifest<TrialRecord>, dir: TrialDir) -> Arc<Resolved> {
    Arc::new(Resolved {
        key: m.key,
        exec_seconds: m.exec_seconds,
        record: Arc::new(m.trial),
        dir,
    })
}

/// Per-cell progress through its trial list.
#[derive(Default)]
struct CellState {
    /// The position in the cell's trial list to look at next.
    next: usize,
    in_flight: usize,
    /// Nothing more to start: every trial looked at, or the cell decided (`stop_after`).
    done: bool,
    /// `stop_after`: how each trial ended, by position (`Some(None)`: it failed to run, which
    /// is no event), for as long as the cell is undecided.
    ended: Vec<Option<Option<Verdict>>>,
    /// `trials: auto`: each ended trial's per-step times by position, until it is taken in order.
    steps: Vec<Vec<f64>>,
    /// `stop_after`: the positions before this one ended, in order, with `events` events.
    decided: usize,
    events: u32,
    /// `stop_after`: the index of the trial that decided the cell; the cell is its trials up
    /// to that one (the trials a local build, in order, would have run).
    cutoff: Option<u32>,
}

/// `trials: auto`: the sequential test's state over the run.
struct Auto {
    design: Design,
    settings: AutoTrials,
    baseline: Option<usize>,
    /// Each cell's ended trials in order, from its first, without gaps.
    outcomes: Vec<Vec<Seen>>,
    /// Their per-step times, in the same order (the speed stop's evidence).
    steps: Vec<Vec<Vec<f64>>>,
    /// The cells' names and the confound threshold, for the speed stop.
    names: Vec<String>,
    threshold: f64,
    decisions: Vec<Decision>,
    started: Instant,
    /// GPUs one trial holds, for `max_gpu_hours` (1 when the recipe names none).
    gpus_per_trial: f64,
    gpu_hours: f64,
    budget_spent: bool,
}

impl Auto {
    fn new(recipe: &Recipe, settings: AutoTrials) -> Auto {
        let cells = recipe.cells.len();
        let baseline = recipe
            .cells
            .iter()
            .position(|c| c.name == recipe.confound.resolved_baseline);
        let compared = cells.saturating_sub(usize::from(baseline.is_some()));
        let design = Design::new(
            settings.confidence,
            settings.comparisons_for(compared),
            settings.max_trials_per_cell,
        );
        let outcomes = vec![Vec::new(); cells];
        let decisions = sequential::plan(&design, baseline, &outcomes, None, false);
        Auto {
            design,
            settings,
            baseline,
            outcomes,
            steps: vec![Vec::new(); cells],
            names: recipe.cells.iter().map(|c| c.name.clone()).collect(),
            threshold: recipe.confound.threshold,
            decisions,
            started: Instant::now(),
            gpus_per_trial: f64::from(recipe.resources.gpus_per_trial.unwrap_or(1).max(1)),
            gpu_hours: 0.0,
            budget_spent: false,
        }
    }

    /// Whether the budget is spent now (once spent, it stays spent).
    fn check_budget(&mut self) -> bool {
        let s = &self.settings;
        let wall = s
            .max_walltime_sec
            .is_some_and(|max| self.started.elapsed().as_secs_f64() >= max);
        let gpu = s.max_gpu_hours.is_some_and(|max| self.gpu_hours >= max);
        self.budget_spent |= wall || gpu;
        self.budget_spent
    }

    /// Re-evaluates after cell `changed` got an outcome (`None`: everything): that cell, or
    /// every cell when the baseline changed or the budget ran out; the baseline always.
    fn replan(&mut self, changed: Option<usize>) {
        let was_spent = self.budget_spent;
        self.check_budget();
        let single =
            changed.filter(|&c| Some(c) != self.baseline && was_spent == self.budget_spent);
        match (single, self.baseline) {
            (Some(c), Some(b)) if self.outcomes.len() > 1 => {
                let pace = sequential::Pace {
                    threshold: self.threshold,
                    cell_name: &self.names[c],
                    baseline_name: &self.names[b],
                    cell: &self.steps[c],
                    baseline: &self.steps[b],
                };
                self.decisions[c] = sequential::decide(
                    &self.design,
                    &self.outcomes[b],
                    &self.outcomes[c],
                    Some(pace),
                    self.budget_spent,
                );
                self.decisions[b] = sequential::baseline_decision(
                    self.decisions
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != b)
                        .map(|(_, d)| d),
                );
            }
            _ => {
                let paces = sequential::Paces {
                    threshold: self.threshold,
                    names: &self.names,
                    steps: &self.steps,
                };
                self.decisions = sequential::plan(
                    &self.design,
                    self.baseline,
                    &self.outcomes,
                    Some(&paces),
                    self.budget_spent,
                )
            }
        }
    }

    /// The trials cell `c` may have started by now.
    fn limit(&self, c: usize) -> usize {
        self.decisions[c].trials as usize
    }

    /// The order cells take turns in: the baseline, then the cells closest to a verdict.
    fn turns(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.outcomes.len()).collect();
        let closeness = |c: usize| match Some(c) == self.baseline {
            true => f64::NEG_INFINITY,
            false => self.decisions[c].p_fewer.min(self.decisions[c].p_more),
        };
        order.sort_by(|&a, &b| closeness(a).total_cmp(&closeness(b)));
        order
    }
}

fn outcome(verdict: Option<Verdict>) -> Seen {
    match verdict {
        Some(Verdict::Fail) => Some(true),
        Some(Verdict::Pass) => Some(false),
        Some(Verdict::Error) | None => None,
    }
}

/// An error, the trials (cell, index) it stopped, and whether it was infrastructure's.
type Failure = (Vec<(usize, u32)>, String, bool);

/// The scheduler's state during one run.
struct Walk<'s> {
    by_cell: Vec<Vec<&'s PlannedTrial>>,
    /// Position of each trial index in its cell's list (for `stop_after`).
    position: Vec<HashMap<u32, usize>>,
    states: Vec<CellState>,
    results: Vec<TrialResult>,
    /// Errors, with the trials they stopped and whether they were infrastructure's.
    failures: Vec<Failure>,
    /// The trials waiting on each started key, the one that started it first.
    waiting_on: HashMap<Key, Vec<(usize, u32)>>,
    /// Results by key, kept only for keys planned more than once (cells sharing a trial).
    known: HashMap<Key, Arc<Resolved>>,
    auto: Option<Auto>,
}

impl Walk<'_> {
    /// Whether trial `index` of `cell` is in the cell (before or at its stop point).
    fn in_cell(&self, cell: usize, index: u32) -> bool {
        in_cell(
            &self.states,
            self.auto.as_ref(),
            &self.position,
            cell,
            index,
        )
    }
}

/// Whether trial `index` of `cell` is in the cell: before or at its `stop_after` stop point,
/// or under `trials: auto` among the first trials a stopped cell's verdict rests on.
fn in_cell(
    states: &[CellState],
    auto: Option<&Auto>,
    position: &[HashMap<u32, usize>],
    cell: usize,
    index: u32,
) -> bool {
    match auto {
        Some(a) if !a.decisions[cell].running() => position[cell]
            .get(&index)
            .is_some_and(|&pos| pos < a.limit(cell)),
        Some(_) => true,
        None => states[cell].cutoff.is_none_or(|cut| index <= cut),
    }
}

/// Stored entries to read before the prefetch is worth spreading over cores.
const PREFETCH_PARALLEL: usize = 32;

impl Schedule<'_> {
    /// Looks every trial up, has `executor` run the misses, and gathers every cell's results.
    pub(crate) fn run(
        self,
        executor: &mut dyn Executor,
        on_event: &mut dyn FnMut(Event),
    ) -> crate::error::Result<Executed> {
        let by_cell: Vec<Vec<&PlannedTrial>> = (0..self.recipe.cells.len())
            .map(|c| {
                self.dag
                    .cell_trials(c)
                    .into_iter()
                    .map(|i| &self.planned[i])
                    .collect()
            })
            .collect();
        let auto = self.recipe.auto.is_some();
        let stop = self.recipe.stop_after.is_some() || auto;
        let mut w = Walk {
            position: by_cell
                .iter()
                .map(|ts| match stop {
                    true => ts.iter().enumerate().map(|(i, p)| (p.index, i)).collect(),
                    false => HashMap::new(),
                })
                .collect(),
            states: by_cell
                .iter()
                .map(|ts| CellState {
                    ended: if stop {
                        vec![None; ts.len()]
                    } else {
                        Vec::new()
                    },
                    steps: if auto {
                        vec![Vec::new(); ts.len()]
                    } else {
                        Vec::new()
                    },
                    ..CellState::default()
                })
                .collect(),
            by_cell,
            results: Vec::new(),
            failures: Vec::new(),
            waiting_on: HashMap::new(),
            known: HashMap::new(),
            auto: self.recipe.auto.map(|a| Auto::new(self.recipe, a)),
        };
        let mut cell_errors = BTreeMap::new();
        for (c, b) in self.bodies.iter().enumerate() {
            if let Err(e) = b {
                cell_errors.insert(c, e.to_string());
                w.states[c].done = true;
            }
        }
        let mut prefetched = self.prefetch();
        crate::timing_mark("trial lookups prefetched");
        let runs_ahead = executor.runs_ahead();
        let mut cancelled = false;
        let mut detached = 0;
        loop {
            if !cancelled && w.auto.is_some() {
                // Cells take turns, one started trial each, until none can move on (a reused
                // trial may let another cell's next look in).
                loop {
                    let turns = w.auto.as_ref().map(Auto::turns).unwrap_or_default();
                    let mut moved = 0;
                    for c in turns {
                        moved += self.advance(
                            c,
                            &mut w,
                            &mut prefetched,
                            executor,
                            (runs_ahead, 1),
                            &mut cell_errors,
                            on_event,
                        );
                    }
                    if moved == 0 {
                        break;
                    }
                }
                self.forget_unneeded(&mut w, executor);
            } else if !cancelled {
                for c in 0..w.by_cell.len() {
                    self.advance(
                        c,
                        &mut w,
                        &mut prefetched,
                        executor,
                        (runs_ahead, usize::MAX),
                        &mut cell_errors,
                        on_event,
                    );
                }
            }
            if executor.pending() == 0 {
                break;
            }
            let ended = match executor.wait(&mut |arrays| on_event(Event::Cluster(arrays)))? {
                Waited::Ended(ended) => ended,
                Waited::Cancelled => {
                    cancelled = true;
                    break;
                }
                Waited::Detached => {
                    detached = executor.pending();
                    break;
                }
            };
            for (key, outcome) in ended {
                // Not awaited: forgotten (its cells decided without it).
                let Some(waiters) = w.waiting_on.remove(&key) else {
                    continue;
                };
                for &(c, _) in &waiters {
                    w.states[c].in_flight -= 1;
                }
                let infra = matches!(outcome, Outcome::Unrecorded(_));
                match outcome {
                    Outcome::Done(m, source, dir) => {
                        let r = resolve(*m, dir);
                        if self.dag.users(&key) > 1 {
                            w.known.insert(key, r.clone());
                        }
                        for (i, (c, index)) in waiters.into_iter().enumerate() {
                            let src = if i == 0 { source } else { Source::Reused };
                            self.accept(c, index, &r, src, &mut w, on_event);
                        }
                    }
                    Outcome::Cancelled => cancelled = true,
                    Outcome::Failed(e) | Outcome::Unrecorded(e) => {
                        for &(c, index) in &waiters {
                            on_event(Event::Failed {
                                cell: &self.recipe.cells[c].name,
                                index,
                                error: &e,
                            });
                            self.ended(c, index, None, &[], &mut w);
                        }
                        w.failures.push((waiters, e, infra));
                    }
                }
            }
            if self.cancel.is_cancelled() {
                cancelled = true;
            }
            self.forget_unneeded(&mut w, executor);
        }
        // Trials past a cell's stop point (run ahead, finished before they were forgotten)
        // stay in the store for a later build, but are not the cell's: a local build, in
        // order, would not have run them.
        let Walk {
            mut results,
            failures,
            states,
            mut auto,
            position,
            ..
        } = w;
        if let Some(a) = &mut auto {
            // Over: a cell still running stops where it is (the report says why).
            a.budget_spent = true;
            a.replan(None);
        }
        let in_cell = |c: usize, i: u32| in_cell(&states, auto.as_ref(), &position, c, i);
        results.retain(|r| in_cell(r.cell, r.index));
        results.sort_by_key(|r| (r.cell, r.index));
        let failures: Vec<_> = failures
            .into_iter()
            .filter(|(users, _, _)| users.iter().any(|&(c, i)| in_cell(c, i)))
            .collect();
        let mut unrecorded = BTreeMap::new();
        for &(c, _) in failures
            .iter()
            .flat_map(|(users, _, _)| users)
            .filter(|&&(c, i)| in_cell(c, i))
        {
            *unrecorded.entry(c).or_insert(0) += 1;
        }
        let infrastructure = failures.iter().any(|(_, _, infra)| *infra);
        Ok(Executed {
            results,
            cell_errors,
            failures: failures.into_iter().map(|(_, e, _)| e).collect(),
            unrecorded,
            infrastructure,
            cancelled,
            detached,
        })
    }

    /// Moves cell `c` through its trials as far as it can go without waiting: a result known
    /// (stored, or run by another cell sharing the key) is accepted, a key already started is
    /// waited on, any other is started on the executor. A cell with `stop_after` starts its
    /// next trial only once the previous one ended, unless the executor runs ahead; under
    /// `trials: auto` it starts only what its next look needs. Starts at most `max_starts`
    /// trials on the executor, and returns how many trials it moved past (reused or started).
    #[allow(clippy::too_many_arguments)]
    fn advance(
        &self,
        c: usize,
        w: &mut Walk<'_>,
        prefetched: &mut HashMap<Key, Result<Found, LookupFailed>>,
        executor: &mut dyn Executor,
        (runs_ahead, max_starts): (bool, usize),
        cell_errors: &mut BTreeMap<usize, String>,
        on_event: &mut dyn FnMut(Event),
    ) -> usize {
        let in_order = self.recipe.stop_after.is_some() && !runs_ahead;
        let (mut started, first) = (0, w.states[c].next);
        while !w.states[c].done && started < max_starts {
            let st = &w.states[c];
            if st.next >= w.by_cell[c].len() {
                w.states[c].done = true;
                break;
            }
            if in_order && st.in_flight > 0 {
                break;
            }
            if let Some(a) = &mut w.auto {
                if a.check_budget() || st.next >= a.limit(c) {
                    break;
                }
            }
            let p = w.by_cell[c][st.next];
            w.states[c].next += 1;
            let key = &p.key;
            if let Some(r) = w.known.get(key).cloned() {
                self.accept(c, p.index, &r, Source::Reused, w, on_event);
                continue;
            }
            if let Some(waiters) = w.waiting_on.get_mut(key) {
                waiters.push((c, p.index));
                w.states[c].in_flight += 1;
                continue;
            }
            let looked = match prefetched.remove(key) {
                Some(r) => r,
                None => self.lookup(key),
            };
            let refused = match looked {
                Ok(Found::Hit(r)) => {
                    if self.dag.users(key) > 1 {
                        w.known.insert(key.clone(), r.clone());
                    }
                    // Run on the cluster for a build that did not wait (`--detach`, a
                    // target submitted ahead): executed for this one, which collects it.
                    let source = match executor.collects(key) {
                        true => Source::Executed,
                        false => Source::Reused,
                    };
                    self.accept(c, p.index, &r, source, w, on_event);
                    continue;
                }
                Ok(Found::Miss) => None,
                Ok(Found::Stale { why, result_id }) => {
                    on_event(Event::Stale {
                        cell: &self.recipe.cells[c].name,
                        index: p.index,
                        why: &why,
                    });
                    Some(result_id)
                }
                Err(e) => {
                    let e = e.to_string();
                    on_event(Event::Failed {
                        cell: &self.recipe.cells[c].name,
                        index: p.index,
                        error: &e,
                    });
                    self.ended(c, p.index, None, &[], w);
                    w.failures.push((vec![(c, p.index)], e, true));
                    continue;
                }
            };
            let Ok(make) = &self.bodies[c] else {
                break;
            };
            let job = Job {
                key: key.clone(),
                cell: c,
                index: p.index,
                spec: make(p),
                refused,
            };
            match executor.start(job) {
                Ok(()) => {
                    w.states[c].in_flight += 1;
                    w.waiting_on.insert(key.clone(), vec![(c, p.index)]);
                    started += 1;
                }
                Err(e) => {
                    cell_errors.insert(c, e.to_string());
                    w.states[c].done = true;
                }
            }
        }
        w.states[c].next - first
    }

    /// Pending keys no cell needs any more (every trial waiting on them is past its cell's
    /// stop point) are forgotten, and the executor told.
    fn forget_unneeded(&self, w: &mut Walk<'_>, executor: &mut dyn Executor) {
        if self.recipe.stop_after.is_none() && w.auto.is_none() {
            return;
        }
        let unneeded: Vec<Key> = w
            .waiting_on
            .iter()
            .filter(|(_, users)| users.iter().all(|&(c, i)| !w.in_cell(c, i)))
            .map(|(k, _)| k.clone())
            .collect();
        if unneeded.is_empty() {
            return;
        }
        for k in &unneeded {
            for (c, _) in w.waiting_on.remove(k).unwrap_or_default() {
                w.states[c].in_flight -= 1;
            }
        }
        executor.forget(&unneeded);
    }

    /// `stop_after`: trial `index` of cell `c` ended with `verdict` (`None`: it failed to run).
    /// The cell decides once `events` of its trials, in order, have the event verdict.
    /// `trials: auto`: the sequential test takes the outcome and `steps` (its per-step times)
    /// once every earlier trial of the cell has ended.
    fn ended(
        &self,
        c: usize,
        index: u32,
        verdict: Option<Verdict>,
        steps: &[f64],
        w: &mut Walk<'_>,
    ) {
        if let Some(a) = &mut w.auto {
            let st = &mut w.states[c];
            let Some(&pos) = w.position[c].get(&index) else {
                return;
            };
            if pos >= st.ended.len() || !a.decisions[c].running() {
                return;
            }
            st.ended[pos] = Some(verdict);
            st.steps[pos] = steps.to_vec();
            while let Some(Some(v)) = st.ended.get(st.decided) {
                a.outcomes[c].push(outcome(*v));
                a.steps[c].push(std::mem::take(&mut st.steps[st.decided]));
                st.decided += 1;
            }
            a.replan(Some(c));
            for (cell, d) in a.decisions.iter().enumerate() {
                if !d.running() {
                    w.states[cell].done = true;
                }
            }
            return;
        }
        let Some(stop) = self.recipe.stop_after else {
            return;
        };
        let st = &mut w.states[c];
        if st.cutoff.is_some() {
            return;
        }
        let Some(&pos) = w.position[c].get(&index) else {
            return;
        };
        st.ended[pos] = Some(verdict);
        while let Some(Some(v)) = st.ended.get(st.decided) {
            if *v == Some(stop.event_verdict) {
                st.events += 1;
            }
            st.decided += 1;
            if st.events >= stop.events {
                st.cutoff = Some(w.by_cell[c][st.decided - 1].index);
                st.done = true;
                st.ended = Vec::new();
                break;
            }
        }
    }

    /// Looks every key up once, on all cores (rayon): a cached rerun of 10,000 trials is mostly
    /// this. Keys whose shard is absent are misses without a look (a cold store's build
    /// starts its first trial at once). Misses are re-checked under the claim before
    /// executing, so racing is harmless.
    fn prefetch(&self) -> HashMap<Key, Result<Found, LookupFailed>> {
        let shards = self.store.ac_shards().ok();
        let (keys, absent): (Vec<&Key>, Vec<&Key>) = self
            .dag
            .trial_nodes
            .keys()
            .partition(|k| shards.as_ref().is_none_or(|s| s.contains(k.shard())));
        let mut found: HashMap<Key, Result<Found, LookupFailed>> = absent
            .into_iter()
            .map(|k| (k.clone(), Ok(Found::Miss)))
            .collect();
        // Threads pay off only for many reads (a few store entries take microseconds).
        if keys.len() < PREFETCH_PARALLEL {
            found.extend(keys.iter().map(|&k| (k.clone(), self.lookup(k))));
        } else {
            let looked: Vec<_> = keys
                .par_iter()
                .map(|&k| (k.clone(), self.lookup(k)))
                .collect();
            found.extend(looked);
        }
        found
    }

    /// The store entry for `key` with its record read straight into a [`TrialRecord`] (no JSON
    /// tree: this is most of a cached rerun).
    fn lookup(&self, key: &Key) -> Result<Found, LookupFailed> {
        match self.store.lookup_as::<TrialRecord>(key) {
            Ok(Lookup::Hit(m)) => match crate::reuse::reusable(&m.trial, &self.store, &self.inputs)
            {
                Ok(()) => Ok(Found::Hit(Arc::new(Resolved {
                    key: m.key,
                    exec_seconds: m.exec_seconds,
                    record: Arc::new(m.trial),
                    dir: TrialDir::Stored,
                }))),
                Err(why) => Ok(Found::Stale {
                    result_id: result_id(key, m.exec_seconds, &m.trial),
                    why,
                }),
            },
            Ok(Lookup::Miss) => Ok(Found::Miss),
            Ok(Lookup::Corrupt { reason }) => {
                eprintln!("aorta: cached trial {key} is corrupt ({reason}); re-executing it");
                Ok(Found::Miss)
            }
            Err(source) => Err(LookupFailed {
                key: key.clone(),
                source,
            }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn accept(
        &self,
        c: usize,
        index: u32,
        r: &Arc<Resolved>,
        source: Source,
        w: &mut Walk<'_>,
        on_event: &mut dyn FnMut(Event),
    ) {
        // A record shared between cells keeps its own numbers but reports under this cell.
        let name = &self.recipe.cells[c].name;
        let record = if r.record.cell_name == *name && r.record.trial_index == index {
            r.record.clone()
        } else {
            let mut own = (*r.record).clone();
            own.cell_name = name.clone();
            own.trial_index = index;
            Arc::new(own)
        };
        if let (Some(a), Source::Executed) = (&mut w.auto, source) {
            a.gpu_hours += r.exec_seconds * a.gpus_per_trial / 3600.0;
        }
        self.ended(
            c,
            index,
            Some(record.verdict),
            &record.result.step_times_ms,
            w,
        );
        // Only the first user of an executed trial's directory has it (placed or staged); the
        // others copy theirs out of the store.
        let dir = match source {
            Source::Executed => r.dir.clone(),
            Source::Reused => TrialDir::Stored,
        };
        let t = TrialResult {
            cell: c,
            index,
            key: r.key.clone(),
            exec_seconds: r.exec_seconds,
            record,
            source,
            dir,
        };
        match source {
            Source::Executed => on_event(Event::Executed(&t)),
            Source::Reused => on_event(Event::Reused(&t)),
        }
        w.results.push(t);
    }
}
