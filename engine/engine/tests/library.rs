//! The engine driven as a library, as the CLI drives it: open a [`Session`], add a target,
//! compile, build, and read the events and the outcome. These pin the scheduling policy
//! (`schedule.rs`) through the public API with the local executor: a rebuild reuses
//! everything, `stop_after` ends a cell at its deciding trial, an error is stored but run
//! again, and a key shared by two cells runs once.

use aorta_engine::{Event, RecipeOrigin, Session, SessionOptions, TargetSpec};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A session on a fresh store in `dir`, keyed by a recorded snapshot (no probe), untraced.
fn session(dir: &Path) -> Session {
    Session::open(SessionOptions {
        store: Some(dir.join("store")),
        env_snapshot: Some(repo_root().join("docs/examples/h200-env.json")),
        output: Some(dir.join("out")),
        jobs: Some(2),
        ..SessionOptions::default()
    })
    .unwrap()
}

/// What one build did: (executed, reused, stale) events, and the outcome's counts.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    executed: Vec<(String, u32)>,
    reused: Vec<(String, u32)>,
    stale: Vec<(String, u32)>,
}

fn build(dir: &Path, recipe: &str, argv: &[&str]) -> (Seen, aorta_engine::BuildOutcome) {
    let path = dir.join("r.yaml");
    std::fs::write(&path, recipe).unwrap();
    let s = session(dir);
    let id = s.add_target(TargetSpec {
        label: None,
        origin: RecipeOrigin::File {
            path,
            sidecars: Vec::new(),
            overlays: Default::default(),
        },
        argv: Some(argv.iter().map(|a| a.to_string()).collect()),
    });
    let c = s.compile(id).unwrap();
    let mut seen = Seen::default();
    let outcome = s
        .build(&c, &mut |e| match e {
            Event::Executed(t) => seen.executed.push((t.record.cell_name.clone(), t.index)),
            Event::Reused(t) => seen.reused.push((t.record.cell_name.clone(), t.index)),
            Event::Stale { cell, index, .. } => seen.stale.push((cell.to_owned(), index)),
            _ => {}
        })
        .unwrap();
    for v in [&mut seen.executed, &mut seen.reused, &mut seen.stale] {
        v.sort();
    }
    (seen, outcome)
}

fn recipe(trials: u32, mitigations: &str, extra: &str) -> String {
    format!(
        "schema_version: 1\nmode: probe\nticket: LIB\ntrials: {trials}\n\
         mitigation_axis: [{mitigations}]\ndiagnostic_axis: [none]\n{extra}"
    )
}

fn cells(names: &[&str], trials: u32) -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = names
        .iter()
        .flat_map(|n| (0..trials).map(move |i| (n.to_string(), i)))
        .collect();
    v.sort();
    v
}

#[test]
fn a_rebuild_reuses_every_trial() {
    let d = tempfile::tempdir().unwrap();
    let r = recipe(3, "none, tf32_off", "");
    let (first, out) = build(d.path(), &r, &["true"]);
    let all = cells(&["none-none", "tf32_off-none"], 3);
    assert_eq!(first.executed, all);
    assert_eq!((out.executed, out.reused), (6, 0));
    assert!(out.run_dir.join("none-none/trial_2/result.json").is_file());
    // Every trial and artifact in place: the cached fast path answers without a lookup per
    // trial (and so without per-trial events).
    let (again, out) = build(d.path(), &r, &["true"]);
    assert!(again.executed.is_empty(), "{again:?}");
    assert_eq!((out.executed, out.reused), (0, 6));
    // A new run directory needs each trial's stored result: reused, one event each.
    std::fs::remove_dir_all(&out.run_dir).unwrap();
    let (third, out) = build(d.path(), &r, &["true"]);
    assert_eq!(third.reused, all);
    assert_eq!((out.executed, out.reused), (0, 6));
}

#[test]
fn stop_after_ends_a_cell_at_its_deciding_trial() {
    let d = tempfile::tempdir().unwrap();
    let r = recipe(
        4,
        "none",
        "stop_after: {events: 2, max_trials: 4, event_verdict: fail}\n",
    );
    let (first, out) = build(d.path(), &r, &["sh", "-c", "exit 1"]);
    assert_eq!(first.executed, cells(&["none-none"], 2));
    assert_eq!((out.executed, out.reused), (2, 0));
    assert!(!out.run_dir.join("none-none/trial_2").exists());
    let (again, _) = build(d.path(), &r, &["sh", "-c", "exit 1"]);
    assert_eq!(again.reused, cells(&["none-none"], 2));
}

#[test]
fn an_error_is_stored_but_run_again() {
    let d = tempfile::tempdir().unwrap();
    let r = recipe(2, "none", "");
    let missing = ["/nonexistent/aorta-library-test-tool"];
    let (first, _) = build(d.path(), &r, &missing);
    assert_eq!(first.executed, cells(&["none-none"], 2));
    let (again, out) = build(d.path(), &r, &missing);
    assert_eq!(again.stale, cells(&["none-none"], 2), "said why");
    assert_eq!(again.executed, cells(&["none-none"], 2), "run again");
    assert_eq!((out.executed, out.reused), (2, 0));
}

/// Two cells whose trials resolve to the same inputs (two mitigations that set the same
/// variable to the same value) share their keys: each key runs once, and the second cell
/// reuses the first's result under its own name.
#[test]
fn a_key_shared_by_two_cells_runs_once() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("aorta-registry.json"),
        r#"{"version": 1, "mitigations": {"knob_a": {"AORTA_LIB_KNOB": "1"}, "knob_b": {"AORTA_LIB_KNOB": "1"}}}"#,
    )
    .unwrap();
    let r = recipe(2, "knob_a, knob_b", "");
    let (first, out) = build(d.path(), &r, &["true"]);
    assert_eq!((out.executed, out.reused), (2, 2), "{first:?}");
    assert_eq!(first.executed, cells(&["knob_a-none"], 2));
    assert_eq!(first.reused, cells(&["knob_b-none"], 2));
    let record =
        std::fs::read_to_string(out.run_dir.join("knob_b-none/trial_1/result.json")).unwrap();
    assert!(
        record.contains("\"cell_name\": \"knob_b-none\""),
        "{record}"
    );
}
