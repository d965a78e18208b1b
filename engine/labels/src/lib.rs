//! Buck-style labels for aorta recipes.
//!
//! `aorta build //recipes:ticket-1234` and `aorta build //recipes/...` name recipes the way Buck2
//! names targets, so a repository can be driven by both `aorta` and real `buck2`. We resolve
//! labels by evaluating the package's BUCK file with starlark-rust against a stub of the Buck2
//! globals (`rule`, `attrs.*`, providers), which records every [`Target`] a rule call declares;
//! targets of the [`AORTA_RECIPE_RULE`] rule (from `rules/aorta.bzl`) are recipes. Packages without a BUCK file
//! still work: `//pkg:x` falls back to `pkg/x.yaml`.
//!
//! Nothing here prints; every failure is a [`LabelsError`], a `miette::Diagnostic` pointing at
//! the offending label or BUCK/`.bzl` source.

pub mod analysis;
mod attrs;
mod buck2;
mod error;
mod eval;
mod label;
mod resolve;

use std::path::{Path, PathBuf};

pub use buck2::{Target, AORTA_RECIPE_RULE};
pub use error::{LabelsError, LabelsErrorKind};
pub use eval::{BuildFile, BUILD_FILE_NAMES};
pub use label::{Label, LabelError};

/// Files that mark the workspace root: Buck2's `.buckconfig`, or `.aorta-root` for repos without Buck2.
pub const ROOT_MARKERS: &[&str] = &[".buckconfig", ".aorta-root"];

/// A recipe a label resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeTarget {
    /// Canonical label (`//recipes:quickstart`); the file stem for a plain path spec.
    pub label: String,
    /// Absolute path of the recipe file (not checked for existence when a BUCK target names it).
    pub recipe: PathBuf,
    /// Absolute paths of the target's `mitigations_files`.
    pub mitigations_files: Vec<PathBuf>,
    /// The target's `labels` attribute (free-form tags).
    pub labels: Vec<String>,
    /// The command a probe recipe wraps (`command` attribute), with `$(location)`-free plain
    /// strings taken relative to the workspace root; empty when the target names none.
    pub command: Vec<String>,
    /// The BUCK file declaring the target; `None` when a recipe file was used directly.
    pub declared_in: Option<PathBuf>,
}

/// The nearest ancestor of `start` (itself included) holding a [`ROOT_MARKERS`] file, else `start`.
///
/// Relative `start` paths are made absolute against the current directory first, so the result
/// is stable however the caller spelled it.
pub fn find_workspace_root(start: &Path) -> PathBuf {
    let start = std::path::absolute(start).unwrap_or_else(|_| start.to_path_buf());
    start
        .ancestors()
        .find(|dir| ROOT_MARKERS.iter().any(|m| dir.join(m).exists()))
        .map_or_else(|| start.clone(), Path::to_path_buf)
}

/// Resolves `spec` — a label (`//recipes:x`, `//recipes`, `//recipes/...`) or a path to a
/// `.yaml`/`.yml`/`.json` recipe file — against the workspace at `root`.
///
/// A single label yields one target; `//pkg/...` yields every recipe below `pkg`, sorted by label.
/// A relative recipe path is taken from the current directory if it exists there, else from `root`.
pub fn resolve(root: &Path, spec: &str) -> Result<Vec<RecipeTarget>, LabelsError> {
    if !spec.starts_with("//") && resolve::has_extension(spec, resolve::RECIPE_EXTENSIONS) {
        return Ok(vec![path_target(root, spec)]);
    }
    let label: Label = spec.parse()?;
    let session = eval::Session::new(root);
    match (&label.target, label.recursive) {
        (Some(target), false) => Ok(vec![resolve::resolve_one(
            &session,
            root,
            &label.package,
            target,
        )?]),
        _ => resolve::resolve_recursive(&session, root, &label),
    }
}

/// Evaluates the BUCK file of `package` (e.g. `"recipes"`) and returns every target it declares,
/// whatever the rule; `Ok(None)` when the package has no BUCK file.
pub fn evaluate_package(root: &Path, package: &str) -> Result<Option<BuildFile>, LabelsError> {
    eval::Session::new(root).eval_package(package)
}

fn path_target(root: &Path, spec: &str) -> RecipeTarget {
    let path = Path::new(spec);
    let recipe = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let from_cwd = std::path::absolute(path).ok();
        match from_cwd {
            Some(p) if p.exists() => p,
            _ if root.join(path).exists() => root.join(path),
            Some(p) => p,
            None => root.join(path),
        }
    };
    RecipeTarget {
        label: path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        recipe,
        mitigations_files: Vec::new(),
        labels: Vec::new(),
        command: Vec::new(),
        declared_in: None,
    }
}
