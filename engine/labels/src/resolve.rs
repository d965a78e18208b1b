//! Label → recipe resolution: BUCK targets first, then `<target>.yaml` files, then errors that
//! list what does exist.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use aorta_source::suggest;
use serde_json::Value as Json;

use crate::buck2::{Target, AORTA_RECIPE_RULE};
use crate::error::{LabelsError, LabelsErrorKind};
use crate::eval::{BuildFile, Session};
use crate::label::Label;
use crate::RecipeTarget;

/// Extensions a recipe file may have, in fallback order.
pub(crate) const RECIPE_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];
/// Extensions `//pkg/...` picks up for recipe files no target names (JSON is too often other data).
const SCAN_EXTENSIONS: &[&str] = &["yaml", "yml"];
/// Directories `//pkg/...` never descends into (besides hidden ones): build outputs.
const SKIP_DIRS: &[&str] = &["target", "buck-out"];

pub(crate) fn has_extension(path: &str, exts: &[&str]) -> bool {
    Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.contains(&e))
}

/// `dir.join(rel)` without `.` components, so paths compare equal however the BUCK file spelled them.
fn clean_join(dir: &Path, rel: &str) -> PathBuf {
    let mut out = dir.to_path_buf();
    out.extend(
        Path::new(rel)
            .components()
            .filter(|c| !matches!(c, Component::CurDir)),
    );
    out
}

fn is_recipe(t: &Target) -> bool {
    t.rule == AORTA_RECIPE_RULE
}

