//! Running a compiled target and printing what happened: the shared tail of `aorta build`,
//! `aorta sweep run`, `aorta run` and watch rounds.

use crate::args::Verbosity;
use crate::exit::{self, CliError};
use aorta_engine::{BuildOutcome, Compiled, Event, Session};
use aorta_recipe::Mode;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Builds `c` with a progress bar (a terminal), per-trial lines (`-v`, with keys and run
/// directories `-vv`) or nothing (`-q`).
pub fn build(session: &Session, c: &Compiled, v: Verbosity) -> Result<BuildOutcome, CliError> {
    let verbose = v.verbose;
    for w in &c.warnings {
        eprintln!("aorta: warning: {w}");
    }
    let bar = progress_bar(c.planned().len() as u64, v);
    let (mut executed, mut reused, mut failed) = (0u64, 0u64, 0u64);
    let mut cluster = String::new();
    // Why stored results were not reused, with how many trials each: said once the build ends.
    let mut stale: std::collections::BTreeMap<String, u64> = Default::default();
    // -vv: which key a trial has (`aorta explain` takes it further).
    let where_ = |r: &aorta_engine::TrialResult| {
        if verbose > 1 {
            format!("  key {}", r.key)
        } else {
            String::new()
        }
    };
    let mut on_event = |e: Event| {
        if let Event::Stale { cell, index, why } = &e {
            if verbose > 0 {
                bar.suspend(|| eprintln!("[stale]  {cell} trial {index}: {why}"));
            }
            *stale.entry(why.to_string()).or_default() += 1;
            return;
        }
        if let Event::Cluster(arrays) = &e {
            // Per Slurm array: queued / running / done; the bar counts trials as they land.
            cluster = arrays
                .iter()
                .map(|a| {
                    format!(
                        "slurm {}: queued {} running {} done {}",
                        a.job, a.queued, a.running, a.done
                    )
                })
                .collect::<Vec<_>>()
                .join(" · ");
            if verbose > 1 {
                bar.suspend(|| eprintln!("[slurm]  {cluster}"));
            }
            bar.set_message(format!(
                "executed {executed} · cached {reused} · not passing {failed} · {cluster}"
            ));
            return;
        }
        match &e {
            Event::Executed(r) => {
                executed += 1;
                failed += u64::from(r.record.verdict != aorta_trial::Verdict::Pass);
            }
            Event::Reused(r) => {
                reused += 1;
                failed += u64::from(r.record.verdict != aorta_trial::Verdict::Pass);
            }
            Event::Failed { .. } => failed += 1,
            Event::Cluster(_) | Event::Stale { .. } => {}
        }
        if verbose > 0 {
            let line = match &e {
                Event::Executed(r) => format!(
                    "[ran]    {} trial {}: {} in {:.2}s{}",
                    r.record.cell_name,
                    r.index,
                    r.record.verdict.as_str(),
                    r.exec_seconds,
                    where_(r)
                ),
                Event::Reused(r) => format!(
                    "[cached] {} trial {}: {}{}",
                    r.record.cell_name,
                    r.index,
                    r.record.verdict.as_str(),
                    where_(r)
                ),
                Event::Failed { cell, index, error } => {
                    format!("[error]  {cell} trial {index}: {error}")
                }
                Event::Cluster(_) | Event::Stale { .. } => String::new(),
            };
            bar.suspend(|| eprintln!("{line}"));
        }
        let tail = if cluster.is_empty() {
            String::new()
        } else {
            format!(" · {cluster}")
        };
        bar.set_message(format!(
            "executed {executed} · cached {reused} · not passing {failed}{tail}"
        ));
        bar.inc(1);
    };
    let out = session.build(c, &mut on_event);
    bar.finish_and_clear();
    for (why, n) in &stale {
        eprintln!("aorta: re-ran {n} trial(s): {why}");
    }
    if let Some(line) = session.remote_report() {
        eprintln!("{line}");
    }
    Ok(out?)
}

fn progress_bar(len: u64, v: Verbosity) -> ProgressBar {
    if v.verbose > 0 || v.quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} trials  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Prints the end-of-run lines and picks the exit code: AORTA's 0 even with failing cells;
/// 1 when the matrix is incomplete (or, with `strict`, a cell errored or never ran); 3 when a
/// cell's workload could not start; 130 after Ctrl-C.
/// [`print_outcome`], then with `json` the outcome as one JSON line on stdout (instead of the
/// summary): what CI reads.
pub fn report(o: &BuildOutcome, mode: Mode, strict: bool, v: Verbosity, json: bool) -> ExitCode {
    let quiet = Verbosity {
        quiet: v.quiet || json,
        ..v
    };
    let code = print_outcome(o, mode, strict, quiet);
    if json {
        let line = serde_json::to_string(&BuildJson::of(o, code)).unwrap_or_default();
        println!("{line}");
    }
    ExitCode::from(code)
}

/// `aorta build --json`: one object per target built (JSON Lines), docs/report.md.
#[derive(serde::Serialize)]
struct BuildJson<'a> {
    run_dir: &'a std::path::Path,
    /// The exit code this target alone would give.
    exit_code: u8,
    executed: usize,
    reused: usize,
    cancelled: bool,
    detached: usize,
    incomplete: Option<&'a str>,
    failed_to_run: &'a [String],
    cells: &'a [aorta_engine::CellOutcome],
    /// matrix.json's `answer`: each cell's call against the baseline, the headline and the
    /// next step.
    answer: Option<&'a aorta_engine::Answer>,
    /// The doctor's verdict on the node the trials ran on (`--doctor`, `doctor:`), absent when
    /// the node was not checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    doctor: Option<&'a aorta_doctor::NodeVerdict>,
}

