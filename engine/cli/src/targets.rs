//! Labels and recipe paths on the command line → compile targets of the session.

use crate::exit::CliError;
use aorta_engine::{RecipeOrigin, Session, TargetId, TargetSpec};
use std::path::{Path, PathBuf};

/// The command a target's trials run: the one after `--` on the command line, else the one its
/// BUCK target declares, else none.
pub fn target_command(cli: &[String], declared: &[String]) -> Option<Vec<String>> {
    [cli, declared]
        .into_iter()
        .find(|c| !c.is_empty())
        .map(<[String]>::to_vec)
}

/// Paths relative to the current directory read better in diagnostics than absolute ones.
pub fn display_path(path: &Path, cwd: &Path) -> PathBuf {
    path.strip_prefix(cwd)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Resolves every spec (`//recipes:x`, `//recipes/...`, a file) through BUCK files and adds
/// each recipe to the session's compile database.
pub fn add(
    session: &Session,
    specs: &[String],
    extra_sidecars: &[PathBuf],
    command: &[String],
) -> Result<Vec<TargetId>, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| crate::exit::infra(format!("cannot read the current directory: {e}")))?;
    let mut ids = Vec::new();
    for spec in specs {
        for t in aorta_labels::resolve(session.workspace_root(), spec)? {
            let sidecars: Vec<PathBuf> = t
                .mitigations_files
                .iter()
                .chain(extra_sidecars)
                .cloned()
                .collect();
            let origin = RecipeOrigin::File {
                path: display_path(&t.recipe, &cwd),
                sidecars,
                overlays: Default::default(),
            };
            ids.push(session.add_target(TargetSpec {
                label: Some(t.label.clone()),
                origin,
                argv: target_command(command, &t.command),
            }));
        }
    }
    Ok(ids)
}
