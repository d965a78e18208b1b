//! Trials from the engine: each step of a search that needs trials not yet known is one build
//! of a [`BisectProbe`] request, one cell per configuration asked for. A configuration's trials
//! are keyed by its resolved env (names are not in keys), so a configuration asked again — by a
//! later step, a rerun, a resumed run after a kill, another machine through the remote cache —
//! is a store hit, and the build runs under whatever executor the session has.

use crate::judge::Trials;
use aorta_engine::{EngineError, RecipeOrigin, Session, TargetSpec};
use aorta_recipe::{BisectCell, BisectProbe, RecipeRequest};
use aorta_report::sequential::{outcomes_of, Outcome};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One configuration to run the command under: mitigations stacked in order, then `env`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Config {
    pub mitigations: Vec<String>,
    pub env: BTreeMap<String, String>,
}

impl Config {
    pub fn env(env: BTreeMap<String, String>) -> Config {
        Config {
            mitigations: Vec::new(),
            env,
        }
    }

    /// `p-` and 12 hex digits of the content's blake3: the same configuration has the same cell
    /// name in every step and run.
    pub fn name(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        format!("p-{}", &blake3::hash(text.as_bytes()).to_hex()[..12])
    }
}

/// Builds and their trials, for the summary.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Work {
    pub builds: u32,
    pub executed: u64,
    pub reused: u64,
}

pub struct EngineTrials<'a> {
    session: &'a Session,
    argv: Vec<String>,
    pub ticket: Option<String>,
    sidecars: Vec<PathBuf>,
    timeout_per_trial: Option<f64>,
    known: BTreeMap<Config, Vec<Outcome>>,
    pub work: Work,
    /// The run directory of the last build.
    pub run_dir: Option<PathBuf>,
    /// Ctrl-C stopped a build (the search returns an error; what finished is stored).
    pub interrupted: bool,
    progress: &'a mut dyn FnMut(&str),
}

impl<'a> EngineTrials<'a> {
    pub fn new(
        session: &'a Session,
        argv: Vec<String>,
        ticket: Option<String>,
        sidecars: Vec<PathBuf>,
        timeout_per_trial: Option<f64>,
        progress: &'a mut dyn FnMut(&str),
    ) -> EngineTrials<'a> {
        EngineTrials {
            session,
            argv,
            ticket,
            sidecars,
            timeout_per_trial,
            known: BTreeMap::new(),
            work: Work::default(),
            run_dir: None,
            interrupted: false,
            progress,
        }
    }

    fn origin(&self, cells: Vec<BisectCell>) -> RecipeOrigin {
        RecipeOrigin::Request {
            request: RecipeRequest::BisectProbe(BisectProbe {
                ticket: self.ticket.clone(),
                cells,
                timeout_per_trial: self.timeout_per_trial,
            }),
            sidecars: self.sidecars.clone(),
            template: None,
        }
    }

    /// The first step's recipe compiled and nothing run (`--dry-run`, and checking the
    /// configurations and the command before any trial).
    pub fn compile(&self, wanted: &[(Config, u32)]) -> Result<aorta_engine::Compiled, EngineError> {
        let cells = wanted
            .iter()
            .map(|(c, n)| BisectCell {
                name: c.name(),
                mitigations: c.mitigations.clone(),
                env: c.env.clone(),
                trials: *n,
            })
            .collect();
        let id = self.session.add_target(TargetSpec {
            label: None,
            origin: self.origin(cells),
            argv: Some(self.argv.clone()),
        });
        self.session.compile(id)
    }
}

impl Trials for EngineTrials<'_> {
    type Config = Config;
    type Error = EngineError;

    fn first(&mut self, wanted: &[(Config, u32)]) -> Result<Vec<Vec<Outcome>>, EngineError> {
        let missing = wanted
            .iter()
            .any(|(c, n)| self.known.get(c).is_none_or(|o| (o.len() as u32) < *n));
        if missing {
            // Only the configurations short of trials: the others (the ends, mostly) are known,
            // and a build places every trial of its cells in the run directory.
            let mut most: Vec<(Config, u32)> = Vec::new();
            for (c, n) in wanted {
                if self.known.get(c).is_some_and(|o| o.len() as u32 >= *n) {
                    continue;
                }
                match most.iter_mut().find(|(x, _)| x == c) {
                    Some(m) => m.1 = m.1.max(*n),
                    None => most.push((c.clone(), *n)),
                }
            }
            let compiled = self.compile(&most)?;
            let out = self.session.build(&compiled, &mut |_| {})?;
            if out.cancelled {
                self.interrupted = true;
                return Err(EngineError::infra("interrupted"));
            }
            self.work.builds += 1;
            self.work.executed += out.executed as u64;
            self.work.reused += out.reused as u64;
            self.run_dir = Some(out.run_dir.clone());
            (self.progress)(&format!(
                "build {}: {} configuration(s), {} trial(s) executed, {} reused",
                self.work.builds,
                most.len(),
                out.executed,
                out.reused
            ));
            let records = self.session.trial_records(&compiled)?;
            for ((c, n), r) in most.iter().zip(records) {
                let mut o = outcomes_of(r.iter().map(|t| (t.trial_index, t.verdict)));
                o.resize(*n as usize, None);
                self.known.insert(c.clone(), o);
            }
        }
        Ok(wanted
            .iter()
            .map(|(c, n)| self.known[c][..*n as usize].to_vec())
            .collect())
    }
}
