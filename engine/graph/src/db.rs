//! The incremental compile layer on salsa: inputs are file texts (or a recipe built from
//! flags) and machine facts; tracked queries go parse → resolved recipe → trial keys → DAG. A
//! change that leaves the keys equal (a comment, a reordered mapping) stops there: salsa's early
//! cutoff skips the DAG rebuild. One database serves one-shot builds and watch mode alike.

use crate::dag::Dag;
pub use crate::plan_keys::PlannedTrial;
use crate::plan_keys::{trial_inputs, KeyContext};
use aorta_recipe::{Recipe, RecipeRequest};
use aorta_registry::Registry;
use aorta_source::{Diag, SourceFile, Syntax};
use aorta_store::Key;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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
    /// The recipe file, or the template a request is laid over.
    pub recipe: Option<SourceText>,
    pub project_registry: Option<SourceText>,
    #[returns(ref)]
    pub sidecars: Vec<SourceText>,
    /// A recipe the command line describes (flag mode, `aorta run`, an agent look), built over
    /// `recipe` if that is set.
    #[returns(ref)]
    pub request: Option<RecipeRequest>,
    /// Command-line settings applied to the parsed file (`--ticket`, `--collect`, …).
    #[returns(ref)]
    pub overlays: aorta_recipe::Overlays,
    #[returns(ref)]
    pub context: KeyContext,
}

/// The database. [`CompileDb::logging`] records which queries executed, so watch mode can say
/// which recipes were re-parsed (and tests can assert it).
#[salsa::db]
#[derive(Clone, Default)]
pub struct CompileDb {
    storage: salsa::Storage<Self>,
    executed: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>>,
}

#[salsa::db]
impl salsa::Database for CompileDb {}

impl CompileDb {
    /// A database that logs every query execution (see [`Self::take_executed`]).
    pub fn logging() -> Self {
        let executed: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>> = Arc::default();
        let log = executed.clone();
        let callback: Box<dyn Fn(salsa::Event) + Send + Sync + 'static> =
            Box::new(move |event: salsa::Event| {
                if let salsa::EventKind::WillExecute { database_key } = event.kind {
                    if let Ok(mut v) = log.lock() {
                        v.push(database_key);
                    }
                }
            });
        CompileDb {
            storage: salsa::Storage::new(Some(callback)),
            executed,
        }
    }

    /// The inputs whose `query` executed since the last call (empty unless [`Self::logging`]).
    pub fn take_executed(&self, query: &str) -> Vec<BuildInputs> {
        use salsa::plumbing::FromId;
        let events = std::mem::take(&mut *self.executed.lock().unwrap_or_else(|p| p.into_inner()));
        events
            .into_iter()
            .filter(|k| salsa::Database::ingredient_debug_name(self, k.ingredient_index()) == query)
            .map(|k| BuildInputs::from_id(k.key_index()))
            .collect()
    }
}

/// Shared so salsa can memoize it (a Diag holds file texts, so cloning it is not free).
pub type Shared<T> = Arc<Result<T, Box<Diag>>>;

fn file_of(db: &dyn salsa::Database, t: SourceText) -> SourceFile {
    SourceFile::new(t.path(db).display().to_string(), t.text(db).clone())
}

#[salsa::tracked(returns(ref), no_eq)]
pub fn registry(db: &dyn salsa::Database, build: BuildInputs) -> Shared<Registry> {
    let project = build
        .project_registry(db)
        .map(|t| (t.path(db).clone(), file_of(db, t)));
    let sidecars: Vec<(PathBuf, SourceFile)> = build
        .sidecars(db)
        .iter()
        .map(|t| (t.path(db).clone(), file_of(db, *t)))
        .collect();
    Arc::new(Registry::from_sources(
        project.as_ref().map(|(p, f)| (p.as_path(), f.clone())),
        &sidecars,
    ))
}

#[salsa::tracked(returns(ref), no_eq)]
pub fn recipe(db: &dyn salsa::Database, build: BuildInputs) -> Shared<Recipe> {
    let registry = match registry(db, build).as_ref() {
        Ok(r) => r,
        Err(e) => return Arc::new(Err(e.clone())),
    };
    let file = build
        .recipe(db)
        .map(|src| parse_file(db, build, src, registry));
    let mut result = match (build.request(db), file) {
        (None, Some(file)) => file,
        (Some(request), template) => match template.transpose() {
            Ok(t) => request.build(registry, t.as_ref()),
            Err(e) => Err(e),
        },
        (None, None) => Err(Box::new(Diag::new(
            aorta_source::DiagKind::Usage,
            "no recipe: neither a file nor a request",
        ))),
    };
    if let Ok(r) = &mut result {
        if let Err(e) = build.overlays(db).apply(r) {
            return Arc::new(Err(e));
        }
    }
    Arc::new(result)
}

/// A recipe file parsed, with where it came from.
fn parse_file(
    db: &dyn salsa::Database,
    build: BuildInputs,
    src: SourceText,
    registry: &Registry,
) -> Result<Recipe, Box<Diag>> {
    let path = src.path(db);
    let mut r = aorta_recipe::parse_recipe(&file_of(db, src), Syntax::for_path(path), registry)?;
    r.source = Some(aorta_recipe::RecipeSource {
        path: path.clone(),
        blake3: blake3::hash(src.text(db).as_bytes()).to_hex().to_string(),
    });
    r.registry_files = build
        .project_registry(db)
        .iter()
        .chain(build.sidecars(db))
        .map(|t| t.path(db).clone())
        .collect();
    Ok(r)
}

/// Every trial of the recipe with its key. Equal keys → downstream queries are not re-run.
/// The error is a message (String: salsa compares a query's value, and the recipe's `Diag`
/// and the hash error are not comparable); the session turns it into its own error.
#[salsa::tracked(returns(ref))]
pub fn trials(
    db: &dyn salsa::Database,
    build: BuildInputs,
) -> Result<Arc<Vec<PlannedTrial>>, String> {
    match recipe(db, build).as_ref() {
        Ok(r) => trial_inputs(r, build.context(db))
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The shape of the recipe the DAG needs (cell count, environment slugs): a small, comparable
/// view, so a text edit that keeps the meaning does not rebuild the DAG.
#[salsa::tracked(returns(ref))]
pub fn shape(db: &dyn salsa::Database, build: BuildInputs) -> Arc<(usize, Vec<String>)> {
    let Ok(r) = recipe(db, build).as_ref() else {
        return Arc::new((0, Vec::new()));
    };
    let mut envs: Vec<String> = r
        .cells
        .iter()
        .map(|c| aorta_recipe::safe_slug(&c.environment.name))
        .collect();
    envs.sort_unstable();
    envs.dedup();
    Arc::new((r.cells.len(), envs))
}

#[salsa::tracked(returns(ref))]
pub fn dag(db: &dyn salsa::Database, build: BuildInputs) -> Arc<Option<Dag>> {
    match trials(db, build) {
        Ok(t) => {
            let (cells, envs) = shape(db, build).as_ref();
            Arc::new(Some(Dag::build(
                *cells,
                t,
                &build.context(db).env_snapshot,
                envs,
            )))
        }
        Err(_) => Arc::new(None),
    }
}

/// Keys of a cell's trials, in index order (for tests and `explain`).
pub fn keys_by_cell(trials: &[PlannedTrial]) -> BTreeMap<usize, Vec<Key>> {
    let mut out: BTreeMap<usize, Vec<Key>> = BTreeMap::new();
    for t in trials {
        out.entry(t.cell).or_default().push(t.key.clone());
    }
    out
}