impl<'a> BuildJson<'a> {
    fn of(o: &'a BuildOutcome, exit_code: u8) -> BuildJson<'a> {
        BuildJson {
            run_dir: &o.run_dir,
            exit_code,
            executed: o.executed,
            reused: o.reused,
            cancelled: o.cancelled,
            detached: o.detached,
            incomplete: o.incomplete.as_deref(),
            failed_to_run: &o.failed_to_run,
            cells: &o.cells,
            answer: o.answer.as_ref(),
            doctor: o.doctor.as_ref(),
        }
    }
}

/// `-q` leaves out the summary and where the files went.
fn print_outcome(o: &BuildOutcome, mode: Mode, strict: bool, v: Verbosity) -> u8 {
    if o.cancelled {
        eprintln!("aorta: interrupted; {} trial(s) finished and are kept in the store; rerun to continue.", o.executed + o.reused);
        return exit::INTERRUPTED;
    }
    if o.detached > 0 {
        eprintln!(
            "aorta: {} trial(s) left running on Slurm ({} finished); run the same build again to collect them.",
            o.detached,
            o.executed + o.reused
        );
        return 0;
    }
    if !v.quiet {
        print!("{}", o.summary);
        if !o.summary.ends_with('\n') {
            println!();
        }
        if v.verbose == 0 {
            println!("Tip: re-run with -v to stream per-cell progress live.");
        }
    }
    for f in &o.failed_to_run {
        eprintln!("aorta: {f}");
    }
    if !o.pruned.is_empty() {
        eprintln!(
            "aorta: removed {} path(s) an earlier matrix left in {} (e.g. {})",
            o.pruned.len(),
            o.run_dir.display(),
            o.pruned[0]
        );
    }
    if !v.quiet {
        match mode {
            Mode::Probe => println!("Wrote probe artifacts to {}", o.run_dir.display()),
            Mode::Triage => println!("Wrote matrix to {}", o.run_dir.display()),
        }
    }
    if std::env::var_os("AORTA_TIMING").is_some() {
        eprintln!(
            "aorta timing: artifacts: {} rendered, {} restored from the store, {} unchanged",
            o.rendered, o.restored, o.unchanged
        );
    }
    if o.cells.iter().any(|c| c.error.is_some()) {
        for c in o.cells.iter().filter(|c| c.error.is_some()) {
            eprintln!(
                "aorta: cell {} could not run: {}",
                c.name,
                c.error.as_deref().unwrap_or_default()
            );
        }
        return exit::INFRASTRUCTURE;
    }
    // A trial the store or the run directory could not take (a full disk) is the
    // infrastructure's failure; one that could not run through its own doing (it removed its
    // own directory) or whose input changed leaves the result incomplete (docs/exec.md).
    if o.unrecorded_infrastructure {
        return exit::INFRASTRUCTURE;
    }
    if let Some(reason) = &o.incomplete {
        eprintln!("aorta: the matrix is incomplete: {reason}");
        return exit::INCOMPLETE;
    }
    if !o.failed_to_run.is_empty() {
        return exit::INCOMPLETE;
    }
    if strict {
        let unfinished = o.unfinished_cells();
        if !unfinished.is_empty() {
            let names: Vec<&str> = unfinished.iter().map(|c| c.name.as_str()).collect();
            eprintln!(
                "aorta: --strict: {} cell(s) errored or ran no trial: {}",
                names.len(),
                names.join(", ")
            );
            return exit::INCOMPLETE;
        }
    }
    0
}
