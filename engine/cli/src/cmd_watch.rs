//! `aorta build --watch LABEL…`: build, then keep the salsa database alive and rebuild on every
//! change to a recipe, a registry, a sidecar or a probe command's input file. Only the targets
//! whose trial keys changed are rebuilt, and the store executes only the changed trials.

use crate::args::BuildArgs;
use crate::cmd_sweep::usage;
use aorta_build::watch::Workspace;
use aorta_recipe::Mode;
use notify::{RecursiveMode, Watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

/// Events closer together than this are one change (editors write in several steps).
const DEBOUNCE: Duration = Duration::from_millis(200);

pub fn watch(a: &BuildArgs) -> miette::Result<ExitCode> {
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    let root = aorta_labels::find_workspace_root(&cwd);
    let mut ws = Workspace::new();
    // Per target: the files its key context hashes (a probe command's inputs).
    let mut inputs: Vec<BTreeSet<PathBuf>> = Vec::new();
    for spec in &a.targets {
        for t in aorta_labels::resolve(&root, spec).map_err(miette::Report::new)? {
            let sidecars: Vec<PathBuf> = t.mitigations_files.iter().chain(&a.mitigations_files).cloned().collect();
            let argv = crate::cmd_build::target_command(&a.command, &t.command);
            // The environment key is filled in per round, from the recipe's env_key rules.
            let ctx = crate::context::key_context_with(argv.as_deref(), String::new())?;
            inputs.push(ctx.input_hashes.keys().map(|p| aorta_build::watch::normalize(&cwd.join(p))).collect());
            let path = crate::cmd_build::display_path(&t.recipe, &cwd);
            ws.add_target(&t.label, &path, &sidecars, argv, ctx);
        }
    }
    let cancel = aorta_exec::install_interrupt_handler().map_err(|e| miette::miette!("cannot install the Ctrl-C handler: {e}"))?;
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
    .map_err(|e| miette::miette!("cannot watch files: {e}"))?;
    // Watch directories, not files: editors save by renaming a new file over the old one.
    let mut dirs: BTreeSet<PathBuf> = ws.files().filter_map(|p| p.parent().map(Path::to_path_buf)).collect();
    dirs.extend(inputs.iter().flatten().filter_map(|p| p.parent().map(Path::to_path_buf)));
    for d in &dirs {
        watcher.watch(d, RecursiveMode::NonRecursive).map_err(|e| miette::miette!("cannot watch {}: {e}", d.display()))?;
    }

    let mut last: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut code = ExitCode::SUCCESS;
    let all: Vec<usize> = (0..ws.targets().len()).collect();
    round(&mut ws, &all, &mut last, a, &mut code)?;
    let mut rebuilds = 0u64;
    loop {
        if a.watch_max_rebuilds.is_some_and(|n| rebuilds >= n) {
            return Ok(code);
        }
        let watched = ws.files().count() + inputs.iter().map(BTreeSet::len).sum::<usize>();
        eprintln!("aorta watch: watching {watched} file(s); Ctrl-C stops");
        // Wait for a change (or Ctrl-C), then for the burst to settle.
        let first = loop {
            if cancel.is_cancelled() {
                eprintln!("aorta watch: stopped");
                return Ok(ExitCode::from(130));
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(p) => break p,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(miette::miette!("the file watcher stopped")),
            }
        };
        let mut changed = vec![first];
        while let Ok(p) = rx.recv_timeout(DEBOUNCE) {
            changed.push(p);
        }
        let edited = ws.refresh(&changed);
        let changed_inputs: Vec<usize> = (0..inputs.len()).filter(|&i| changed.iter().any(|p| inputs[i].contains(&aorta_build::watch::normalize(p)))).collect();
        if edited.is_empty() && changed_inputs.is_empty() {
            continue; // a save that left the text as it was, or an unrelated file
        }
        for &i in &changed_inputs {
            let argv = ws.targets()[i].argv.clone();
            let old = ws.context(i);
            let mut ctx = crate::context::key_context_with(argv.as_deref(), old.env_snapshot)?;
            ctx.workloads = old.workloads;
            ws.set_context(i, ctx);
        }
        rebuilds += 1;
        let names: Vec<String> = edited.iter().chain(changed.iter().filter(|p| changed_inputs.iter().any(|&i| inputs[i].contains(&aorta_build::watch::normalize(p))))).map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect::<BTreeSet<_>>().into_iter().collect();
        eprintln!("aorta watch: changed: {}", names.join(", "));
        round(&mut ws, &all, &mut last, a, &mut code)?;
        if cancel.is_cancelled() {
            eprintln!("aorta watch: stopped");
            return Ok(ExitCode::from(130));
        }
    }
}

/// Compiles every target (memoized) and builds those whose trial keys changed since `last`.
fn round(ws: &mut Workspace, targets: &[usize], last: &mut BTreeMap<usize, Vec<String>>, a: &BuildArgs, code: &mut ExitCode) -> miette::Result<()> {
    let mut to_build = Vec::new();
    for &i in targets {
        let recipe = ws.recipe(i);
        let recipe = match recipe.as_ref() {
            Ok(r) => r.clone(),
            Err(d) => {
                // Bad input in watch mode is reported, then we wait for the fix.
                eprintln!("{:?}", miette::Report::new((**d).clone()));
                last.remove(&i);
                continue;
            }
        };
        let t = &ws.targets()[i];
        let argv = if recipe.mode == Mode::Probe { t.argv.clone() } else { None };
        if recipe.mode == Mode::Probe && argv.is_none() {
            eprintln!("{:?}", usage(format!("{}: a probe recipe needs a command: give it after -- or as the target's `command` in BUCK", t.label), format!("aorta build --watch {} -- bash launch.sh", t.label)));
            continue;
        }
        // The environment key (the snapshot is probed once per process; the recipe's env_key
        // rules may have changed) and the workload identities are part of the key context.
        let (snapshot, env_key) = crate::context::environment(&recipe, &crate::context::EnvSource::from_args(&a.exec))?;
        let mut ctx = ws.context(i);
        ctx.env_snapshot = env_key.hash.clone();
        let torch_dir = snapshot.pytorch.torch_dir.as_deref().map(Path::new);
        let workloads = aorta_build::resolve_workloads(&recipe, &mut ctx, torch_dir);
        ws.set_context(i, ctx);
        to_build.push((i, recipe, argv, workloads, crate::context::snapshot_record(&snapshot, env_key)));
    }
    let reparsed = ws.take_reparsed();
    if !reparsed.is_empty() {
        eprintln!("aorta watch: re-parsed {}", reparsed.join(", "));
    }
    for (i, recipe, argv, workloads, env_record) in to_build {
        let planned = match ws.trials(i) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("aorta: {e}");
                continue;
            }
        };
        let keys: Vec<String> = planned.iter().map(|p| p.key.0.clone()).collect();
        if last.get(&i) == Some(&keys) {
            continue; // same keys: nothing to do (e.g. a comment edit)
        }
        eprintln!("aorta watch: building {}", ws.targets()[i].label);
        let out = crate::cmd_exec::execute_planned(&recipe, &planned, workloads, env_record, argv.as_deref(), &a.exec, a.verbose)?;
        let c = crate::cmd_exec::report(&out, recipe.mode);
        if c != ExitCode::SUCCESS {
            *code = c;
        }
        if out.cancelled {
            return Ok(());
        }
        last.insert(i, keys);
    }
    Ok(())
}
