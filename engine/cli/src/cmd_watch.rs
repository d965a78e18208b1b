//! `aorta build --watch LABEL…`: build, then rebuild on every change to a recipe, a registry, a
//! sidecar or a probe command's input file. The engine's watch keeps the session's compile
//! database alive; this module only waits for file events and prints.

use crate::args::BuildArgs;
use crate::exit::CliResult;
use aorta_engine::watch::{Step, Watch};
use notify::{RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

/// Events closer together than this are one change (editors write in several steps).
const DEBOUNCE: Duration = Duration::from_millis(200);

pub fn watch(a: &BuildArgs) -> CliResult {
    let session = a.exec.session()?;
    let ids = crate::targets::add(&session, &a.targets, &a.mitigations_files, &a.command)?;
    let cancel = session.cancel_token()?;
    let mut w = Watch::new(&session, ids);
    let (tx, rx) = mpsc::channel::<PathBuf>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            if !matches!(ev.kind, notify::EventKind::Access(_)) {
                for p in ev.paths {
                    let _ = tx.send(p);
                }
            }
        }
    })
    .map_err(|e| crate::exit::infra(format!("cannot watch files: {e}")))?;
    let mut watched_dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut code = ExitCode::SUCCESS;
    let mut rebuilds = 0u64;
    let mut changed_names: Vec<String> = Vec::new();
    loop {
        if !changed_names.is_empty() {
            eprintln!("aorta watch: changed: {}", changed_names.join(", "));
        }
        let mut stopped = false;
        let reparsed = w.round(&mut |step| match step {
            Step::Invalid { error, .. } => {
                // Bad input in watch mode is reported, then we wait for the fix.
                eprintln!("{:?}", crate::exit::CliError::from(error).report);
                true
            }
            Step::Changed(c) => {
                // --doctor or the recipe's doctor: before the first build; the session keeps
                // the record for the later ones. A refused node is said, and the next change
                // checks it again.
                if let Err(e) = crate::cmd_doctor::preflight(&session, &a.exec, [&*c.recipe]) {
                    eprintln!("{:?}", e.report);
                    code = ExitCode::from(e.code);
                    return true;
                }
                eprintln!("aorta watch: building {}", c.label);
                match crate::execute::build(&session, c, a.verbosity) {
                    Ok(out) => {
                        let rc = crate::execute::report(
                            &out,
                            c.recipe.mode,
                            a.exec.strict,
                            a.verbosity,
                            false,
                        );
                        if rc != ExitCode::SUCCESS {
                            code = rc;
                        }
                        stopped = out.cancelled;
                        !out.cancelled
                    }
                    Err(e) => {
                        eprintln!("{:?}", e.report);
                        code = ExitCode::from(e.code);
                        true
                    }
                }
            }
        });
        if !reparsed.is_empty() {
            eprintln!("aorta watch: re-parsed {}", reparsed.join(", "));
        }
        if stopped || cancel.is_cancelled() {
            eprintln!("aorta watch: stopped");
            return Ok(ExitCode::from(crate::exit::INTERRUPTED));
        }
        if a.watch_max_rebuilds.is_some_and(|n| rebuilds >= n) {
            return Ok(code);
        }
        // Watch directories, not files: editors save by renaming a new file over the old one.
        let files = w.files();
        for d in files
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
        {
            if watched_dirs.insert(d.clone()) {
                watcher
                    .watch(&d, RecursiveMode::NonRecursive)
                    .map_err(|e| {
                        crate::exit::infra(format!("cannot watch {}: {e}", d.display()))
                    })?;
            }
        }
        // Once per round, not per wake-up: logs stay readable when stderr is not a terminal.
        eprintln!(
            "aorta watch: watching {} file(s); Ctrl-C stops",
            files.len()
        );
        let edited = loop {
            if cancel.is_cancelled() {
                eprintln!("aorta watch: stopped");
                return Ok(ExitCode::from(crate::exit::INTERRUPTED));
            }
            let first = match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(p) => p,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(crate::exit::infra("the file watcher stopped"))
                }
            };
            // Wait for the burst to settle.
            let mut changed = vec![first];
            while let Ok(p) = rx.recv_timeout(DEBOUNCE) {
                changed.push(p);
            }
            let edited = w.refresh(&changed);
            if !edited.is_empty() {
                break edited; // else a save that left the text as it was, or an unrelated file
            }
        };
        rebuilds += 1;
        changed_names = edited
            .iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
    }
}
