//! `aorta sweep run` (and the deprecated `probe` / `triage run`): AORTA's flow selection and
//! its flag-conflict rules build the recipe; the engine plans or builds it.

use crate::args::{ProbeArgs, SweepRunArgs, TriageRunArgs, TrialsArg};
use crate::exit::{usage, CliResult};
use aorta_engine::{RecipeOrigin, TargetSpec};
use aorta_recipe::{
    peek_mode, FlagRecipe, Mode, Overlays, PassthroughMode, PeekedMode, ProbeOverlays,
    RecipeRequest,
};

/// The triage-only flags that are set, by their CLI spelling.
fn flag_mode_flags(a: &SweepRunArgs) -> Vec<&'static str> {
    let a = &a.flags;
    [
        ("--workload", a.workload.is_some()),
        ("--mitigation-axis", a.mitigation_axis.is_some()),
        ("--environment-axis", a.environment_axis.is_some()),
        ("--trials", a.trials.is_some()),
        ("--max-trials-per-cell", a.max_trials_per_cell.is_some()),
        ("--max-walltime", a.max_walltime.is_some()),
        ("--max-gpu-hours", a.max_gpu_hours.is_some()),
        ("--steps", a.steps.is_some()),
        ("--baseline-cell", a.baseline_cell.is_some()),
        ("--confound-threshold", a.confound_threshold.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, set)| set.then_some(f))
    .collect()
}

pub fn sweep_run(a: &SweepRunArgs, name: &str) -> CliResult {
    let peeked = a.recipe.as_deref().map(peek_mode);
    let has_command = !a.command.is_empty();
    if peeked == Some(PeekedMode::Known(Mode::Probe)) && !has_command {
        return Err(usage(
            format!("{name}: a probe recipe needs the command to run after --"),
            format!("{name} --recipe <probe recipe> -- bash launch.sh"),
        ));
    }
    if has_command && peeked == Some(PeekedMode::Known(Mode::Triage)) {
        return Err(usage(
            format!("{name}: a command was given after --, but the recipe is a triage (workload) recipe"),
            "set 'mode: probe' in the recipe to wrap a command, or drop the command to run its workload",
        ));
    }
    if has_command || peeked == Some(PeekedMode::Known(Mode::Probe)) {
        subprocess_flow(a, name)
    } else {
        workload_flow(a, name)
    }
}

fn subprocess_flow(a: &SweepRunArgs, name: &str) -> CliResult {
    if a.flags
        .collect
        .as_deref()
        .is_some_and(|c| c.split(',').any(|s| !s.trim().is_empty()))
    {
        return Err(usage(
            format!("{name}: --collect applies to the workload flow only"),
            "collectors run inside workloads; drop --collect with -- COMMAND",
        ));
    }
    let set = flag_mode_flags(a);
    if !set.is_empty() {
        return Err(usage(format!("{name}: {} cannot be used with a command (subprocess flow)", set.join(", ")), "those flags build workload recipes; the subprocess flow takes --recipe with mode: probe"));
    }
    let Some(path) = &a.recipe else {
        return Err(usage(
            format!("{name}: the subprocess flow needs --recipe"),
            "write a probe recipe (mode: probe), e.g. recipes/probe-template-bash.yaml",
        ));
    };
    let probe = ProbeOverlays {
        ticket: a.ticket.clone(),
        env_passthrough_mode: a
            .subprocess
            .env_passthrough_mode
            .as_deref()
            .and_then(PassthroughMode::parse),
        stop_after_events: a.subprocess.stop_after_events,
        max_trials: a.subprocess.max_trials,
        disable_detector: a.subprocess.disable_detector.clone(),
    };
    let origin = RecipeOrigin::File {
        path: path.clone(),
        sidecars: a.mitigations_files.clone(),
        overlays: Overlays {
            probe,
            collect: None,
        },
    };
    finish(a, origin, Some(&a.command), Some(Mode::Probe))
}

