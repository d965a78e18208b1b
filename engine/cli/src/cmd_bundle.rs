//! `aorta bundle RUN_DIR` and `aorta bundle --verify FILE` over `aorta_bundle`: this module
//! picks the redaction, asks under `--review`, and prints.

use crate::args::BundleArgs;
use crate::exit::{infra, usage, CliError, CliResult, INCOMPLETE};
use aorta_bundle::{hosts_in_run, stage, verify, BundleError, BundleOptions, RedactOptions};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn bundle_error(e: BundleError) -> CliError {
    if matches!(e, BundleError::Output { .. }) && e.is_input() {
        usage(e.to_string(), aorta_engine::OUTPUT_HELP)
    } else if e.is_input() {
        usage(
            e.to_string(),
            "point at a run directory such as probe_results/<ticket>",
        )
    } else {
        infra(e.to_string())
    }
}

pub fn bundle(a: &BundleArgs) -> CliResult {
    if let Some(file) = &a.verify {
        return verify_file(file);
    }
    let run_dir = a.run_dir.as_deref().unwrap_or(Path::new("."));
    let recipe_block = recipe_redaction(run_dir, a.redaction_from.as_deref())?;
    let opts = BundleOptions {
        ticket: a
            .ticket
            .as_ref()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
        redact: RedactOptions {
            recipe: recipe_block,
            hosts: a.redact_hosts.then(|| hosts_in_run(run_dir)),
        },
        aorta_version: env!("CARGO_PKG_VERSION").into(),
    };
    let cwd = std::env::current_dir()
        .map_err(|e| infra(format!("cannot read the current directory: {e}")))?;
    // Stage where the archive goes (a directory the user can write, on the archive's
    // filesystem); for a device or FIFO (written through, nothing beside it of ours), in the
    // system's temp directory.
    let out_dir = match &a.output {
        Some(p) if p.is_dir() => p.clone(),
        Some(p) if std::fs::metadata(p).is_ok_and(|m| !m.is_file()) => std::env::temp_dir(),
        Some(p) => p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or(cwd.clone(), Path::to_path_buf),
        None => cwd.clone(),
    };
    let staged = stage_in(run_dir, &opts, &out_dir)?;
    let output: PathBuf = match &a.output {
        Some(p) if p.is_dir() => p.join(staged.file_name()),
        Some(p) => p.clone(),
        None => cwd.join(staged.file_name()),
    };
    if a.review {
        print!("{}", staged.review());
        if !confirm(&output) {
            eprintln!("aorta bundle: not confirmed; nothing written");
            return Ok(ExitCode::from(INCOMPLETE));
        }
    }
    let bytes = staged.write(&output).map_err(bundle_error)?;
    println!("{}", wrote(&output, &staged, bytes));
    Ok(ExitCode::SUCCESS)
}

/// Stages the run in `out_dir` (created if missing): a directory that cannot be written there
/// is the output's fault (exit 2, as for every writer), not the run directory's.
fn stage_in(
    run_dir: &Path,
    opts: &BundleOptions,
    out_dir: &Path,
) -> Result<aorta_bundle::Staged, CliError> {
    let output_error = |e: &std::io::Error| {
        CliError::from(aorta_engine::EngineError::output(
            format!("cannot write in {}", out_dir.display()),
            e,
        ))
    };
    std::fs::create_dir_all(out_dir).map_err(|e| output_error(&e))?;
    stage(run_dir, opts, out_dir).map_err(|e| match e {
        BundleError::Io { path, source } if path == out_dir => output_error(&source),
        e => bundle_error(e),
    })
}

/// The recipe's `redaction` block: `from` (--redaction-from, the agent's --recipe), else the
/// run's resolved recipe, else none.
fn recipe_redaction(
    run_dir: &Path,
    from: Option<&Path>,
) -> Result<Option<aorta_recipe::Redaction>, CliError> {
    let resolved = run_dir.join("recipe.resolved.yaml");
    let recipe = match from {
        Some(p) => Some(p.to_path_buf()),
        None => resolved.is_file().then_some(resolved),
    };
    Ok(match &recipe {
        Some(p) => aorta_recipe::load_redaction(p)?,
        None => None,
    })
}

/// The line a written bundle is reported with.
fn wrote(output: &Path, staged: &aorta_bundle::Staged, size: u64) -> String {
    let m = &staged.manifest;
    let counts: Vec<String> = m
        .redaction
        .counts
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    format!(
        "Wrote {} ({} members, {size} bytes); redactions: {}",
        output.display(),
        m.members.len() + 1,
        if counts.is_empty() {
            "none".into()
        } else {
            counts.join(", ")
        }
    )
}

/// `aorta agent --bundle`: the agent's run directory (its builds' trials and artifacts,
/// agent_log.jsonl, agent_report.md) bundled as `aorta bundle` would, redaction from
/// `redaction_from` or the run's resolved recipe, into `out_dir` (the agent's --output, beside
/// the run directory). Returns the "Wrote …" line.
pub fn bundle_agent_run(
    run_dir: &Path,
    redaction_from: Option<&Path>,
    ticket: Option<String>,
    out_dir: &Path,
) -> Result<String, CliError> {
    let opts = BundleOptions {
        ticket,
        redact: RedactOptions {
            recipe: recipe_redaction(run_dir, redaction_from)?,
            hosts: None,
        },
        aorta_version: env!("CARGO_PKG_VERSION").into(),
    };
    let staged = stage_in(run_dir, &opts, out_dir)?;
    let output = out_dir.join(staged.file_name());
    let bytes = staged.write(&output).map_err(bundle_error)?;
    Ok(wrote(&output, &staged, bytes))
}

/// Asks on the terminal; anything but y/yes, or a stdin that is not a terminal, is no.
fn confirm(output: &Path) -> bool {
    if !std::io::stdin().is_terminal() {
        eprintln!("aorta bundle: --review needs a terminal to answer on; taking no");
        return false;
    }
    eprint!("Write {}? [y/N] ", output.display());
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn verify_file(file: &Path) -> CliResult {
    let r = verify(file).map_err(|e| {
        usage(
            format!("{}: {e}", file.display()),
            "pass a .tar.gz written by `aorta bundle`",
        )
    })?;
    if r.problems.is_empty() {
        println!(
            "OK: {} members of {} match the manifest's blake3 digests",
            r.checked, r.ticket
        );
        return Ok(ExitCode::SUCCESS);
    }
    for p in &r.problems {
        println!("MISMATCH {p}");
    }
    println!("{} problem(s) in {}", r.problems.len(), file.display());
    Ok(ExitCode::from(INCOMPLETE))
}
