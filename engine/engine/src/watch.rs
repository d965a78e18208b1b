//! Watch mode on the session's compile database: targets stay in the database across rounds;
//! a changed file sets only its input, so salsa re-parses only the recipes that read it, and a
//! round builds only the targets whose trial keys changed (the store then executes only the
//! changed trials).

use crate::compile::{normalize, Compiled, TargetId};
use crate::error::EngineError;
use crate::session::Session;
use aorta_graph::Key;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What a round found for one target.
pub enum Step<'a> {
    /// The target does not compile (bad input: report it and wait for the fix).
    Invalid { label: String, error: EngineError },
    /// The target's keys changed (or this is the first round): build it.
    Changed(&'a Compiled),
}

pub struct Watch<'s> {
    session: &'s Session,
    targets: Vec<TargetId>,
    /// Per target: the keys last built, and the command's input files.
    last: BTreeMap<usize, Vec<Key>>,
    inputs: BTreeMap<usize, Vec<PathBuf>>,
}

impl<'s> Watch<'s> {
    pub fn new(session: &'s Session, targets: Vec<TargetId>) -> Self {
        Watch {
            session,
            targets,
            last: BTreeMap::new(),
            inputs: BTreeMap::new(),
        }
    }

    /// Every file whose content feeds a key: recipes, registries, sidecars, command inputs.
    pub fn files(&self) -> BTreeSet<PathBuf> {
        let c = self
            .session
            .compiler
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        c.files
            .keys()
            .cloned()
            .chain(self.inputs.values().flatten().cloned())
            .collect()
    }

    /// Takes the changed paths (any; unrelated ones are ignored). Returns those that feed a
    /// key and really changed (a save that left the text as it was is not a change).
    pub fn refresh(&mut self, changed: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = self
            .session
            .compiler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refresh(changed);
        let inputs: BTreeSet<&PathBuf> = self.inputs.values().flatten().collect();
        out.extend(
            changed
                .iter()
                .map(|p| normalize(p))
                .filter(|p| inputs.contains(p)),
        );
        out.sort();
        out.dedup();
        out
    }

    /// Compiles every target (memoized) and hands those whose keys changed since their last
    /// build to `on`; `on` returns false to stop the round (Ctrl-C). Returns the labels of the
    /// targets whose recipe was re-parsed.
    pub fn round(&mut self, on: &mut dyn FnMut(Step) -> bool) -> Vec<String> {
        // A rebuilt workload executable gets a new identity: resolve them again.
        self.session.forget_workloads();
        for (i, id) in self.targets.clone().into_iter().enumerate() {
            let c = match self.session.compile(id) {
                Ok(c) => c,
                Err(error) => {
                    self.last.remove(&i);
                    let label = self.label(id);
                    if !on(Step::Invalid { label, error }) {
                        break;
                    }
                    continue;
                }
            };
            self.inputs.insert(i, c.input_files.clone());
            let keys: Vec<Key> = c.planned().iter().map(|p| p.key.clone()).collect();
            if self.last.get(&i) == Some(&keys) {
                continue; // same keys: nothing to do (e.g. a comment edit)
            }
            if !on(Step::Changed(&c)) {
                break;
            }
            self.last.insert(i, keys);
        }
        self.reparsed()
    }

    fn label(&self, id: TargetId) -> String {
        let c = self
            .session
            .compiler
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let t = &c.targets[id.0];
        t.spec
            .label
            .clone()
            .unwrap_or_else(|| t.spec.origin.display_name())
    }

    /// Labels of the targets whose recipe query executed since the last call.
    fn reparsed(&self) -> Vec<String> {
        let ids = {
            let c = self
                .session
                .compiler
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let executed = c.db.take_executed("recipe");
            c.targets
                .iter()
                .enumerate()
                .filter(|(_, t)| executed.contains(&t.build))
                .map(|(i, _)| TargetId(i))
                .collect::<Vec<_>>()
        };
        let mut out: Vec<String> = ids
            .into_iter()
            .filter(|id| self.targets.contains(id))
            .map(|id| self.label(id))
            .collect();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{RecipeOrigin, TargetSpec};
    use crate::session::SessionOptions;

    const RECIPE: &str = "schema_version: 1\nmode: probe\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n";

    #[test]
    fn editing_one_recipe_reparses_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, RECIPE).unwrap();
        std::fs::write(&b, RECIPE).unwrap();
        let snap = dir.path().join("env.json");
        std::fs::write(
            &snap,
            crate::environment::probe_machine(None, None, false).to_json_pretty(),
        )
        .unwrap();
        let session = Session::open(SessionOptions {
            env_snapshot: Some(snap),
            store: Some(dir.path().join("store")),
            ..Default::default()
        })
        .unwrap();
        let spec = |p: &std::path::Path, l: &str| TargetSpec {
            label: Some(l.into()),
            origin: RecipeOrigin::File {
                path: p.to_path_buf(),
                sidecars: Vec::new(),
                overlays: Default::default(),
            },
            argv: Some(vec!["true".into()]),
        };
        let ids = vec![
            session.add_target(spec(&a, "a")),
            session.add_target(spec(&b, "b")),
        ];
        let mut w = Watch::new(&session, ids);
        let mut built = Vec::new();
        let mut keys: BTreeMap<String, Vec<Key>> = BTreeMap::new();
        let mut record = |s: Step, built: &mut Vec<String>| {
            if let Step::Changed(c) = s {
                built.push(c.label.clone());
                keys.insert(
                    c.label.clone(),
                    c.planned().iter().map(|p| p.key.clone()).collect(),
                );
            }
            true
        };
        assert_eq!(w.round(&mut |s| record(s, &mut built)), ["a", "b"]);
        assert_eq!(built, ["a", "b"]);

        // Nothing changed on disk: nothing re-parses, nothing builds.
        assert!(w.refresh(&[a.clone(), b.clone()]).is_empty());
        built.clear();
        assert!(w.round(&mut |s| record(s, &mut built)).is_empty());
        assert!(built.is_empty());

        std::fs::write(
            &b,
            RECIPE.replace("cuda_launch_blocking", "cuda_device_max_connections_1"),
        )
        .unwrap();
        assert_eq!(w.refresh(std::slice::from_ref(&b)), [normalize(&b)]);
        assert_eq!(w.round(&mut |s| record(s, &mut built)), ["b"]);
        assert_eq!(built, ["b"], "only the edited target builds");
    }
}