fn strings(t: &Target, key: &str) -> Vec<String> {
    match t.attrs.get(key) {
        Some(Json::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

fn recipe_of(root: &Path, bf: &BuildFile, t: &Target) -> Result<RecipeTarget, LabelsError> {
    let label = Label::target_label(&bf.package, &t.name);
    let dir = root.join(&bf.package);
    let Some(recipe) = t.attrs.get("recipe").and_then(Json::as_str) else {
        return Err(LabelsErrorKind::NotARecipe {
            label,
            rule: t.rule.clone(),
            help: format!(
                "the `{AORTA_RECIPE_RULE}` rule in {} must declare \"recipe\": attrs.source()",
                t.rule_file
            ),
        }
        .into());
    };
    Ok(RecipeTarget {
        label,
        recipe: clean_join(&dir, recipe),
        mitigations_files: strings(t, "mitigations_files")
            .iter()
            .map(|m| clean_join(&dir, m))
            .collect(),
        labels: strings(t, "labels"),
        command: strings(t, "command"),
        declared_in: Some(bf.path.clone()),
    })
}

fn file_target(package: &str, name: &str, path: PathBuf) -> RecipeTarget {
    RecipeTarget {
        label: Label::target_label(package, name),
        recipe: path,
        mitigations_files: Vec::new(),
        labels: Vec::new(),
        command: Vec::new(),
        declared_in: None,
    }
}

/// Recipe-looking files directly in `dir`, sorted by file name.
fn recipe_files(dir: &Path, exts: &[&str]) -> Result<Vec<PathBuf>, LabelsError> {
    let entries = std::fs::read_dir(dir).map_err(|e| LabelsError::io(dir, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.to_str().is_some_and(|s| has_extension(s, exts)))
        .collect();
    files.sort();
    Ok(files)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// `//pkg:target`.
pub(crate) fn resolve_one(
    session: &Session,
    root: &Path,
    package: &str,
    target: &str,
) -> Result<RecipeTarget, LabelsError> {
    let label = Label::target_label(package, target);
    let dir = root.join(package);
    let build = session.eval_package(package)?;
    if let Some(bf) = &build {
        if let Some(t) = bf.targets.iter().find(|t| t.name == target) {
            if is_recipe(t) {
                return recipe_of(root, bf, t);
            }
            return Err(LabelsErrorKind::NotARecipe {
                label,
                rule: t.rule.clone(),
                help: format!(
                    "only `{AORTA_RECIPE_RULE}` targets are recipes; recipes in //{package}: {}",
                    recipe_names(bf).join(", ")
                ),
            }
            .into());
        }
    }

    // Fallback: a recipe file named after the target (or the target *is* a file name).
    let mut candidates: Vec<PathBuf> = Vec::new();
    if has_extension(target, RECIPE_EXTENSIONS) {
        candidates.push(dir.join(target));
    }
    candidates.extend(
        RECIPE_EXTENSIONS
            .iter()
            .map(|ext| dir.join(format!("{target}.{ext}"))),
    );
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(file_target(package, target, found.clone()));
    }

    if !dir.is_dir() {
        let help = match package.rsplit_once('/').map_or(package, |(_, last)| last) {
            last if has_extension(last, RECIPE_EXTENSIONS) => format!("to name a file, pass its path ({package}) or use //{}:{}", package.rsplit_once('/').map_or("", |(p, _)| p), stem(Path::new(last))),
            _ => "packages are directories under the workspace root (the directory holding .buckconfig or .aorta-root)".to_owned(),
        };
        return Err(LabelsErrorKind::NoPackage { label, dir, help }.into());
    }

    let declared = build.as_ref().map(recipe_names);
    let mut available = declared.clone().unwrap_or_default();
    let referenced: BTreeSet<PathBuf> = match &build {
        Some(bf) => bf
            .targets
            .iter()
            .filter(|t| is_recipe(t))
            .filter_map(|t| recipe_of(root, bf, t).ok())
            .map(|r| r.recipe)
            .collect(),
        None => BTreeSet::new(),
    };
    for f in recipe_files(&dir, RECIPE_EXTENSIONS)? {
        if !referenced.contains(&f) && !available.contains(&stem(&f)) {
            available.push(stem(&f));
        }
    }
    let available: Vec<String> = suggest::by_distance(target, available.iter().map(String::as_str))
        .into_iter()
        .map(str::to_owned)
        .collect();

    // The names are listed once, in the help, closest first; the message only counts them.
    let what = match &declared {
        Some(names) if names.is_empty() => "BUCK declares no recipes".to_owned(),
        Some(names) if names.len() == 1 => "BUCK declares 1 recipe".to_owned(),
        Some(names) => format!("BUCK declares {} recipes", names.len()),
        None => "no BUCK file".to_owned(),
    };
    let tried = candidates[0]
        .strip_prefix(root)
        .unwrap_or(&candidates[0])
        .display()
        .to_string();
    let message = format!("no target '{target}' in //{package} ({what}) and no file {tried}");
    let help = if available.is_empty() {
        format!("//{package} has no recipes: add aorta_recipe(name = \"{target}\", recipe = \"{target}.yaml\") to its BUCK file, or create {tried}")
    } else {
        let guess = suggest::did_you_mean(target, available.iter().map(String::as_str))
            .map(|g| format!("did you mean //{package}:{g}? "))
            .unwrap_or_default();
        let all = if package.is_empty() {
            "//...".to_owned()
        } else {
            format!("//{package}/...")
        };
        const SHOWN: usize = 8;
        let more = match available.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let shown: Vec<&str> = available.iter().take(SHOWN).map(String::as_str).collect();
        format!(
            "{guess}in //{package}, closest first: {}{more} (`aorta build {all} --dry-run` lists them all)",
            shown.join(", "),
        )
    };
    Err(LabelsErrorKind::NoTarget {
        message,
        available,
        help,
    }
    .into())
}

fn recipe_names(bf: &BuildFile) -> Vec<String> {
    bf.targets
        .iter()
        .filter(|t| is_recipe(t))
        .map(|t| t.name.clone())
        .collect()
}

/// Packages at or below `package`, sorted: hidden directories, build outputs and symlinks skipped.
fn packages_below(root: &Path, package: &str) -> Result<Vec<String>, LabelsError> {
    let mut out = Vec::new();
    let mut stack = vec![package.to_owned()];
    while let Some(pkg) = stack.pop() {
        let dir = root.join(&pkg);
        let entries = std::fs::read_dir(&dir).map_err(|e| LabelsError::io(&dir, e))?;
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !name.starts_with('.') && !SKIP_DIRS.contains(&name.as_str()) {
                stack.push(if pkg.is_empty() {
                    name
                } else {
                    format!("{pkg}/{name}")
                });
            }
        }
        out.push(pkg);
    }
    out.sort();
    Ok(out)
}

/// `//pkg/...`: every recipe target at or below `package`, plus recipe files no target names.
pub(crate) fn resolve_recursive(
    session: &Session,
    root: &Path,
    label: &Label,
) -> Result<Vec<RecipeTarget>, LabelsError> {
    let dir = root.join(&label.package);
    if !dir.is_dir() {
        let help = "packages are directories under the workspace root".to_owned();
        return Err(LabelsErrorKind::NoPackage {
            label: label.to_string(),
            dir,
            help,
        }
        .into());
    }
    let packages = packages_below(root, &label.package)?;
    let mut out = Vec::new();
    let mut referenced = BTreeSet::new();
    // Target names per package, so an untargeted `x.yaml` never shadows a declared `x`.
    let mut names: Vec<BTreeSet<String>> = Vec::new();
    for pkg in &packages {
        let mut taken = BTreeSet::new();
        if let Some(bf) = session.eval_package(pkg)? {
            for t in &bf.targets {
                taken.insert(t.name.clone());
                if is_recipe(t) {
                    let r = recipe_of(root, &bf, t)?;
                    referenced.insert(r.recipe.clone());
                    referenced.extend(r.mitigations_files.iter().cloned());
                    out.push(r);
                }
            }
        }
        names.push(taken);
    }
    for (pkg, mut taken) in packages.iter().zip(names) {
        for f in recipe_files(&root.join(pkg), SCAN_EXTENSIONS)? {
            if referenced.contains(&f) {
                continue;
            }
            let stem = stem(&f);
            let name = if taken.contains(&stem) {
                f.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            } else {
                stem
            };
            taken.insert(name.clone());
            out.push(file_target(pkg, &name, f));
        }
    }
    if out.is_empty() {
        let help = format!(
            "add aorta_recipe targets to a BUCK file under {}, or put recipe .yaml files there",
            if label.package.is_empty() {
                "the workspace root".to_owned()
            } else {
                label.package.clone()
            }
        );
        return Err(LabelsErrorKind::NoRecipes {
            pattern: label.to_string(),
            help,
        }
        .into());
    }
    out.sort_by(|a, b| a.label.cmp(&b.label));
    Ok(out)
}
