//! Compiling targets on the session's one salsa database: every file that feeds a recipe
//! (the recipe, the project registry beside it, sidecars) is a `SourceText` input; a
//! change sets only that input, so salsa re-runs only the queries that read it. One-shot builds
//! compile each target once; watch mode keeps the same database across rebuilds.

use crate::environment::EnvRecord;
use crate::error::{EngineError, Result};
use crate::workloads::{Workload, WorkloadError};
use aorta_graph::{BuildInputs, CompileDb, Dag, KeyContext, PlannedTrial, SourceText};
use aorta_recipe::Recipe;
use salsa::Setter;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to compile.
#[derive(Debug, Clone)]
pub struct TargetSpec {
    /// The Buck-style label the user named (`//recipes:x`), shown in plans; None for a
    /// recipe given by path or built from flags.
    pub label: Option<String>,
    pub origin: RecipeOrigin,
    /// The command a probe recipe wraps (ignored for workload recipes).
    pub argv: Option<Vec<String>>,
}

/// Where a target's recipe comes from: always an input of the compile database, which parses,
/// builds and validates it (`aorta_graph::db::recipe`). Serializable, so a Slurm task compiles
/// the submitter's recipe from the same origin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RecipeOrigin {
    /// A recipe file and its sidecar registries. The project registry beside the recipe is
    /// found automatically.
    File {
        path: PathBuf,
        sidecars: Vec<PathBuf>,
        /// Command-line settings laid over the file, applied by the database after parsing.
        overlays: aorta_recipe::Overlays,
    },
    /// A recipe the command line describes: flag mode, `aorta run`, an agent look.
    Request {
        request: aorta_recipe::RecipeRequest,
        sidecars: Vec<PathBuf>,
        /// The recipe file the request is laid over (the agent's `--recipe`).
        template: Option<PathBuf>,
    },
}

impl RecipeOrigin {
    /// How messages name a target that has no label.
    pub fn display_name(&self) -> String {
        match self {
            RecipeOrigin::File { path, .. } => path.display().to_string(),
            RecipeOrigin::Request { request, .. } => request.display_name().to_string(),
        }
    }

    /// The same origin with every path made absolute against `cwd` (for a Slurm task, which
    /// may start elsewhere).
    pub fn absolute(&self, cwd: &Path) -> RecipeOrigin {
        let all = |v: &[PathBuf]| v.iter().map(|p| cwd.join(p)).collect();
        match self {
            RecipeOrigin::File {
                path,
                sidecars,
                overlays,
            } => RecipeOrigin::File {
                path: cwd.join(path),
                sidecars: all(sidecars),
                overlays: overlays.clone(),
            },
            RecipeOrigin::Request {
                request,
                sidecars,
                template,
            } => RecipeOrigin::Request {
                request: request.clone(),
                sidecars: all(sidecars),
                template: template.as_ref().map(|t| cwd.join(t)),
            },
        }
    }

    /// Every file the recipe is read from (the recipe or template, then sidecars).
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        let (first, sidecars) = match self {
            RecipeOrigin::File { path, sidecars, .. } => (Some(path), sidecars),
            RecipeOrigin::Request {
                sidecars, template, ..
            } => (template.as_ref(), sidecars),
        };
        first.into_iter().chain(sidecars).map(PathBuf::as_path)
    }
}

/// A target in the compile database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetId(pub(crate) usize);

pub(crate) struct Target {
    pub(crate) spec: TargetSpec,
    pub(crate) build: BuildInputs,
}

/// The compile database and its targets.
pub(crate) struct Compiler {
    pub(crate) db: CompileDb,
    pub(crate) files: BTreeMap<PathBuf, SourceText>,
    pub(crate) targets: Vec<Target>,
}

