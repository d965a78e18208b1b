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
        let (template, registry, id) = match &req.template {
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
                (Some((*recipe).clone()), session.registry(id)?, id)
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
                            auto: None,
                        }),
                        sidecars: req.sidecars.clone(),
                        template: None,
                    },
                    argv: None,
                });
                (None, session.registry(id)?, id)
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
        // The registry's own order is the agent's to improve on; a list the user wrote is theirs.
        let reorder = req.mitigations.is_empty()
            && template.as_ref().and_then(|t| t.probe.as_ref()).is_none();
        let mut candidates: Vec<String> = if !req.mitigations.is_empty() {
            req.mitigations.clone()
        } else if let Some(p) = template.as_ref().and_then(|t| t.probe.as_ref()) {
            p.mitigation_axis.clone()
        } else {
            // Every registered mitigation, this machine's platform's first (a HIP knob cannot
            // fix a CUDA job), then those for any platform, the other platform's last.
            let gpu = session.machine(&*session.recipe(id)?)?.gpu.vendor.clone();
            let mut all: Vec<&aorta_registry::Mitigation> = registry.mitigations().collect();
            all.sort_by_key(|m| (platform_rank(m, gpu.as_deref()), m.name.clone()));
            all.into_iter().map(|m| m.name.clone()).collect()
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
        // The run tests at most max_iterations × the proposer's mitigations per step: its error
        // rate is spread over that many, or over every candidate when there are fewer.
        let testable = req
            .max_iterations
            .saturating_mul(crate::policy::mitigations_per_step(&req.proposer.0));
        let design = Design::new(
            req.confidence,
            (candidates.len() as u32).min(testable),
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
            reorder_by_failure: reorder,
            require_approval: req.require_approval,
            design,
            fingerprint,
        })
    }
}

/// 0: for this machine's GPU vendor; 1: for any; 2: for the other vendor.
fn platform_rank(m: &aorta_registry::Mitigation, machine_vendor: Option<&str>) -> u8 {
    match (m.vendor(), machine_vendor) {
        (None, _) | (_, None) => 1,
        (Some(v), Some(g)) if v == g => 0,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mitigation(name: &str, var: &str) -> aorta_registry::Mitigation {
        aorta_registry::Registry::builtin()
            .mitigation(name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} ({var}) is not built in"))
    }

    #[test]
    fn this_platforms_mitigations_come_first() {
        let hip = mitigation("hip_launch_blocking", "HIP_LAUNCH_BLOCKING");
        let cuda = mitigation("cuda_launch_blocking", "CUDA_LAUNCH_BLOCKING");
        let nccl = mitigation("nccl_p2p_disable", "NCCL_P2P_DISABLE");
        assert_eq!(hip.vendor(), Some("amd"));
        assert_eq!(cuda.vendor(), Some("nvidia"));
        assert_eq!(nccl.vendor(), None);
        assert_eq!(platform_rank(&cuda, Some("nvidia")), 0);
        assert_eq!(platform_rank(&nccl, Some("nvidia")), 1);
        assert_eq!(platform_rank(&hip, Some("nvidia")), 2);
        assert_eq!(platform_rank(&hip, Some("amd")), 0);
        assert_eq!(platform_rank(&hip, None), 1);
    }
}
