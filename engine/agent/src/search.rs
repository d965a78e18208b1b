//! The loop (AORTA §10.2, with evidence): run the baseline until it fails, then per proposal
//! one ordinary engine build of a generated probe recipe with `trials: auto`, whose
//! sequential test runs each candidate (and the baseline beside it) until it is decided. Every step is logged; a re-run with the same arguments replays the logged
//! proposer steps and finds every trial already in the store.

use crate::log::{self, AgentLog, Event};
use crate::outcome::Outcome;
use crate::policy::{AgentStep, Violation, NEEDS_APPROVAL};
use crate::probe::{cell_name, summarize};
use crate::proposer::{CellSummary, ProposeError, Proposer, StepContext};
use crate::stats::{Counts, Design};
use aorta_engine::{Compiled, EngineError, RecipeOrigin, Session, TargetSpec, TrialRecord};
use aorta_recipe::{safe_slug, AgentLook, Recipe, RecipeRequest};
use aorta_registry::Registry;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a run needs besides the session and the proposer.
pub struct AgentConfig {
    pub argv: Vec<String>,
    pub ticket: Option<String>,
    /// The template probe recipe, as compiled, and its file (each look is laid over it).
    pub template: Option<Recipe>,
    pub template_path: Option<PathBuf>,
    /// Sidecar registries (`--mitigations-file`).
    pub sidecars: Vec<PathBuf>,
    pub registry: Registry,
    pub symptom: Option<String>,
    pub max_iterations: u32,
    pub max_walltime: Option<Duration>,
    /// Total trials the run may plan (every cell, every look), or no limit.
    pub max_trials: Option<u64>,
    /// Candidates in order (the allowlist, the template's axis, or every registered name).
    pub candidates: Vec<String>,
    /// Whether the search may try the candidates in the order the baseline's failure suggests
    /// (only for the registry's own list, never for one the user gave).
    pub reorder_by_failure: bool,
    pub require_approval: bool,
    pub design: Design,
    /// Logged with the session so a re-run with other settings does not replay this one.
    pub fingerprint: String,
}

/// How one candidate fared.
#[derive(Debug, Clone, Serialize)]
pub struct Tested {
    pub mitigation: String,
    pub counts: Counts,
    pub errored: u32,
    pub p_value: f64,
    pub verdict: CandidateVerdict,
    /// The matrix's confound tag against the baseline (`-`, `speed (+40%)`, `n/a`, …).
    pub confound: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateVerdict {
    /// Fails less often than the baseline at the run's confidence, and is not slower.
    Fix,
    /// Fails less often, but each step is slower beyond the confound threshold: it may only
    /// hide a race by slowing the job. Never declared a fix.
    SpeedConfound,
    /// No evidence that it helps.
    NotFix,
    /// Testing stopped before a decision (budget, wall time).
    Undecided,
}

impl CandidateVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateVerdict::Fix => "fix",
            CandidateVerdict::SpeedConfound => "speed confound",
            CandidateVerdict::NotFix => "not a fix",
            CandidateVerdict::Undecided => "undecided",
        }
    }
}

/// What a run found; the report renders it.
#[derive(Debug, Clone)]
pub struct AgentResult {
    pub outcome: Outcome,
    pub detail: Option<String>,
    pub run_dir: PathBuf,
    pub ticket: Option<String>,
    pub design: Design,
    pub baseline: Counts,
    pub baseline_errored: u32,
    pub tested: Vec<Tested>,
    pub winner: Option<String>,
    pub iterations: u32,
    pub last_step: Option<AgentStep>,
    pub cells: Vec<CellSummary>,
    /// Trials the last build planned: every distinct trial the search used.
    pub trials_used: u64,
    /// Ctrl-C stopped a build.
    pub interrupted: bool,
}

/// Why the loop stopped early, with its outcome.
pub(crate) struct Stop(pub(crate) Outcome, pub(crate) Option<String>);

impl From<Box<aorta_source::Diag>> for Stop {
    fn from(d: Box<aorta_source::Diag>) -> Stop {
        Stop(
            Outcome::Error,
            Some(format!("the generated probe recipe is invalid: {d}")),
        )
    }
}

impl From<EngineError> for Stop {
    fn from(e: EngineError) -> Stop {
        Stop(Outcome::Error, Some(e.to_string()))
    }
}

