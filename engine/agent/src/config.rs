//! From the command line's request to a run's configuration: the template recipe and the
//! registry come from the session's compile database (the agent never loads a recipe itself),
//! then the candidates, the test's design and the fingerprint that decides what a re-run
//! resumes.

use crate::search::AgentConfig;
use crate::stats::Design;
use aorta_engine::{EngineError, RecipeOrigin, Session, TargetSpec};
use aorta_recipe::{AgentLook, Mode, RecipeRequest};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// `aorta agent`'s settings as parsed from its flags.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    /// The command to triage.
    pub argv: Vec<String>,
    /// The template probe recipe (`--recipe`).
    pub template: Option<PathBuf>,
    /// Sidecar registries (`--mitigations-file`).
    pub sidecars: Vec<PathBuf>,
    /// The candidate allowlist (`--mitigation`); empty: the template's axis, else every
    /// registered mitigation.
    pub mitigations: Vec<String>,
    pub ticket: Option<String>,
    pub symptom: Option<String>,
    pub confidence: f64,
    pub max_baseline_trials: u32,
    pub max_trials_per_cell: u32,
    pub max_iterations: u32,
    pub max_walltime: Option<Duration>,
    pub max_trials: Option<u64>,
    pub require_approval: bool,
    /// Who proposes (backend, model, endpoint): part of the fingerprint, since another
    /// proposer makes other steps.
    pub proposer: (String, String, Option<String>),
}

/// What makes two invocations "the same arguments" for resuming: not the budgets, so a
/// stopped run can be continued with a larger one.
#[derive(Serialize)]
struct Fingerprint<'a> {
    argv: &'a [String],
    ticket: Option<&'a str>,
    symptom: Option<&'a str>,
    candidates: &'a [String],
    design: &'a Design,
    backend: &'a str,
    model: &'a str,
    url: Option<&'a str>,
    template: Option<String>,
}

impl AgentConfig {
    /// Resolves a request against the session: the template (a probe recipe) and registry
    /// through the compile database, the candidates checked against that registry.
    pub fn prepare(session: &Session, req: AgentRequest) -> Result<AgentConfig, EngineError> {
        let (template, registry) = match &req.template {
            Some(path) => {
                let id = session.add_target(TargetSpec {
                    label: None,
                    origin: RecipeOrigin::File {
                        path: path.clone(),
                        sidecars: req.sidecars.clone(),
                        overlays: Default::default(),
                    },
                    argv: None,
                });
                let recipe = session.recipe(id)?;
                if recipe.mode != Mode::Probe {
                    return Err(EngineError::usage(
                        format!(
                            "{}: is not a probe-mode recipe; set 'mode: probe'",
                            path.display()
                        ),
                        "the agent's template is a probe recipe (it wraps the command after --)",
                    ));
                }
                (Some((*recipe).clone()), session.registry(id)?)
            }
            None => {
                // A look's origin without a template: its registry is the sidecars alone.
                let id = session.add_target(TargetSpec {
                    label: None,
                    origin: RecipeOrigin::Request {
                        request: RecipeRequest::AgentLook(AgentLook {
                            ticket: None,
                            diagnostic_trials: 1,
                            mitigations: vec!["none".into()],
                            diagnostics: vec!["none".into()],
                            trials: Default::default(),
                        }),
                        sidecars: req.sidecars.clone(),
                        template: None,
                    },
                    argv: None,
                });
                (None, session.registry(id)?)
            }
        };
        for m in &req.mitigations {
            if registry.mitigation(m).is_none() {
                return Err(EngineError::usage(
                    format!("aorta agent: --mitigation {m:?} is not a registered mitigation"),
                    registry.unknown_mitigation_hint(m),
                ));
            }
        }
        let mut candidates: Vec<String> = if !req.mitigations.is_empty() {
            req.mitigations.clone()
        } else if let Some(p) = template.as_ref().and_then(|t| t.probe.as_ref()) {
            p.mitigation_axis.clone()
        } else {
            let mut all: Vec<String> = registry.mitigations().map(|m| m.name.clone()).collect();
            all.sort();
            all
        };
        candidates.retain(|m| m != "none");
        let mut seen = std::collections::HashSet::new();
        candidates.retain(|m| seen.insert(m.clone()));
        if candidates.is_empty() {
            return Err(EngineError::usage(
                "aorta agent: no candidate mitigations",
                "name some with --mitigation, or give a template whose mitigation_axis has more than none",
            ));
        }
        let design = Design::new(
            req.confidence,
            candidates.len() as u32,
            req.max_baseline_trials,
            req.max_trials_per_cell,
        );
        let (backend, model, url) = &req.proposer;
        let fingerprint = serde_json::to_string(&Fingerprint {
            argv: &req.argv,
            ticket: req.ticket.as_deref(),
            symptom: req.symptom.as_deref(),
            candidates: &candidates,
            design: &design,
            backend,
            model,
            url: url.as_deref(),
            template: template
                .as_ref()
                .and_then(|t| t.source.as_ref())
                .map(|s| s.blake3.clone()),
        })
        .map_err(|e| EngineError::infra(format!("cannot encode the run's fingerprint: {e}")))?;
        let ticket = req
            .ticket
            .clone()
            .or_else(|| template.as_ref().and_then(|t| t.ticket.clone()))
            .filter(|t| !t.trim().is_empty());
        Ok(AgentConfig {
            argv: req.argv,
            ticket,
            template,
            template_path: req.template,
            sidecars: req.sidecars,
            registry,
            symptom: req.symptom,
            max_iterations: req.max_iterations,
            max_walltime: req.max_walltime,
            max_trials: req.max_trials,
            candidates,
            require_approval: req.require_approval,
            design,
            fingerprint,
        })
    }
}
