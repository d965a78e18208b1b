//! `aorta agent [OPTIONS] -- COMMAND…`: validates AORTA's flags, resolves the candidates and
//! the test's design, then hands the search to `aorta_agent` and prints its outcome.

use crate::args::AgentArgs;
use crate::exit::{self, usage, CliResult};
use aorta_agent::proposer::{Fake, OpenAi, OpenAiSettings, Proposer};
use aorta_agent::{AgentConfig, Design, Outcome};
use aorta_recipe::{load_recipe, Mode};
use aorta_registry::Registry;
use serde::Serialize;
use std::process::ExitCode;
use std::time::Duration;

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

fn flag_shaped(flag: &str, value: Option<&str>) -> Result<(), exit::CliError> {
    match value {
        Some(v) if v.starts_with("--") => Err(usage(
            format!("aorta agent: {flag} got {v:?}, which looks like a flag"),
            "is a shell variable unset? quote the value or set it",
        )),
        _ => Ok(()),
    }
}

pub fn agent(a: &AgentArgs) -> CliResult {
    if a.command.is_empty() {
        return Err(usage(
            "aorta agent: no command to triage",
            "put the command after --, e.g. aorta agent --mitigation xnack -- bash repro.sh",
        ));
    }
    flag_shaped("--recipe", a.recipe.as_deref().and_then(|p| p.to_str()))?;
    flag_shaped("--ticket", a.ticket.as_deref())?;
    flag_shaped("--output", a.output.to_str())?;
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        return Err(usage(
            format!(
                "aorta agent: --confidence {} is not between 0 and 1",
                a.confidence
            ),
            "e.g. --confidence 0.95",
        ));
    }
    let walltime = match a.max_walltime_sec {
        Some(s) if !(s > 0.0 && s.is_finite()) => {
            return Err(usage(
                format!("aorta agent: --max-walltime-sec {s} must be a positive number"),
                "e.g. --max-walltime-sec 3600",
            ))
        }
        s => s.map(Duration::from_secs_f64),
    };
    let backend = if a.llm_backend == "fake" {
        "fake"
    } else {
        "openai"
    };
    if backend == "openai" && a.llm_url.is_none() {
        return Err(usage(
            "aorta agent: --llm-backend openai needs --llm-url",
            "e.g. --llm-url http://127.0.0.1:8000/v1 (vLLM, Ollama and LiteLLM serve this API)",
        ));
    }
    let (template, registry) = match &a.recipe {
        Some(path) => {
            let loaded = load_recipe(path, &a.mitigations_files)?;
            if loaded.recipe.mode != Mode::Probe {
                return Err(usage(
                    format!(
                        "{}: is not a probe-mode recipe; set 'mode: probe'",
                        path.display()
                    ),
                    "the agent's template is a probe recipe (it wraps the command after --)",
                ));
            }
            (Some(loaded.recipe), loaded.registry)
        }
        None => (None, Registry::load(None, &a.mitigations_files)?),
    };
    for m in &a.mitigations {
        if registry.mitigation(m).is_none() {
            return Err(usage(
                format!("aorta agent: --mitigation {m:?} is not a registered mitigation"),
                registry.unknown_mitigation_hint(m),
            ));
        }
    }
    let mut candidates: Vec<String> = if !a.mitigations.is_empty() {
        a.mitigations.clone()
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
        return Err(usage(
            "aorta agent: no candidate mitigations",
            "name some with --mitigation, or give a template whose mitigation_axis has more than none",
        ));
    }
    let design = Design::new(
        a.confidence,
        candidates.len() as u32,
        a.max_baseline_trials,
        a.max_trials_per_cell,
    );
    let fingerprint = serde_json::to_string(&Fingerprint {
        argv: &a.command,
        ticket: a.ticket.as_deref(),
        symptom: a.symptom.as_deref(),
        candidates: &candidates,
        design: &design,
        backend,
        model: &a.llm_model,
        url: a.llm_url.as_deref(),
        template: template
            .as_ref()
            .and_then(|t| t.source.as_ref())
            .map(|s| s.blake3.clone()),
    })
    .map_err(|e| exit::infra(format!("cannot encode the run's fingerprint: {e}")))?;
    let ticket = a
        .ticket
        .clone()
        .or_else(|| template.as_ref().and_then(|t| t.ticket.clone()))
        .filter(|t| !t.trim().is_empty());
    let cfg = AgentConfig {
        argv: a.command.clone(),
        ticket,
        template,
        registry,
        symptom: a.symptom.clone(),
        max_iterations: a.max_iterations,
        max_walltime: walltime,
        max_trials: a.max_trials,
        candidates,
        require_approval: a.require_approval,
        design,
        fingerprint,
    };
    let session = aorta_engine::Session::open(aorta_engine::SessionOptions {
        store: a.store.clone(),
        env_snapshot: a.env_snapshot.clone(),
        python: a.python.clone(),
        remote: aorta_engine::RemoteSettings {
            url: a.remote.remote_cache.clone(),
            mode: a.remote.remote_cache_mode.clone(),
            namespace: a.remote.remote_cache_namespace.clone(),
            timeout: a.remote.remote_cache_timeout.clone(),
            retries: None,
            hmac_key_file: None,
        },
        jobs: a.jobs,
        output: Some(a.output.clone()),
        tracer: crate::args::tracer(),
        ..Default::default()
    })?;
    if a.dry_run {
        let c = aorta_agent::dry_run(&session, &cfg)?;
        crate::output::print_plans(&[session.plan(&c)], false)?;
        println!("Dry-run complete: planned probe cells printed above; no artifacts written.");
        return Ok(ExitCode::SUCCESS);
    }
    let mut proposer: Box<dyn Proposer> = if backend == "fake" {
        Box::new(Fake)
    } else {
        Box::new(OpenAi::new(OpenAiSettings {
            url: a.llm_url.clone().unwrap_or_default(),
            model: a.llm_model.clone(),
            api_key: std::env::var("AORTA_LLM_API_KEY")
                .or_else(|_| std::env::var("OPENAI_API_KEY"))
                .ok()
                .filter(|k| !k.is_empty()),
            timeout: Duration::from_secs_f64(a.llm_timeout.clamp(0.1, 3600.0)),
        }))
    };
    let verbose = a.verbose;
    let mut progress = |m: &str| {
        if verbose > 0 {
            eprintln!("aorta agent: {m}");
        }
    };
    let result = aorta_agent::run(&session, &cfg, proposer.as_mut(), &mut progress)?;
    let report = aorta_agent::report::write(&result, &result.run_dir).map_err(|e| {
        exit::infra(format!(
            "cannot write the report in {}: {e}",
            result.run_dir.display()
        ))
    })?;
    let outcome = result.outcome;
    match &result.detail {
        Some(d) if outcome != Outcome::Converged => {
            println!("Agent outcome: {outcome} — {} ({d})", outcome.headline())
        }
        _ => println!("Agent outcome: {outcome} — {}", outcome.headline()),
    }
    println!("Wrote {}", report.display());
    println!("{}", aorta_agent::report::recommendation(&result));
    if a.bundle {
        match crate::cmd_bundle::bundle_agent_run(
            &result.run_dir,
            a.recipe.as_deref(),
            result.ticket.clone(),
            &a.output,
        ) {
            Ok(line) => println!("{line}"),
            // AORTA: a failed bundle is a warning; the search's outcome stands.
            Err(e) => eprintln!(
                "WARNING: --bundle requested but bundling failed: {}. No bundle was written.",
                e.report
            ),
        }
    }
    if result.interrupted {
        return Ok(ExitCode::from(exit::INTERRUPTED));
    }
    // AORTA: every loop outcome exits 0.
    Ok(ExitCode::SUCCESS)
}