pub(crate) struct Run<'a> {
    pub(crate) session: &'a Session,
    pub(crate) cfg: &'a AgentConfig,
    /// The last look's recipe, as compiled.
    pub(crate) look: Option<Arc<Recipe>>,
    pub(crate) log: AgentLog,
    pub(crate) progress: &'a mut dyn FnMut(&str),
    pub(crate) started: Instant,
    pub(crate) res: AgentResult,
    /// Trials per mitigation cell as last built.
    pub(crate) trials: BTreeMap<String, u32>,
    pub(crate) axis: Vec<String>,
    pub(crate) diagnostics: Vec<String>,
    /// Candidate looks: builds use `trials: auto` (the baseline phase's do not).
    pub(crate) auto: bool,
}

/// The run directory: `<output>/<slug(ticket)|_no_ticket_>`, as the builds use.
pub fn run_dir(session: &Session, ticket: Option<&str>) -> Result<PathBuf, EngineError> {
    let output = session.options().output.clone().ok_or_else(|| {
        EngineError::usage("the agent needs an output directory", "pass --output DIR")
    })?;
    let slug = ticket
        .map(safe_slug)
        .unwrap_or_else(|| "_no_ticket_".into());
    std::path::absolute(output.join(slug))
        .map_err(|e| EngineError::infra(format!("cannot resolve the output directory: {e}")))
}

/// The origin of one look: candidates `axis` × `diagnostics`, `trials[m]` trials in `<m>-none`.
fn look(
    cfg: &AgentConfig,
    axis: &[String],
    diagnostics: &[String],
    trials: &BTreeMap<String, u32>,
    auto: bool,
) -> RecipeOrigin {
    RecipeOrigin::Request {
        request: RecipeRequest::AgentLook(AgentLook {
            ticket: cfg.ticket.clone(),
            diagnostic_trials: cfg.template.as_ref().map_or(1, |t| t.trials),
            mitigations: axis.to_vec(),
            diagnostics: diagnostics.to_vec(),
            trials: trials.clone(),
            auto: auto.then(|| cfg.design.auto()),
        }),
        sidecars: cfg.sidecars.clone(),
        template: cfg.template_path.clone(),
    }
}

fn diagnostic_axis(cfg: &AgentConfig) -> Vec<String> {
    let mut d = cfg
        .template
        .as_ref()
        .and_then(|t| t.probe.as_ref())
        .map(|p| p.diagnostic_axis.clone())
        .unwrap_or_default();
    if !d.iter().any(|x| x == "none") {
        d.insert(0, "none".into());
    }
    d
}

/// The first look's recipe compiled, for `--dry-run`: nothing is executed or written.
pub fn dry_run(session: &Session, cfg: &AgentConfig) -> Result<Compiled, EngineError> {
    let mut trials = BTreeMap::new();
    trials.insert("none".to_string(), cfg.design.baseline_looks[0]);
    let id = session.add_target(TargetSpec {
        label: None,
        origin: look(
            cfg,
            &["none".to_string()],
            &diagnostic_axis(cfg),
            &trials,
            false,
        ),
        argv: Some(cfg.argv.clone()),
    });
    session.compile(id)
}

/// Runs the search to an outcome. Errors are pre-loop problems (the run directory or its log
/// cannot be created); everything after that ends in an outcome, logged and returned.
pub fn run(
    session: &Session,
    cfg: &AgentConfig,
    proposer: &mut dyn Proposer,
    progress: &mut dyn FnMut(&str),
) -> Result<AgentResult, EngineError> {
    let dir = run_dir(session, cfg.ticket.as_deref())?;
    // The run directory is under the user's --output: a path that cannot be written is the
    // user's to fix (exit 2), a full disk the machine's (exit 3), as for every writer.
    std::fs::create_dir_all(&dir)
        .map_err(|e| EngineError::output(format!("cannot create {}", dir.display()), &e))?;
    let replay = log::steps_to_replay(&log::read(&dir), &cfg.fingerprint);
    let log = AgentLog::open(&dir).map_err(|e| {
        EngineError::output(
            format!("cannot open {}", dir.join(log::LOG_FILE).display()),
            &e,
        )
    })?;
    let mut run = Run {
        session,
        cfg,
        look: None,
        log,
        progress,
        started: Instant::now(),
        res: AgentResult {
            outcome: Outcome::Error,
            detail: None,
            run_dir: dir,
            ticket: cfg.ticket.clone(),
            design: cfg.design.clone(),
            baseline: Counts::default(),
            baseline_errored: 0,
            tested: Vec::new(),
            winner: None,
            iterations: 0,
            last_step: None,
            cells: Vec::new(),
            trials_used: 0,
            interrupted: false,
        },
        trials: BTreeMap::new(),
        axis: vec!["none".into()],
        diagnostics: diagnostic_axis(cfg),
        auto: false,
    };
    let Stop(outcome, detail) = match run.search(proposer, replay.into()) {
        Ok(()) => Stop(
            Outcome::Error,
            Some("the search ended without an outcome".into()),
        ),
        Err(stop) => stop,
    };
    run.res.outcome = outcome;
    run.res.detail = detail.clone();
    run.event(Event::Outcome { outcome, detail })?;
    Ok(run.res)
}

