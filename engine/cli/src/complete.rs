//! Shell completion of values, not only of commands and flags: recipe labels from the
//! workspace's BUCK files, registered mitigation and environment names (also after a comma in
//! a list), and the workloads `aorta` would find. clap_complete's dynamic engine asks the
//! binary itself at each <TAB> (`COMPLETE=<shell> aorta -- …`), so the candidates are always
//! those of the current directory and build; `aorta completions <shell>` prints the
//! registration script that makes the shell ask.

use aorta_registry::Registry;
use clap_complete::engine::{
    ArgValueCompleter, CompletionCandidate, PathCompleter, ValueCompleter,
};
use std::ffi::OsStr;
use std::path::Path;

/// `aorta completions <shell>`: the script that registers aorta's completer with the shell.
/// It calls back this very binary (its absolute path) at every <TAB>.
pub fn print_registration(shell: &str) -> crate::exit::CliResult {
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells
        .completer(shell)
        .ok_or_else(|| miette::miette!("no completion support for shell '{shell}'"))?;
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "aorta".into());
    let mut out = Vec::new();
    completer
        .write_registration("COMPLETE", "aorta", "aorta", &exe, &mut out)
        .and_then(|()| std::io::Write::write_all(&mut std::io::stdout(), &out))
        .map_err(|e| miette::miette!("cannot write the completion script: {e}"))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Labels (`//recipes:quickstart`, `//recipes/...`) of the workspace around the current
/// directory, and recipe files.
pub fn labels() -> ArgValueCompleter {
    ArgValueCompleter::new(label_candidates)
}

/// One registered mitigation name, or a comma-separated list of them.
pub fn mitigations() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        list_candidates(
            current,
            registry()
                .mitigations()
                .map(|m| (m.name.clone(), m.description.clone())),
        )
    })
}

/// One registered environment name, or a comma-separated list of them.
pub fn environments() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        list_candidates(
            current,
            registry()
                .environments()
                .map(|e| (e.name.clone(), e.description.clone())),
        )
    })
}

/// The workloads `aorta run --workload` would find (`aorta-workload-<name>` executables on
/// its search path).
pub fn workloads() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        let prefix = current.to_string_lossy();
        aorta_engine::workloads::available()
            .into_iter()
            // Not cargo's `aorta-workload-x.d` dependency files.
            .filter(|n| n.starts_with(prefix.as_ref()) && !n.contains('.'))
            .map(CompletionCandidate::new)
            .collect()
    })
}

/// The built-ins and the project's registry; sidecars named on the command line are not
/// parsed at completion time.
fn registry() -> Registry {
    Registry::load(None, &[]).unwrap_or_else(|_| Registry::builtin())
}

/// Candidates for the last element of a comma-separated list, each carrying the elements
/// already typed.
fn list_candidates(
    current: &OsStr,
    names: impl Iterator<Item = (String, String)>,
) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    let (done, last) = match current.rfind(',') {
        Some(i) => (&current[..=i], &current[i + 1..]),
        None => ("", current.as_ref()),
    };
    let typed: Vec<&str> = done.split(',').filter(|s| !s.is_empty()).collect();
    let mut out: Vec<(String, String)> = names
        .filter(|(n, _)| n.starts_with(last) && !typed.contains(&n.as_str()))
        .collect();
    out.sort();
    out.into_iter()
        .map(|(n, help)| CompletionCandidate::new(format!("{done}{n}")).help(Some(help.into())))
        .collect()
}

fn label_candidates(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let mut out = Vec::new();
    if typed.is_empty() || typed.starts_with("//") {
        out.extend(workspace_labels(&typed));
    }
    if !typed.starts_with("//") {
        out.extend(PathCompleter::any().complete(current));
    }
    out
}

/// Every recipe target below the workspace root, and `//pkg/...` for each package holding
/// one, that starts with what was typed.
fn workspace_labels(typed: &str) -> Vec<CompletionCandidate> {
    let Ok(cwd) = std::env::current_dir() else {
        return Vec::new();
    };
    let root = aorta_labels::find_workspace_root(&cwd);
    let Ok(targets) = aorta_labels::resolve(&root, "//...") else {
        return Vec::new();
    };
    let mut packages: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for t in &targets {
        if let Some((package, _)) = t.label.split_once(':') {
            let all = format!("{package}/...");
            if !packages.contains(&all) {
                packages.push(all);
            }
        }
        if t.label.starts_with(typed) {
            let help = t.recipe.strip_prefix(&root).unwrap_or(Path::new(&t.recipe));
            out.push(
                CompletionCandidate::new(&t.label).help(Some(help.display().to_string().into())),
            );
        }
    }
    out.extend(
        packages
            .into_iter()
            .filter(|p| p.starts_with(typed))
            .map(|p| CompletionCandidate::new(p).help(Some("every recipe below".into()))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(c: Vec<CompletionCandidate>) -> Vec<String> {
        c.iter()
            .map(|c| c.get_value().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_list_completes_its_last_element_and_skips_the_typed_ones() {
        let names = || {
            ["none", "nccl_ring", "nccl_tree", "cuda_launch_blocking"]
                .into_iter()
                .map(|n| (n.to_string(), String::new()))
        };
        assert_eq!(
            values(list_candidates(OsStr::new("nccl_ring,nc"), names())),
            ["nccl_ring,nccl_tree"]
        );
        assert_eq!(
            values(list_candidates(OsStr::new("cu"), names())),
            ["cuda_launch_blocking"]
        );
        assert_eq!(
            values(list_candidates(OsStr::new("x"), names())),
            Vec::<String>::new()
        );
    }
}
