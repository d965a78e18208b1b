//! The compile layer's promises: keys change exactly when a trial's inputs change, and salsa
//! re-runs only what an edit touched.
use aorta_graph::db::{dag, recipe, trials, PlannedTrial};
use aorta_graph::{BuildInputs, CompileDb, KeyContext, SourceText};
use salsa::Setter;
use std::collections::BTreeMap;
use std::path::PathBuf;

const RECIPE: &str = "schema_version: 1\nmode: probe\ntrials: 3\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n";

fn ctx() -> KeyContext {
    KeyContext {
        env_snapshot: "host".into(),
        argv: Some(vec!["true".into()]),
        ..Default::default()
    }
}

fn setup(text: &str) -> (CompileDb, BuildInputs, SourceText) {
    let db = CompileDb::default();
    let src = SourceText::new(&db, PathBuf::from("r.yaml"), text.to_string());
    let build = BuildInputs::new(
        &db,
        Some(src),
        None,
        Vec::new(),
        None,
        Default::default(),
        ctx(),
    );
    (db, build, src)
}

fn keys(db: &CompileDb, build: BuildInputs) -> BTreeMap<(String, u32), String> {
    let r = recipe(db, build).as_ref().clone().unwrap();
    let t: Vec<PlannedTrial> = trials(db, build).clone().unwrap().to_vec();
    t.into_iter()
        .map(|p| ((r.cells[p.cell].name.clone(), p.index), p.key.to_string()))
        .collect()
}

#[test]
fn comment_edit_keeps_every_key() {
    let (mut db, build, src) = setup(RECIPE);
    let before = keys(&db, build);
    let dag_before = dag(&db, build).clone();
    src.set_text(&mut db).to(format!("# a comment\n{RECIPE}"));
    assert_eq!(keys(&db, build), before);
    assert!(
        std::sync::Arc::ptr_eq(&dag_before, dag(&db, build)),
        "early cutoff: the DAG was not rebuilt"
    );
}

#[test]
fn changing_one_cells_mitigation_changes_only_that_cell() {
    let (mut db, build, src) = setup(RECIPE);
    let before = keys(&db, build);
    src.set_text(&mut db)
        .to(RECIPE.replace("cuda_launch_blocking", "cuda_device_max_connections_1"));
    let after = keys(&db, build);
    let kept: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k) == Some(*v))
        .map(|(k, _)| k.0.clone())
        .collect();
    assert_eq!(kept, ["none-none", "none-none", "none-none"]);
    assert_eq!(after.len(), 6);
}

#[test]
fn raising_trials_adds_only_new_indices() {
    let (mut db, build, src) = setup(RECIPE);
    let before = keys(&db, build);
    src.set_text(&mut db)
        .to(RECIPE.replace("trials: 3", "trials: 5"));
    let after = keys(&db, build);
    for (k, v) in &before {
        assert_eq!(after.get(k), Some(v), "{k:?} must be reused");
    }
    let new: Vec<u32> = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .map(|k| k.1)
        .collect();
    assert_eq!(new, [3, 4, 3, 4]);
}

#[test]
fn changing_the_command_changes_every_key() {
    let (mut db, build, _) = setup(RECIPE);
    let before = keys(&db, build);
    build.set_context(&mut db).to(KeyContext {
        argv: Some(vec!["false".into()]),
        ..ctx()
    });
    let after = keys(&db, build);
    assert!(before.iter().all(|(k, v)| after[k] != *v));
}

#[test]
fn registry_value_change_invalidates_users_of_that_mitigation() {
    let side = r#"{"version": 1, "mitigations": {"my_knob": {"MY_KNOB": "1"}}}"#;
    let db0 = CompileDb::default();
    let mut db = db0;
    let src = SourceText::new(
        &db,
        PathBuf::from("r.yaml"),
        RECIPE.replace("cuda_launch_blocking", "my_knob"),
    );
    let sidecar = SourceText::new(&db, PathBuf::from("side.json"), side.to_string());
    let build = BuildInputs::new(
        &db,
        Some(src),
        None,
        vec![sidecar],
        None,
        Default::default(),
        ctx(),
    );
    let before = keys(&db, build);
    sidecar.set_text(&mut db).to(side.replace("\"1\"", "\"2\""));
    let after = keys(&db, build);
    for (k, v) in &before {
        assert_eq!(after[k] == *v, k.0 == "none-none", "{k:?}");
    }
}

