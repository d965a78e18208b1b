//! `aorta`: a thin front door over the engine. Parsing is clap's; each command opens one
//! engine session, calls it and prints. Every failure becomes a miette report on stderr and its
//! category's exit code (`exit`); nothing here panics on user input.
//!
//! Module layering (no loops): `main` → `cmd_*` → {`execute`, `output`, `targets`, `separator`,
//! `args`, `exit`}; two commands reuse another's printer (`cmd_agent` → `cmd_bundle`'s
//! agent bundle, `cmd_sweep` → `cmd_list`'s pattern listing), never the reverse.

mod args;
mod cmd_agent;
mod cmd_bench;
mod cmd_bisect;
mod cmd_build;
mod cmd_bundle;
mod cmd_cache;
mod cmd_classify;
mod cmd_doctor;
mod cmd_env;
mod cmd_list;
mod cmd_run;
mod cmd_sweep;
mod cmd_trial;
mod cmd_watch;
mod complete;
mod execute;
mod exit;
mod output;
mod separator;
mod targets;

use args::{Cli, Command, RegistryListCommand, SweepCommand, TriageCommand};
use clap::{CommandFactory, FromArgMatches};
use exit::CliResult;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    // `aorta __trace --out FILE -- COMMAND…`: the input tracer the engine wraps command trials
    // in (engine/trace), before anything else of aorta runs.
    if std::env::args_os().nth(1).is_some_and(|a| a == "__trace") {
        aorta_trace::main_with(std::env::args_os().skip(2).collect());
    }
    // `COMPLETE=<shell> aorta -- …`: the shell asking for candidates at <TAB> (complete.rs).
    clap_complete::CompleteEnv::with_factory(Cli::command).complete();
    aorta_engine::timing_start();
    restore_sigpipe();
    one_malloc_arena();
    install_report_handler();
    // Arguments need not be UTF-8 (paths): clap reports the ones that must be.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // One command tree for the separator check and the parse (building it costs ~0.2 ms).
    let cmd = Cli::command();
    if let Err(report) = separator::check(&raw, &cmd) {
        eprintln!("{report:?}");
        return ExitCode::from(exit::BAD_INPUT);
    }
    let cli = cmd
        .try_get_matches_from(raw)
        .and_then(|mut m| Cli::from_arg_matches_mut(&mut m))
        .unwrap_or_else(|e| e.format(&mut Cli::command()).exit());
    aorta_engine::timing_mark("arguments parsed");
    let result = run(cli);
    // Trials have ended: no keeper process may linger (docs/exec.md, "Containment").
    aorta_engine::shutdown_containment();
    aorta_engine::timing_mark("containment shut down, exiting");
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{:?}", e.report);
            ExitCode::from(e.code)
        }
    }
}

fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Build(a) if a.watch => cmd_watch::watch(&a),
        Command::Build(a) => cmd_build::build(&a),
        Command::Sweep(SweepCommand::Run(a)) => cmd_sweep::sweep_run(&a, "aorta sweep run"),
        Command::Sweep(SweepCommand::ListMitigations(a)) => {
            cmd_list::mitigations(&a.mitigations_files, a.json)
        }
        Command::Sweep(SweepCommand::ListEnvironments(a)) => {
            cmd_list::environments(&a.mitigations_files, a.json)
        }
        Command::Sweep(SweepCommand::ListPatterns(a)) => {
            cmd_list::patterns(a.version, a.json, "aorta sweep")
        }
        Command::Mitigations(RegistryListCommand::List { files, json }) => {
            cmd_list::mitigations(&files, json)
        }
        Command::Environments(RegistryListCommand::List { files, json }) => {
            cmd_list::environments(&files, json)
        }
        Command::Run(a) => cmd_run::run(&a),
        Command::Agent(a) => cmd_agent::agent(&a),
        Command::Bisect(b) => cmd_bisect::bisect(&b),
        Command::Reduce(a) => cmd_bisect::reduce(&a),
        Command::Env(c) => cmd_env::env(&c),
        Command::Bench(args::BenchCommand::HwQueue { args }) => cmd_bench::hw_queue(&args),
        Command::Explain(a) => cmd_cache::explain(&a),
        Command::Cache(c) => cmd_cache::cache(&c),
        Command::Trial(c) => cmd_trial::trial(&c),
        Command::Classify(a) => cmd_classify::classify(&a),
        Command::Doctor(a) => cmd_doctor::doctor(&a),
        Command::Bundle(a) => cmd_bundle::bundle(&a),
        Command::Report {
            run_dir,
            mitigations_files,
        } => {
            let path = aorta_engine::render_run_dir(&run_dir, &mitigations_files, None)?;
            println!("Wrote {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => complete::print_registration(&shell),
        Command::Probe(a) => cmd_sweep::deprecated_probe(a),
        Command::Triage(t) => {
            let (old, new) = match &t {
                TriageCommand::Run(_) => ("aorta triage run", "aorta sweep run"),
                TriageCommand::ListMitigations(_) => (
                    "aorta triage list-mitigations",
                    "aorta sweep list-mitigations",
                ),
                TriageCommand::ListEnvironments(_) => (
                    "aorta triage list-environments",
                    "aorta sweep list-environments",
                ),
            };
            output::deprecation(old, new);
            match t {
                TriageCommand::Run(a) => cmd_sweep::sweep_run(&(*a).into(), "aorta triage run"),
                TriageCommand::ListMitigations(a) => {
                    cmd_list::mitigations(&a.mitigations_files, a.json)
                }
                TriageCommand::ListEnvironments(a) => {
                    cmd_list::environments(&a.mitigations_files, a.json)
                }
            }
        }
    }
}

/// `aorta … | head` must end quietly like any Unix tool, not panic on EPIPE inside println!.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// glibc gives every thread that allocates its own arena; the store-lookup threads of a
/// 10,000-trial rerun then leave memory in arenas of their own, a third of the resident set
/// (docs/benchmarks.md). aorta's threads mostly wait on processes, so one arena costs nothing.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Colour only on a terminal and without NO_COLOR; plain Unicode otherwise (stable in logs and tests).
fn install_report_handler() {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = miette::set_hook(Box::new(move |_| {
        let theme = if color {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        };
        Box::new(
            miette::GraphicalReportHandler::new_themed(theme)
                .with_width(100)
                .with_links(false)
                // Names such as `example-probe-smoke` stay whole when a line wraps.
                .with_word_splitter(textwrap::WordSplitter::NoHyphenation),
        )
    }));
}
