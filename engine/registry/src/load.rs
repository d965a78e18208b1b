//! Merging built-ins, the project registry and sidecars into one [`Registry`].
//!
//! Order is built-ins → project registry → sidecars in command-line order. Every name must be
//! unique across all of them: a collision is an error naming both definitions (paths as given),
//! pointing at the second one's key, because an override would make a recipe's meaning
//! depend on which files were passed.

use crate::sidecar::{self, Entry};
use crate::{Registry, Source, PROJECT_REGISTRY_FILE};
use aorta_source::{Diag, DiagKind, SourceFile};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The project registry for a recipe: `aorta-registry.json` in the recipe's directory, if
/// that file exists.
pub fn project_registry_for(recipe_path: &Path) -> Option<PathBuf> {
    let dir = match recipe_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let candidate = dir.join(PROJECT_REGISTRY_FILE);
    candidate.is_file().then_some(candidate)
}

pub(crate) fn load(project: Option<&Path>, sidecars: &[PathBuf]) -> Result<Registry, Box<Diag>> {
    check_basenames(sidecars)?;
    if let Some(project) = project {
        check_project_not_sidecar(project, sidecars)?;
        check_project_symlink(project)?; // before reading it
    }
    let project_file = project
        .map(|p| SourceFile::read(p).map(|f| (p, f)))
        .transpose()?;
    let mut files = Vec::with_capacity(sidecars.len());
    for path in sidecars {
        files.push((path.clone(), SourceFile::read(path)?));
    }
    from_sources(project_file, &files)
}

/// Builds a registry from already-read files (the incremental compile layer reads them once
/// and hands the texts here, so a registry is a pure function of its inputs).
pub(crate) fn from_sources(
    project: Option<(&Path, SourceFile)>,
    sidecars: &[(PathBuf, SourceFile)],
) -> Result<Registry, Box<Diag>> {
    let paths: Vec<PathBuf> = sidecars.iter().map(|(p, _)| p.clone()).collect();
    check_basenames(&paths)?;
    if let Some((path, _)) = &project {
        check_project_symlink(path)?; // again: watch mode reads the files itself
    }
    let mut merger = Merger {
        registry: Registry::builtin(),
        origins: HashMap::new(),
    };
    let project_path = project.as_ref().map(|(p, _)| p.to_path_buf());
    if let Some((path, file)) = project {
        merger.add_file(
            path,
            file,
            Source::Project {
                path: path.to_path_buf(),
            },
        )?;
    }
    for (path, file) in sidecars {
        merger.add_file(path, file.clone(), Source::Sidecar { path: path.clone() })?;
    }
    let project = project_path.as_deref();
    let sidecars = &paths;
    let mut registry = merger.registry;
    registry.project = project.map(Path::to_path_buf);
    registry.sidecars = sidecars.to_vec();
    Ok(registry)
}

/// Sources are tagged `sidecar:<basename>` and copied to `<run>/sidecars/<basename>`, so two
/// files with one basename (or one file twice) would be indistinguishable: refuse up front.
fn check_basenames(sidecars: &[PathBuf]) -> Result<(), Box<Diag>> {
    let mut seen: HashMap<&std::ffi::OsStr, &Path> = HashMap::new();
    for path in sidecars {
        let Some(base) = path.file_name() else {
            return Err(Box::new(
                Diag::new(
                    DiagKind::Registry,
                    format!("sidecar path {} does not name a file", path.display()),
                )
                .with_help("pass the path of a .json sidecar file"),
            ));
        };
        if let Some(first) = seen.insert(base, path) {
            let message = if first == path.as_path() {
                format!("sidecar file {} is given twice", path.display())
            } else {
                format!(
                    "sidecar files {} and {} share the basename '{}'",
                    first.display(),
                    path.display(),
                    base.to_string_lossy()
                )
            };
            return Err(Box::new(Diag::new(DiagKind::Registry, message).with_help(
                "sidecars are identified by basename (sidecar:<basename>, <run>/sidecars/<basename>); pass each file once and rename one of two namesakes",
            )));
        }
    }
    Ok(())
}

/// Files that mark a project's root (as `aorta-labels` finds the workspace: `.buckconfig`,
/// `.aorta-root`), and `.git`.
const PROJECT_ROOT_MARKERS: &[&str] = &[".buckconfig", ".aorta-root", ".git"];

/// The project a directory belongs to: its nearest ancestor holding a root marker, else itself.
fn project_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| PROJECT_ROOT_MARKERS.iter().any(|m| d.join(m).exists()))
        .unwrap_or(dir)
        .to_path_buf()
}

