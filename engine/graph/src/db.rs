//! The incremental compile layer on salsa: inputs are file texts and machine facts; tracked
//! queries go parse → resolved recipe → trial keys → DAG. A change that leaves the keys equal
//! (a comment, a reordered mapping) stops there: salsa's early cutoff skips the DAG rebuild.

use crate::dag::Dag;
use crate::key::{KeyInputs, TrialKey};
use crate::plan_keys::{trial_inputs, KeyContext};
use aorta_recipe::Recipe;
use aorta_registry::Registry;
use aorta_source::{Diag, SourceFile, Syntax};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// One file's text as the compile layer saw it.
#[salsa::input]
pub struct SourceText {
    #[returns(ref)]
    pub path: PathBuf,
    #[returns(ref)]
    pub text: String,
}

/// Everything a build of one recipe depends on besides file texts.
#[salsa::input]
pub struct BuildInputs {
    pub recipe: SourceText,
    pub project_registry: Option<SourceText>,
    #[returns(ref)]
    pub sidecars: Vec<SourceText>,
    #[returns(ref)]
    pub context: KeyContext,
}

#[salsa::db]
#[derive(Clone, Default)]
pub struct CompileDb {
    storage: salsa::Storage<Self>,
}

#[salsa::db]
impl salsa::Database for CompileDb {}

/// Shared so salsa can memoize it (a Diag holds file texts, so cloning it is not free).
pub type Shared<T> = Arc<Result<T, Box<Diag>>>;

/// A planned trial: its cell, its index and its key inputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlannedTrial {
    pub cell: usize,
    pub index: u32,
    pub key: TrialKey,
    pub inputs: KeyInputs,
}

fn file_of(db: &dyn salsa::Database, t: SourceText) -> SourceFile {
    SourceFile::new(t.path(db).display().to_string(), t.text(db).clone())
}

#[salsa::tracked(returns(ref), no_eq)]
pub fn registry(db: &dyn salsa::Database, build: BuildInputs) -> Shared<Registry> {
    let project = build.project_registry(db).map(|t| (t.path(db).clone(), file_of(db, t)));
    let sidecars: Vec<(PathBuf, SourceFile)> = build.sidecars(db).iter().map(|t| (t.path(db).clone(), file_of(db, *t))).collect();
    Arc::new(Registry::from_sources(project.as_ref().map(|(p, f)| (p.as_path(), f.clone())), &sidecars))
}

#[salsa::tracked(returns(ref), no_eq)]
pub fn recipe(db: &dyn salsa::Database, build: BuildInputs) -> Shared<Recipe> {
    let registry = match registry(db, build).as_ref() {
        Ok(r) => r,
        Err(e) => return Arc::new(Err(e.clone())),
    };
    let src = build.recipe(db);
    let path = src.path(db);
    let file = file_of(db, *src);
    let mut result = aorta_recipe::parse_recipe(&file, Syntax::for_path(path), registry);
    if let Ok(r) = &mut result {
        r.source = Some(aorta_recipe::RecipeSource { path: path.clone(), blake3: blake3::hash(src.text(db).as_bytes()).to_hex().to_string() });
        r.registry_files = build.project_registry(db).iter().chain(build.sidecars(db)).map(|t| t.path(db).clone()).collect();
    }
    Arc::new(result)
}

/// Every trial of the recipe with its key. Equal keys → downstream queries are not re-run.
#[salsa::tracked(returns(ref))]
pub fn trials(db: &dyn salsa::Database, build: BuildInputs) -> Arc<Result<Vec<PlannedTrial>, String>> {
    match recipe(db, build).as_ref() {
        Ok(r) => Arc::new(Ok(trial_inputs(r, build.context(db)))),
        Err(e) => Arc::new(Err(e.to_string())),
    }
}

/// Cell names in order: a small, comparable view of the recipe for queries that must not
/// re-run when only the recipe's text (not its meaning) changed.
#[salsa::tracked(returns(ref))]
pub fn cell_names(db: &dyn salsa::Database, build: BuildInputs) -> Arc<Vec<String>> {
    Arc::new(recipe(db, build).as_ref().as_ref().map(|r| r.cells.iter().map(|c| c.name.clone()).collect()).unwrap_or_default())
}

#[salsa::tracked(returns(ref))]
pub fn dag(db: &dyn salsa::Database, build: BuildInputs) -> Arc<Option<Dag>> {
    match trials(db, build).as_ref() {
        Ok(t) => Arc::new(Some(Dag::build(cell_names(db, build).len(), t, &build.context(db).env_snapshot))),
        Err(_) => Arc::new(None),
    }
}

/// Keys of a cell's trials, in index order (for tests and `explain`).
pub fn keys_by_cell(trials: &[PlannedTrial]) -> BTreeMap<usize, Vec<TrialKey>> {
    let mut out: BTreeMap<usize, Vec<TrialKey>> = BTreeMap::new();
    for t in trials {
        out.entry(t.cell).or_default().push(t.key.clone());
    }
    out
}