#[test]
fn equal_envs_share_trials_in_the_dag() {
    // `none` and `tf32_off`+... differ; two diagnostics that set nothing collapse.
    let text = "schema_version: 1\nmode: probe\ntrials: 2\nmitigation_axis: [none]\ndiagnostic_axis: [none, pytorch_no_cuda_memory_caching]\n";
    let (db, build, _) = setup(text);
    let d = dag(&db, build).as_ref().clone().unwrap();
    assert_eq!(d.unique_trials(), 4);
    // Every node is ordered after what it depends on: env → trials → cells → artifacts.
    let order = d.topological();
    assert_eq!(order.len(), d.graph.node_count());
    let pos = |n| order.iter().position(|x| *x == n).unwrap();
    for e in d.graph.raw_edges() {
        assert!(pos(e.source()) < pos(e.target()));
    }
    assert_eq!(d.cell_trials(0).len(), 2);
    assert_eq!(d.artifact_cells(&aorta_graph::Artifact::MatrixJson), [0, 1]);
    assert!(d
        .artifact_cells(&aorta_graph::Artifact::ResolvedRecipe)
        .is_empty());
}

#[test]
fn bad_recipe_is_an_error_not_a_panic() {
    let (db, build, _) = setup("schema_version: 2\n");
    assert!(recipe(&db, build).is_err());
    assert!(trials(&db, build).is_err());
    assert!(dag(&db, build).is_none());
}

/// Keys are shared through caches across machines and versions: the same recipe and context
/// must give the same key in every aorta build. A change here is a change of every stored key
/// (raise `KEY_SCHEMA_VERSION` deliberately, then update this value). The classifier's pattern
/// library version is in a probe key: library 4 (issue 36's kernel wordings) changed it.
#[test]
fn a_probe_key_is_pinned_across_releases() {
    let (db, build, _) = setup(RECIPE);
    let k = keys(&db, build);
    assert_eq!(
        k[&("none-none".to_string(), 0)],
        "7b6077b994df2b68c26f8ef1fce4aa0b82f41adfbcc76a62a3e16566be29fde2"
    );
}

#[test]
fn every_classifier_setting_is_in_the_probe_key() {
    let base = {
        let (db, build, _) = setup(RECIPE);
        keys(&db, build)[&("none-none".to_string(), 0)].clone()
    };
    let edits = [
        "timeout_per_trial: 30\n",
        "env_passthrough_mode: file\n",
        "hang_window_sec: 12\n",
        "hang_grace_period_at_start: 5\n",
        "tier3_vram_growth: false\n",
        "disable_detectors: [tier3:thermal_throttle]\n",
        "step_time_regex: 'step (\\d+)'\n",
        "collect_paths: ['*.log']\n",
        "custom_patterns:\n  - id: mine\n    match: {regex: 'MINE'}\n    on_match: fail\n",
    ];
    for edit in edits {
        let (db, build, _) = setup(&format!("{RECIPE}{edit}"));
        if let Err(e) = recipe(&db, build).as_ref() {
            panic!("{edit}: {e:?}");
        }
        let k = keys(&db, build);
        assert_ne!(k[&("none-none".to_string(), 0)], base, "{edit}");
    }
    // What changes only what is kept or how it is summarised is not in it.
    let (db, build, _) = setup(&format!(
        "{RECIPE}ticket: T-2\nconfound: {{baseline_cell: none-none, threshold: 1.3}}\n"
    ));
    assert_eq!(keys(&db, build)[&("none-none".to_string(), 0)], base);
}