/// The project registry is picked up by being next to a recipe, without being named on the
/// command line; a symlink from there to a file outside the project is refused (an error
/// would otherwise quote the first lines of, say, a system file).
fn check_project_symlink(project: &Path) -> Result<(), Box<Diag>> {
    let is_link = std::fs::symlink_metadata(project).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(());
    }
    let dir = project
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let (Ok(target), Ok(dir)) = (project.canonicalize(), dir.canonicalize()) else {
        return Ok(()); // a dangling link: reading it reports the error
    };
    let root = project_root(&dir);
    if target.starts_with(&root) {
        return Ok(());
    }
    Err(Box::new(
        Diag::new(
            DiagKind::Registry,
            format!("{} is a symbolic link to {}, outside the project ({})", project.display(), target.display(), root.display()),
        )
        .with_help(format!("a project registry must live in the project; copy the file next to the recipe, or pass it explicitly as a sidecar (--mitigations-file); the project root is the nearest directory holding one of {}", PROJECT_ROOT_MARKERS.join(", "))),
    ))
}

/// Passing the project registry again as a sidecar would collide on every name; say why.
fn check_project_not_sidecar(project: &Path, sidecars: &[PathBuf]) -> Result<(), Box<Diag>> {
    let Ok(project_real) = project.canonicalize() else {
        return Ok(());
    };
    for path in sidecars {
        if path.canonicalize().is_ok_and(|p| p == project_real) {
            return Err(Box::new(
                Diag::new(
                    DiagKind::Registry,
                    format!("{} is the project registry and is also given as a sidecar", path.display()),
                )
                .with_help(format!("{PROJECT_REGISTRY_FILE} next to the recipe is loaded automatically; do not pass it again")),
            ));
        }
    }
    Ok(())
}

#[derive(Hash, PartialEq, Eq, Clone, Copy)]
enum Kind {
    Mitigation,
    Environment,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Mitigation => "mitigation",
            Kind::Environment => "environment",
        }
    }
}

struct Merger {
    registry: Registry,
    /// Where each file-defined name was first seen: `/abs/path.json:3:5 (sidecar:path.json)`.
    origins: HashMap<(Kind, String), String>,
}

impl Merger {
    fn add_file(&mut self, path: &Path, file: SourceFile, source: Source) -> Result<(), Box<Diag>> {
        let parsed = sidecar::parse(file, &source)?;
        // The path as the user gave it: stable across machines and checkouts.
        let full = path.to_path_buf();
        let file = &parsed.file;
        let ctx = FileCtx {
            file,
            full: &full,
            source: &source,
        };
        insert_all(
            &mut self.registry.mitigations,
            &mut self.origins,
            Kind::Mitigation,
            parsed.mitigations,
            &ctx,
        )?;
        insert_all(
            &mut self.registry.environments,
            &mut self.origins,
            Kind::Environment,
            parsed.environments,
            &ctx,
        )
    }
}

struct FileCtx<'a> {
    file: &'a SourceFile,
    full: &'a Path,
    source: &'a Source,
}

/// Anything with a name that lives in one of the registry maps.
trait Named {
    fn name(&self) -> &str;
}

impl Named for crate::Mitigation {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Named for crate::Environment {
    fn name(&self) -> &str {
        &self.name
    }
}

fn insert_all<T: Named>(
    map: &mut BTreeMap<String, T>,
    origins: &mut HashMap<(Kind, String), String>,
    kind: Kind,
    entries: Vec<Entry<T>>,
    cx: &FileCtx<'_>,
) -> Result<(), Box<Diag>> {
    for Entry { item, key_span } in entries {
        let name = item.name().to_string();
        if map.contains_key(&name) {
            let first = match origins.get(&(kind, name.clone())) {
                Some(location) => format!("at {location}"),
                None => "as a built-in (aorta)".to_string(),
            };
            let (line, col) = cx.file.line_col(key_span.start);
            let message = format!(
                "{} '{name}' is already defined {first}; defined again at {}:{line}:{col} ({})",
                kind.noun(),
                cx.full.display(),
                cx.source
            );
            let section = match kind {
                Kind::Mitigation => "mitigations",
                Kind::Environment => "environments",
            };
            return Err(Box::new(
                Diag::new(DiagKind::Registry, message)
                    .with_path(&aorta_source::FieldPath::root().key(section).key(&name))
                    .at(cx.file, key_span, "defined again here")
                    .with_help("names must be unique across built-ins, aorta-registry.json and sidecars (there is no override); rename this entry or drop one of the files"),
            ));
        }
        let (line, col) = cx.file.line_col(key_span.start);
        origins.insert(
            (kind, name.clone()),
            format!("{}:{line}:{col} ({})", cx.full.display(), cx.source),
        );
        map.insert(name, item);
    }
    Ok(())
}
