//! Watch mode's compile side: one salsa database kept alive across rebuilds. Every watched file
//! (recipes, project registries, sidecars) is a `SourceText` input; a change sets only that
//! input, so salsa re-runs only the queries that read it: editing one recipe re-parses that
//! recipe alone, and the store then executes only the trials whose keys changed.
//!
//! The database records salsa's `WillExecute` events, so [`Workspace::take_reparsed`] can say
//! which recipes were actually re-parsed (watch mode prints it; tests assert it).

use aorta_graph::db::{recipe, trials, PlannedTrial, Shared};
use aorta_graph::{BuildInputs, KeyContext, SourceText};
use aorta_recipe::Recipe;
use salsa::plumbing::AsId;
use salsa::{DatabaseKeyIndex, Setter};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A salsa database that logs which queries executed.
#[salsa::db]
#[derive(Clone)]
pub struct WatchDb {
    storage: salsa::Storage<Self>,
}

#[salsa::db]
impl salsa::Database for WatchDb {}

/// One label being watched.
pub struct WatchTarget {
    pub label: String,
    pub recipe_path: PathBuf,
    /// The probe command, if any (its input files feed the key context).
    pub argv: Option<Vec<String>>,
    build: BuildInputs,
}

pub struct Workspace {
    db: WatchDb,
    executed: Arc<Mutex<Vec<DatabaseKeyIndex>>>,
    files: BTreeMap<PathBuf, SourceText>,
    targets: Vec<WatchTarget>,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

fn read(path: &Path) -> String {
    // A file that vanished mid-save reads as empty: the recipe then fails to parse and watch
    // mode reports it, until the editor writes it back.
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Absolute, symlinks resolved where possible: the form notify reports paths in.
pub fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map(|d| d.join(name)).unwrap_or(abs),
        _ => abs,
    }
}

impl Workspace {
    pub fn new() -> Self {
        let executed: Arc<Mutex<Vec<DatabaseKeyIndex>>> = Arc::default();
        let log = executed.clone();
        let callback: Box<dyn Fn(salsa::Event) + Send + Sync + 'static> = Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind {
                if let Ok(mut v) = log.lock() {
                    v.push(database_key);
                }
            }
        });
        Workspace { db: WatchDb { storage: salsa::Storage::new(Some(callback)) }, executed, files: BTreeMap::new(), targets: Vec::new() }
    }

    fn source(&mut self, path: &Path) -> SourceText {
        let path = normalize(path);
        if let Some(s) = self.files.get(&path) {
            return *s;
        }
        let s = SourceText::new(&self.db, path.clone(), read(&path));
        self.files.insert(path, s);
        s
    }

    /// Adds a target: its recipe, the project registry beside it (if any) and its sidecars.
    pub fn add_target(&mut self, label: &str, recipe_path: &Path, sidecars: &[PathBuf], argv: Option<Vec<String>>, ctx: KeyContext) {
        let recipe_src = self.source(recipe_path);
        let project = aorta_registry::project_registry_for(recipe_path).map(|p| self.source(&p));
        let sidecars: Vec<SourceText> = sidecars.iter().map(|p| self.source(p)).collect();
        let build = BuildInputs::new(&self.db, recipe_src, project, sidecars, ctx);
        self.targets.push(WatchTarget { label: label.to_owned(), recipe_path: recipe_path.to_owned(), argv, build });
    }

    pub fn targets(&self) -> &[WatchTarget] {
        &self.targets
    }

    /// Every file whose text feeds a compile (absolute).
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(PathBuf::as_path)
    }

    /// Re-reads `changed` (any paths; unknown ones are ignored) and updates the inputs whose
    /// text differs. Returns the watched files that really changed.
    pub fn refresh(&mut self, changed: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for p in changed {
            let p = normalize(p);
            let Some(src) = self.files.get(&p).copied() else { continue };
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

    /// Replaces target `i`'s key context (argv input hashes, workload identities) if it differs.
    pub fn set_context(&mut self, i: usize, ctx: KeyContext) {
        let build = self.targets[i].build;
        if *build.context(&self.db) != ctx {
            build.set_context(&mut self.db).to(ctx);
        }
    }

    pub fn context(&self, i: usize) -> KeyContext {
        self.targets[i].build.context(&self.db).clone()
    }

    /// Target `i`'s recipe (memoized; re-parsed only when one of its files changed).
    pub fn recipe(&self, i: usize) -> Shared<Recipe> {
        recipe(&self.db, self.targets[i].build).clone()
    }

    /// Target `i`'s planned trials with their keys.
    pub fn trials(&self, i: usize) -> Result<Vec<PlannedTrial>, String> {
        trials(&self.db, self.targets[i].build).as_ref().clone()
    }

    /// Labels of the targets whose recipe query executed since the last call (salsa events).
    pub fn take_reparsed(&self) -> Vec<String> {
        let events = std::mem::take(&mut *self.executed.lock().unwrap_or_else(|p| p.into_inner()));
        let mut out = Vec::new();
        for key in events {
            if salsa::Database::ingredient_debug_name(&self.db, key.ingredient_index()) != "recipe" {
                continue;
            }
            for t in &self.targets {
                if t.build.as_id() == key.key_index() && !out.contains(&t.label) {
                    out.push(t.label.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECIPE: &str = "schema_version: 1\nmode: probe\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n";

    #[test]
    fn editing_one_recipe_reparses_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, RECIPE).unwrap();
        std::fs::write(&b, RECIPE).unwrap();
        let ctx = KeyContext { env_snapshot: "host".into(), argv: Some(vec!["true".into()]), ..Default::default() };
        let mut ws = Workspace::new();
        ws.add_target("a", &a, &[], None, ctx.clone());
        ws.add_target("b", &b, &[], None, ctx);
        let before: Vec<Vec<PlannedTrial>> = (0..2).map(|i| ws.trials(i).unwrap()).collect();
        assert_eq!(ws.take_reparsed(), ["a", "b"]);

        // Nothing changed on disk: nothing re-parses.
        assert!(ws.refresh(&[a.clone(), b.clone()]).is_empty());
        let _ = (ws.trials(0), ws.trials(1));
        assert!(ws.take_reparsed().is_empty());

        std::fs::write(&b, RECIPE.replace("cuda_launch_blocking", "cuda_device_max_connections_1")).unwrap();
        assert_eq!(ws.refresh(std::slice::from_ref(&b)), [normalize(&b)]);
        let after: Vec<Vec<PlannedTrial>> = (0..2).map(|i| ws.trials(i).unwrap()).collect();
        assert_eq!(ws.take_reparsed(), ["b"]);
        assert_eq!(before[0], after[0]);
        let changed: Vec<usize> = before[1].iter().zip(&after[1]).filter(|(x, y)| x.key != y.key).map(|(x, _)| x.cell).collect();
        assert_eq!(changed, [1, 1], "only the edited cell's trials get new keys");
    }
}