fn workload_flow(a: &SweepRunArgs, name: &str) -> CliResult {
    if a.subprocess.env_passthrough_mode.is_some() {
        return Err(usage(
            format!("{name}: --env-passthrough-mode applies to the subprocess flow only"),
            "it needs a probe recipe and a command after --",
        ));
    }
    let probe_only: Vec<&str> = [
        (
            "--stop-after-events",
            a.subprocess.stop_after_events.is_some(),
        ),
        ("--max-trials", a.subprocess.max_trials.is_some()),
        (
            "--disable-detector",
            !a.subprocess.disable_detector.is_empty(),
        ),
    ]
    .into_iter()
    .filter_map(|(f, s)| s.then_some(f))
    .collect();
    if !probe_only.is_empty() {
        return Err(usage(
            format!(
                "{name}: {} apply to the subprocess flow only",
                probe_only.join(", ")
            ),
            "use stop_after in the recipe for workload runs",
        ));
    }
    let origin = match &a.recipe {
        Some(path) => {
            let mut conflicts = flag_mode_flags(a);
            if a.ticket.is_some() {
                conflicts.push("--ticket");
            }
            if !conflicts.is_empty() {
                return Err(usage(
                    format!("{name}: --recipe conflicts with {}", conflicts.join(", ")),
                    "put those settings in the recipe, or drop --recipe to use flag mode",
                ));
            }
            RecipeOrigin::File {
                path: path.clone(),
                sidecars: a.mitigations_files.clone(),
                overlays: Overlays {
                    probe: ProbeOverlays::default(),
                    collect: a.flags.collect.clone(),
                },
            }
        }
        None => RecipeOrigin::Request {
            request: RecipeRequest::Flags(FlagRecipe {
                workload: a.flags.workload.clone(),
                mitigation_axis: a.flags.mitigation_axis.clone(),
                environment_axis: a.flags.environment_axis.clone(),
                trials: match a.flags.trials {
                    Some(TrialsArg::Count(n)) => Some(n),
                    _ => None,
                },
                trials_auto: a.flags.trials == Some(TrialsArg::Auto),
                max_trials_per_cell: a.flags.max_trials_per_cell,
                max_walltime: a.flags.max_walltime.clone(),
                max_gpu_hours: a.flags.max_gpu_hours,
                steps: a.flags.steps,
                ticket: a.ticket.clone(),
                baseline_cell: a.flags.baseline_cell.clone(),
                confound_threshold: a.flags.confound_threshold,
                collect: a.flags.collect.clone(),
            }),
            sidecars: a.mitigations_files.clone(),
            template: None,
        },
    };
    finish(a, origin, None, None)
}

/// Compiles and builds (or plans) the recipe; `expect`: the mode the flow needs.
fn finish(
    a: &SweepRunArgs,
    origin: RecipeOrigin,
    argv: Option<&[String]>,
    expect: Option<Mode>,
) -> CliResult {
    let session = a.exec.session()?;
    let id = session.add_target(TargetSpec {
        label: None,
        origin,
        argv: argv.map(<[String]>::to_vec),
    });
    let c = session.compile(id)?;
    if expect == Some(Mode::Probe) && c.recipe.mode != Mode::Probe {
        return Err(usage(
            format!(
                "{}: is not a probe-mode recipe; set 'mode: probe' to wrap a command",
                c.label
            ),
            "or drop the command after -- to run the recipe's workload",
        ));
    }
    if a.dry_run {
        return crate::output::print_plans(&[session.plan(&c)], a.json);
    }
    let doctor = crate::cmd_doctor::preflight(&session, &a.exec, [&*c.recipe])?;
    let out = crate::execute::build(&session, &c, a.verbosity)?;
    crate::cmd_doctor::marked(doctor, &out.run_dir);
    Ok(crate::execute::report(
        &out,
        c.recipe.mode,
        a.exec.strict,
        a.verbosity,
        a.json,
    ))
}

/// `aorta probe [opts] -- COMMAND` → the subprocess flow of `sweep run`.
pub fn deprecated_probe(a: ProbeArgs) -> CliResult {
    if a.list_patterns {
        crate::output::deprecation("aorta probe --list-patterns", "aorta sweep list-patterns");
        return crate::cmd_list::patterns(a.version, false, "aorta probe");
    }
    crate::output::deprecation("aorta probe", "aorta sweep run");
    if a.version {
        return Err(usage(
            "aorta probe: --version only works with --list-patterns",
            "use `aorta --version` for the tool's version",
        ));
    }
    if a.recipe.is_none() {
        return Err(usage(
            "aorta probe: --recipe is required",
            "aorta sweep run --recipe <probe recipe> -- COMMAND",
        ));
    }
    let args = SweepRunArgs {
        recipe: a.recipe,
        dry_run: a.dry_run,
        exec: crate::args::ExecArgs {
            output: a.output,
            ..Default::default()
        },
        ticket: a.ticket,
        subprocess: a.subprocess,
        mitigations_files: a.mitigations_files,
        verbosity: a.verbosity,
        command: a.command,
        mode: "matrix".into(),
        ..Default::default()
    };
    if args.command.is_empty() {
        return Err(usage(
            "aorta probe: no command after '--'",
            "aorta sweep run --recipe <probe recipe> -- COMMAND",
        ));
    }
    subprocess_flow(&args, "aorta probe")
}

impl From<TriageRunArgs> for SweepRunArgs {
    fn from(t: TriageRunArgs) -> Self {
        SweepRunArgs {
            recipe: t.recipe,
            dry_run: t.dry_run,
            mode: t.mode,
            flags: t.flags,
            ticket: t.ticket,
            exec: crate::args::ExecArgs {
                output: t.output_dir,
                ..Default::default()
            },
            mitigations_files: t.mitigations_files,
            verbosity: t.verbosity,
            ..Default::default()
        }
    }
}
