//! `aorta bisect env|range` and `aorta reduce`: checks the flags, opens one session, runs the
//! search (`aorta_bisect::search`, every probe an engine build) and prints the answer first,
//! then the probes; `--json` prints one line. Exit 0 when the answer is shown, 1 when a call
//! it needs stayed undecided or the two ends do not differ, 2 on bad input.

use crate::args::{BisectCommand, BisectCommon, ReduceArgs};
use crate::exit::{self, usage, CliResult};
use aorta_bisect::probe::EngineTrials;
use aorta_bisect::search::{Found, Settings, Status};
use std::path::PathBuf;
use std::process::ExitCode;

pub fn bisect(b: &BisectCommand) -> CliResult {
    match b {
        BisectCommand::Env(a) => run(
            &a.common,
            &a.common.command,
            "bisect env",
            "bisect-env",
            |t, s| aorta_bisect::bisect_env::bisect_env(t, &a.good, &a.bad, a.reverse, s),
        ),
        BisectCommand::Range(a) => {
            let argv = match &a.template {
                Some(_) if !a.common.command.is_empty() => {
                    return Err(usage(
                        "aorta bisect range: --template and a command after -- both given",
                        "give one: --template 'pip install torch=={point} && python repro.py', or -- COMMAND reading $AORTA_BISECT_POINT",
                    ))
                }
                Some(t) => aorta_bisect::sources::template_argv(t),
                None => a.common.command.clone(),
            };
            run(&a.common, &argv, "bisect range", "bisect-range", |t, s| {
                let points = match (&a.list, &a.rev) {
                    (Some(l), _) => aorta_bisect::sources::range_list(l)?,
                    (None, Some(r)) => aorta_bisect::sources::range_revs(r)?,
                    (None, None) => unreachable!("clap requires --list or --rev"),
                };
                aorta_bisect::bisect_range::bisect_range(t, points, s)
            })
        }
    }
}

pub fn reduce(a: &ReduceArgs) -> CliResult {
    let stack: Vec<String> = a
        .mitigations
        .iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty() && m != "none")
        .collect();
    if stack.is_empty() {
        return Err(usage(
            "aorta reduce: --mitigations names no mitigation",
            "e.g. aorta reduce --mitigations nccl_p2p_disable,cuda_launch_blocking -- bash repro.sh",
        ));
    }
    if let Some(m) = stack
        .iter()
        .enumerate()
        .find(|(i, m)| stack[..*i].contains(m))
    {
        return Err(usage(
            format!("aorta reduce: --mitigations names {} twice", m.1),
            "name each mitigation of the stack once",
        ));
    }
    run(&a.common, &a.common.command, "reduce", "reduce", |t, s| {
        aorta_bisect::reduce::reduce(t, &stack, s)
    })
}

fn run(
    c: &BisectCommon,
    argv: &[String],
    name: &str,
    default_ticket: &str,
    search: impl FnOnce(&mut EngineTrials, Settings) -> Result<Found, aorta_engine::EngineError>,
) -> CliResult {
    if argv.is_empty() {
        return Err(usage(
            format!("aorta {name}: no command to run"),
            format!("put the command after --, e.g. aorta {name} … -- bash repro.sh"),
        ));
    }
    if !(c.confidence > 0.0 && c.confidence < 1.0) {
        return Err(usage(
            format!(
                "aorta {name}: --confidence {} is not between 0 and 1",
                c.confidence
            ),
            "e.g. --confidence 0.95",
        ));
    }
    if let Some(t) = c.timeout_per_trial.filter(|t| !(*t > 0.0 && t.is_finite())) {
        return Err(usage(
            format!("aorta {name}: --timeout-per-trial {t} must be a positive number"),
            "e.g. --timeout-per-trial 600",
        ));
    }
    if c.exec.slurm.detach {
        return Err(usage(
            format!(
                "aorta {name}: --detach cannot be used: each step needs the last one's results"
            ),
            "drop --detach; with --executor slurm each step waits for its job arrays",
        ));
    }
    let output = c
        .exec
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("bisect_results"));
    let session = c.exec.session_with_output(Some(output))?;
    let verbose = c.verbose;
    let mut progress = |m: &str| {
        if verbose > 0 {
            eprintln!("aorta {name}: {m}");
        }
    };
    let ticket = c
        .ticket
        .clone()
        .unwrap_or_else(|| default_ticket.to_string());
    let mut trials = EngineTrials::new(
        &session,
        argv.to_vec(),
        Some(ticket),
        c.mitigations_files.clone(),
        c.timeout_per_trial,
        &mut progress,
    );
    let settings = Settings {
        confidence: c.confidence,
        cap: c.max_trials_per_probe,
    };
    let found = match search(&mut trials, settings) {
        Ok(f) => f,
        Err(_) if trials.interrupted => {
            eprintln!(
                "aorta {name}: interrupted; the same command resumes (finished trials are stored)"
            );
            return Ok(ExitCode::from(exit::INTERRUPTED));
        }
        Err(e) => return Err(e.into()),
    };
    let report = match &found.run_dir {
        Some(dir) => Some(aorta_bisect::report::write(&found, argv, dir).map_err(|e| {
            aorta_engine::EngineError::output(
                format!("cannot write the report in {}", dir.display()),
                &e,
            )
        })?),
        None => None,
    };
    if c.json {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            #[serde(flatten)]
            found: &'a Found,
            report: Option<&'a std::path::Path>,
        }
        let line = serde_json::to_string(&Line {
            found: &found,
            report: report.as_deref(),
        })
        .map_err(|e| exit::infra(format!("cannot encode the answer: {e}")))?;
        println!("{line}");
    } else {
        println!("{}", found.answer);
        for u in &found.untestable {
            println!(
                "Cannot be tested here: {} (good {}, bad {})",
                u.field, u.good, u.bad
            );
        }
        for n in &found.not_compared {
            println!("Not compared: {} ({})", n.field, n.why);
        }
        println!(
            "Probes ({} by the search, bound {}; {} build(s), {} trial(s) executed, {} reused):",
            found.search_probes,
            found.bound,
            found.work.builds,
            found.work.executed,
            found.work.reused
        );
        print!("{}", aorta_bisect::report::tree(&found));
        if let Some(r) = &report {
            println!("Wrote {}", r.display());
        }
    }
    Ok(match found.status {
        Status::Found => ExitCode::SUCCESS,
        Status::Undecided | Status::EndsDoNotDiffer => ExitCode::from(exit::INCOMPLETE),
    })
}