/// A compiled target: everything a plan, a build or an explanation needs.
#[derive(Clone)]
pub struct Compiled {
    pub id: TargetId,
    /// The label, else the recipe's path, else `<flags>`: how messages name the target.
    pub label: String,
    /// The Buck-style label, if the target was named by one.
    pub target_label: Option<String>,
    pub recipe: Arc<Recipe>,
    /// The wrapped command (probe recipes only).
    pub argv: Option<Vec<String>>,
    pub(crate) planned: Arc<Vec<PlannedTrial>>,
    pub dag: Arc<Dag>,
    pub env: Arc<EnvRecord>,
    /// The workload recipe's executable, or why it cannot run (the cell's error).
    pub workload: Option<std::result::Result<Workload, WorkloadError>>,
    /// Files whose content feeds the keys besides the recipe's (a command's input files).
    pub input_files: Vec<PathBuf>,
    /// Each input file with the content digest its trials were keyed by: re-checked after
    /// every trial, so a file edited while trials ran cannot store new results under old keys.
    pub input_digests: Vec<(PathBuf, String)>,
    /// What the build should say before it runs anything (a command that cannot be found).
    pub warnings: Vec<String>,
}

impl Compiled {
    /// Every planned trial with its key, cells in order, trials by index.
    pub fn planned(&self) -> &[PlannedTrial] {
        &self.planned
    }

    /// The cell index by name, or a usage error listing the cells.
    pub fn cell_index(&self, name: &str) -> Result<usize> {
        self.recipe
            .cells
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.recipe.cells.iter().map(|c| c.name.as_str()).collect();
                EngineError::usage(
                    format!("{}: no cell named {name:?}", self.label),
                    format!("cells: {}", names.join(", ")),
                )
            })
    }

    /// The planned trial `index` of cell `cell`, or a usage error naming the valid range.
    pub fn trial(&self, cell: usize, index: u32) -> Result<&PlannedTrial> {
        let mine = self.dag.cell_trials(cell);
        mine.iter()
            .map(|&i| &self.planned()[i])
            .find(|p| p.index == index)
            .ok_or_else(|| {
                EngineError::usage(
                    format!(
                        "cell {:?} has {} trial(s); there is no trial {index}",
                        self.recipe.cells[cell].name,
                        mine.len()
                    ),
                    format!("use --trial 0..{}", mine.len().saturating_sub(1)),
                )
            })
    }
}

/// Absolute, symlinks resolved where possible: the form file watchers report paths in.
pub fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map(|d| d.join(name)).unwrap_or(abs),
        _ => abs,
    }
}

fn read(path: &Path) -> String {
    // A file that vanished mid-save reads as empty: the recipe then fails to parse and watch
    // mode reports it, until the editor writes it back.
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Compiler {
    pub(crate) fn new() -> Self {
        Compiler {
            db: CompileDb::logging(),
            files: BTreeMap::new(),
            targets: Vec::new(),
        }
    }

    fn source(&mut self, path: &Path) -> SourceText {
        let key = normalize(path);
        if let Some(s) = self.files.get(&key) {
            return *s;
        }
        // Diagnostics show the path as the user wrote it.
        let s = SourceText::new(&self.db, path.to_path_buf(), read(&key));
        self.files.insert(key, s);
        s
    }

    pub(crate) fn add(&mut self, spec: TargetSpec) -> TargetId {
        let (file, sidecars, request, overlays) = match &spec.origin {
            RecipeOrigin::File {
                path,
                sidecars,
                overlays,
            } => (Some(path), sidecars, None, overlays.clone()),
            RecipeOrigin::Request {
                request,
                sidecars,
                template,
            } => (
                template.as_ref(),
                sidecars,
                Some(request.clone()),
                Default::default(),
            ),
        };
        let recipe_src = file.map(|p| self.source(p));
        let project = file
            .and_then(|p| aorta_registry::project_registry_for(p))
            .map(|p| self.source(&p));
        let sidecars: Vec<SourceText> = sidecars.iter().map(|p| self.source(p)).collect();
        let build = BuildInputs::new(
            &self.db,
            recipe_src,
            project,
            sidecars,
            request,
            overlays,
            KeyContext::default(),
        );
        self.targets.push(Target { spec, build });
        TargetId(self.targets.len() - 1)
    }

    /// Re-reads `changed` (any paths; unknown ones are ignored) and updates the inputs whose
    /// text differs. Returns the watched files that really changed.
    pub(crate) fn refresh(&mut self, changed: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for p in changed {
            let p = normalize(p);
            let Some(src) = self.files.get(&p).copied() else {
                continue;
            };
            let text = read(&p);
            if *src.text(&self.db) != text {
                src.set_text(&mut self.db).to(text);
                out.push(p);
            }
        }
        out.sort();
        out.dedup();
        out
    }
}
