//! `aorta agent [OPTIONS] -- COMMAND…`: validates AORTA's flags into an [`AgentRequest`],
//! which `aorta_agent` resolves against the session (template, candidates, design) and
//! searches; this prints its outcome.

use crate::args::AgentArgs;
use crate::exit::{self, usage, CliResult};
use aorta_agent::proposer::{Fake, OpenAi, OpenAiSettings, Proposer};
use aorta_agent::{AgentConfig, AgentRequest, Outcome};
use std::process::ExitCode;
use std::time::Duration;

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
    let session = aorta_engine::Session::open(aorta_engine::SessionOptions {
        store: a.store.clone(),
        env_snapshot: a.env_snapshot.clone(),
        python: a.python.clone(),
        remote: a.remote.settings(),
        jobs: a.jobs,
        output: Some(a.output.clone()),
        tracer: crate::args::tracer(),
        ..Default::default()
    })?;
    let cfg = AgentConfig::prepare(
        &session,
        AgentRequest {
            argv: a.command.clone(),
            template: a.recipe.clone(),
            sidecars: a.mitigations_files.clone(),
            mitigations: a.mitigations.clone(),
            ticket: a.ticket.clone(),
            symptom: a.symptom.clone(),
            confidence: a.confidence,
            max_baseline_trials: a.max_baseline_trials,
            max_trials_per_cell: a.max_trials_per_cell,
            max_iterations: a.max_iterations,
            max_walltime: walltime,
            max_trials: a.max_trials,
            require_approval: a.require_approval,
            proposer: (backend.into(), a.llm_model.clone(), a.llm_url.clone()),
        },
    )?;
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
        aorta_engine::EngineError::output(
            format!("cannot write the report in {}", result.run_dir.display()),
            &e,
        )
    })?;
    // The last look rendered report.html for its own matrix: render it again with the
    // agent's verdict as the answer and its search.
    let (answer, search) = aorta_agent::report::page(&result);
    if result.run_dir.join("report.html").is_file() {
        if let Err(e) = aorta_engine::render_run_dir(
            &result.run_dir,
            &a.mitigations_files,
            Some((&answer, &search)),
        ) {
            eprintln!("aorta agent: warning: report.html keeps the last look's matrix: {e}");
        }
    }
    let outcome = result.outcome;
    if a.json {
        #[derive(serde::Serialize)]
        struct AgentJson<'a> {
            outcome: String,
            winner: Option<&'a str>,
            run_dir: &'a std::path::Path,
            report: &'a std::path::Path,
            trials_used: u64,
            answer: &'a aorta_engine::Answer,
            search: &'a aorta_engine::AgentPage,
        }
        let line = serde_json::to_string(&AgentJson {
            outcome: outcome.to_string(),
            winner: result.winner.as_deref(),
            run_dir: &result.run_dir,
            report: &report,
            trials_used: result.trials_used,
            answer: &answer,
            search: &search,
        })
        .unwrap_or_default();
        println!("{line}");
    } else {
        match &result.detail {
            Some(d) if outcome != Outcome::Converged => {
                println!("Agent outcome: {outcome} — {} ({d})", outcome.headline())
            }
            _ => println!("Agent outcome: {outcome} — {}", outcome.headline()),
        }
        println!("Wrote {}", report.display());
        println!("{}", aorta_agent::report::recommendation(&result));
    }
    if a.bundle {
        match crate::cmd_bundle::bundle_agent_run(
            &result.run_dir,
            a.recipe.as_deref(),
            result.ticket.clone(),
            &a.output,
        ) {
            // With --json, stdout holds the one JSON line.
            Ok(line) if a.json => eprintln!("{line}"),
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