impl Run<'_> {
    pub(crate) fn event(&mut self, e: Event) -> Result<(), EngineError> {
        self.log.append(e).map_err(|e| {
            EngineError::infra(format!(
                "cannot append to {}: {e}",
                self.log.path().display()
            ))
        })
    }

    pub(crate) fn say(&mut self, msg: String) {
        (self.progress)(&msg);
    }

    fn check_walltime(&self) -> Result<(), Stop> {
        match self.cfg.max_walltime {
            Some(max) if self.started.elapsed() >= max => Err(Stop(
                Outcome::WalltimeExhausted,
                Some(format!("--max-walltime-sec {} reached", max.as_secs_f64())),
            )),
            _ => Ok(()),
        }
    }

    /// One look: build the recipe with the current trial counts, return each cell's records
    /// by mitigation.
    pub(crate) fn build(&mut self) -> Result<BTreeMap<String, Vec<TrialRecord>>, Stop> {
        self.check_walltime()?;
        let id = self.session.add_target(TargetSpec {
            label: None,
            origin: look(
                self.cfg,
                &self.axis,
                &self.diagnostics,
                &self.trials,
                self.auto,
            ),
            argv: Some(self.cfg.argv.clone()),
        });
        let c = self.session.compile(id).map_err(|e| match e {
            EngineError::Input(d) => Stop::from(d),
            e => Stop::from(e),
        })?;
        // The most the look can use: under trials: auto every cell may run to the cap, but the
        // cells decided in earlier looks are store hits up to where they stopped.
        let planned: u64 = c
            .recipe
            .cells
            .iter()
            .map(|cell| u64::from(cell.effective_trials(&c.recipe)))
            .sum();
        let bound = match self.auto {
            false => planned,
            true => {
                let decided: u64 = self
                    .res
                    .tested
                    .iter()
                    .filter(|t| t.verdict != CandidateVerdict::Undecided)
                    .map(|t| u64::from(t.counts.trials + t.errored))
                    .sum();
                let open = self
                    .res
                    .tested
                    .iter()
                    .filter(|t| t.verdict == CandidateVerdict::Undecided)
                    .count() as u64;
                // Each open candidate, and the baseline beside them, up to the cap.
                let cap = u64::from(self.cfg.design.max_candidate_trials());
                let baseline = u64::from(self.res.baseline.trials + self.res.baseline_errored);
                decided + open * cap + baseline.max(cap)
            }
        };
        if let Some(max) = self.cfg.max_trials.filter(|&m| bound > m) {
            return Err(Stop(
                Outcome::PolicyStop,
                Some(format!(
                    "the next look may need {bound} trials in all; --max-trials is {max}"
                )),
            ));
        }
        self.look = Some(c.recipe.clone());
        let out = self.session.build(&c, &mut |_| {})?;
        if out.cancelled {
            self.res.interrupted = true;
            return Err(Stop(Outcome::Error, Some("interrupted".into())));
        }
        if !self.auto {
            self.res.trials_used = planned;
        }
        let records = self.session.trial_records(&c)?;
        self.res.cells = c
            .recipe
            .cells
            .iter()
            .zip(&records)
            .map(|(cell, r)| summarize(&cell.name, r))
            .collect();
        let mut by_m = BTreeMap::new();
        for (cell, r) in c.recipe.cells.iter().zip(records) {
            if let Some(m) = self.axis.iter().find(|m| cell.name == cell_name(m)) {
                by_m.insert(m.clone(), r);
            }
        }
        Ok(by_m)
    }

    fn search(
        &mut self,
        proposer: &mut dyn Proposer,
        mut replay: VecDeque<AgentStep>,
    ) -> Result<(), Stop> {
        let design = self.cfg.design.clone();
        self.event(Event::SessionStart {
            ticket: self.cfg.ticket.clone(),
            ticket_slug: self
                .cfg
                .ticket
                .as_deref()
                .map(safe_slug)
                .unwrap_or_else(|| "_no_ticket_".into()),
            argv: self.cfg.argv.clone(),
            symptom: self.cfg.symptom.clone(),
            llm_backend: proposer.backend().into(),
            fingerprint: self.cfg.fingerprint.clone(),
            design: design.clone(),
        })?;
        if !replay.is_empty() {
            self.event(Event::Resume {
                replayed_steps: replay.len(),
            })?;
        }
        self.baseline()?;
        let mut order = self.cfg.candidates.clone();
        if self.cfg.reorder_by_failure {
            let detectors: Vec<String> = self
                .res
                .cells
                .iter()
                .flat_map(|c| c.failure_detectors.iter().cloned())
                .collect();
            let category = crate::proposer::categorize(&detectors, self.cfg.symptom.as_deref());
            // Stable: the platform order stays within each rank.
            order.sort_by_key(|m| crate::proposer::relevance(category, m));
        }
        loop {
            if self.res.iterations >= self.cfg.max_iterations {
                return Err(Stop(
                    Outcome::PolicyStop,
                    Some(format!(
                        "--max-iterations {} reached",
                        self.cfg.max_iterations
                    )),
                ));
            }
            self.check_walltime()?;
            let tried: Vec<String> = self
                .res
                .tested
                .iter()
                .map(|t| t.mitigation.clone())
                .collect();
            let untried: Vec<String> = order
                .iter()
                .filter(|c| !tried.contains(c))
                .cloned()
                .collect();
            let step = match replay.pop_front() {
                Some(s) => s,
                None => {
                    let cx = StepContext {
                        symptom: self.cfg.symptom.as_deref(),
                        cell_summaries: &self.res.cells,
                        candidates: &untried,
                        already_tried: &tried,
                        baseline_passed: false,
                    };
                    match proposer.step(&cx, &self.cfg.registry) {
                        Ok(s) => s,
                        Err(ProposeError::Violation(Violation::Policy(m))) => {
                            return Err(Stop(Outcome::PolicyStop, Some(m)))
                        }
                        Err(ProposeError::Violation(Violation::Registry(m))) => {
                            return Err(Stop(Outcome::RegistryError, Some(m)))
                        }
                        Err(ProposeError::Transport(m)) => {
                            return Err(Stop(Outcome::Error, Some(m)))
                        }
                    }
                }
            };
            self.event(Event::LlmStep {
                iteration: self.res.iterations,
                step: step.clone(),
            })?;
            self.res.last_step = Some(step.clone());
            let stop_outcome = || {
                if untried.is_empty() {
                    Outcome::ExhaustedCandidates
                } else {
                    Outcome::AgentStop
                }
            };
            if step.stop || step.next_mitigations.is_empty() {
                return Err(Stop(stop_outcome(), step.stop_reason.clone()));
            }
            if let Some(bad) = step
                .next_mitigations
                .iter()
                .find(|m| !self.cfg.candidates.contains(m))
            {
                return Err(Stop(
                    Outcome::PolicyStop,
                    Some(format!("{bad:?} is not a candidate of this search")),
                ));
            }
            let per_step = crate::policy::mitigations_per_step(proposer.backend()) as usize;
            let fresh: Vec<String> = step
                .next_mitigations
                .iter()
                .filter(|m| !tried.contains(m))
                .take(per_step)
                .cloned()
                .collect();
            if fresh.is_empty() {
                return Err(Stop(
                    stop_outcome(),
                    Some("only already-tried mitigations proposed".into()),
                ));
            }
            if self.cfg.require_approval {
                if let Some(m) = fresh.iter().find(|m| NEEDS_APPROVAL.contains(&m.as_str())) {
                    return Err(Stop(
                        Outcome::ApprovalRequired,
                        Some(format!("{m} changes the program's semantics or speed; re-run without --require-approval to allow it")),
                    ));
                }
            }
            for d in &step.diagnostics {
                if !self.diagnostics.contains(d) {
                    self.diagnostics.push(d.clone());
                }
            }
            for m in &fresh {
                self.event(Event::MitigationTried {
                    mitigation: m.clone(),
                })?;
            }
            if let Some(t) = self.candidates(&fresh)? {
                self.res.winner = Some(t.mitigation.clone());
                self.event(Event::Converged {
                    mitigation: t.mitigation,
                })?;
                return Err(Stop(Outcome::Converged, None));
            }
            self.res.iterations += 1;
            self.event(Event::IterationComplete {
                iterations_completed: self.res.iterations,
            })?;
        }
    }
}
