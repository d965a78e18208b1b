//! The engine's promises, end to end through the real binary: every entry point computes the
//! same trial keys (`--dry-run --json`, `explain`, the stored records), a second build executes
//! and renders nothing, `explain` answers for trials, cells and artifacts, exit codes follow
//! the error's category, and the CLI reaches the store, remote and probe only through the engine.
mod common;

use common::repo_root;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn aorta<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        assert_cmd::Command::cargo_bin("aorta")
            .unwrap()
            .current_dir(repo_root())
            .env("NO_COLOR", "1")
            .env("AORTA_TIMING", "1")
            // Every workload the shipped recipes name is played by the pyecho fixture (a real
            // executable speaking the workload protocol), so workload recipes build without a GPU.
            .env(
                "AORTA_WORKLOAD_PATH",
                repo_root().join("engine/cli/tests/fixtures/stand-in-workloads"),
            )
            .env(
                "AORTA_ENV_SNAPSHOT",
                repo_root().join("docs/examples/h200-env.json"),
            )
            .env_remove("AORTA_STORE")
            .env_remove("AORTA_REMOTE_CACHE")
            .args(args)
            .output()
            .unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `(cell, trial index) → key` from a dry run's JSON plan.
fn planned_keys(plan: &Value) -> BTreeMap<(String, u32), String> {
    let mut out = BTreeMap::new();
    for cell in plan["cells"].as_array().unwrap() {
        let name = cell["name"].as_str().unwrap().to_string();
        for (i, k) in cell["key_inputs"]["trial_keys"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            out.insert((name.clone(), i as u32), k.as_str().unwrap().to_string());
        }
    }
    out
}

/// `(cell, trial index) → key` from every result.json of a run directory tree.
fn stored_keys(dir: &Path) -> BTreeMap<(String, u32), String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "result.json") {
                let r: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                out.insert(
                    (
                        r["cell_name"].as_str().unwrap().to_string(),
                        r["trial_index"].as_u64().unwrap() as u32,
                    ),
                    r["key"].as_str().unwrap().to_string(),
                );
            }
        }
    }
    out
}

fn explain_key(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("key:").map(|k| k.trim().to_string()))
        .unwrap_or_default()
}

fn recipes() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo_root().join("recipes"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v.push(repo_root().join("engine/cli/tests/fixtures/pyecho-matrix.yaml"));
    v
}

#[test]
fn every_entry_point_gives_the_same_keys_and_a_rebuild_does_nothing() {
    let env = Env::new();
    let store = env.store();
    let store = store.to_str().unwrap();
    let command = ["--", "sh", "-c", "echo step_time_ms=1"];
    let mut checked = 0;
    for (n, recipe) in recipes().iter().enumerate() {
        let path = recipe
            .strip_prefix(repo_root())
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let probe = std::fs::read_to_string(recipe)
            .unwrap()
            .contains("mode: probe");
        fn with(probe: bool, command: &[&'static str], mut args: Vec<String>) -> Vec<String> {
            if probe {
                args.extend(command.iter().map(|s| s.to_string()));
            }
            args
        }
        let with_cmd = |args: Vec<&str>| {
            with(
                probe,
                &command,
                args.into_iter().map(str::to_string).collect(),
            )
        };
        let out_dir = env.dir.path().join(format!("out{n}"));
        let out_dir = out_dir.to_str().unwrap();
        let plan = env.aorta(&with_cmd(vec![
            "build",
            &path,
            "--dry-run",
            "--json",
            "--store",
            store,
        ]));
        assert_eq!(plan.status.code(), Some(0), "{path}: {}", text(&plan));
        let planned = planned_keys(&serde_json::from_slice(&plan.stdout).unwrap());

        let first = env.aorta(&with_cmd(vec![
            "build", &path, "--store", store, "--output", out_dir, "-j", "4",
        ]));
        assert!(
            matches!(first.status.code(), Some(0 | 1)),
            "{path}: {}",
            text(&first)
        );
        let stored = stored_keys(Path::new(out_dir));
        assert!(!stored.is_empty(), "{path}: no trial ran: {}", text(&first));
        for (trial, key) in &stored {
            assert_eq!(
                planned.get(trial),
                Some(key),
                "{path}: {trial:?}: the stored key differs from the dry run's"
            );
        }

        // explain: the first trial of every cell, with its store status.
        let cells: std::collections::BTreeSet<&String> = stored.keys().map(|(c, _)| c).collect();
        for cell in cells {
            let e = env.aorta(&with_cmd(vec![
                "explain", &path, "--cell", cell, "--trial", "0", "--store", store,
            ]));
            assert_eq!(e.status.code(), Some(0), "{path}: {}", text(&e));
            assert_eq!(
                explain_key(&e),
                planned[&(cell.clone(), 0)],
                "{path}: explain's key for {cell}"
            );
            assert!(
                String::from_utf8_lossy(&e.stdout).contains("store:   cached"),
                "{path} {cell}: {}",
                text(&e)
            );
        }

        let second = env.aorta(&with_cmd(vec![
            "build", &path, "--store", store, "--output", out_dir, "-j", "4",
        ]));
        assert_eq!(
            second.status.code(),
            first.status.code(),
            "{path}: {}",
            text(&second)
        );
        let (so, se) = (
            String::from_utf8_lossy(&second.stdout),
            String::from_utf8_lossy(&second.stderr),
        );
        assert!(
            so.contains("Trials: 0 executed"),
            "{path}: the rebuild executed trials: {}",
            text(&second)
        );
        assert!(
            se.contains("artifacts: 0 rendered"),
            "{path}: the rebuild rendered artifacts: {}",
            text(&second)
        );
        checked += 1;
    }
    assert!(checked >= 20, "every shipped recipe is covered ({checked})");
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

const PROBE: &str = "schema_version: 1\nmode: probe\nticket: explain-test\ntrials: 2\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n";

#[test]
fn explain_answers_for_a_trial_a_cell_and_an_artifact() {
    let env = Env::new();
    let r = write(env.dir.path(), "r.yaml", PROBE);
    let r = r.to_str().unwrap();
    let store = env.store();
    let store = store.to_str().unwrap();
    let out = env.dir.path().join("out");
    let ask = |node: &[&str]| {
        let mut args = vec!["explain", r, "--store", store];
        args.extend(node);
        args.extend(["--", "true"]);
        let o = env.aorta(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let trial = ["--cell", "none-none", "--trial", "1"];
    let cell = ["--cell", "none-none"];
    let artifact = ["--artifact", "matrix.json"];
    assert!(
        ask(&trial).contains("not cached: no store yet"),
        "{}",
        ask(&trial)
    );
    assert!(
        ask(&cell).contains("not cached: 2 trial(s) not cached"),
        "{}",
        ask(&cell)
    );
    let before = ask(&artifact);
    assert!(
        before.contains("(known once its inputs have run)")
            && before.contains("the next build renders it"),
        "{before}"
    );
    assert!(
        ask(&["--artifact", "recipe.resolved.yaml"]).contains("key:     "),
        "the resolved recipe's key is known before any trial runs"
    );

    let b = env.aorta(&[
        "build",
        r,
        "--store",
        store,
        "--output",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(b.status.code(), Some(0), "{}", text(&b));
    assert!(
        ask(&trial).contains("store:   cached (executed "),
        "{}",
        ask(&trial)
    );
    assert!(
        ask(&cell).contains("store:   cached (all 2 trial(s) it folds are cached"),
        "{}",
        ask(&cell)
    );
    let after = ask(&artifact);
    assert!(
        after.contains("store:   cached (rendered ")
            && after.contains("restores it without rendering"),
        "{after}"
    );
    let index: BTreeMap<String, String> = serde_json::from_slice(
        &std::fs::read(out.join("explain-test/.aorta-materialized.json")).unwrap(),
    )
    .unwrap();
    let key = after
        .lines()
        .find_map(|l| l.strip_prefix("key:"))
        .unwrap()
        .trim();
    assert_eq!(
        index["matrix.json"], key,
        "explain's artifact key is the key the build placed"
    );

    // --store is honoured: another store has none of it.
    let other = env.dir.path().join("other");
    let o = env.aorta(&[
        "explain",
        r,
        "--cell",
        "none-none",
        "--trial",
        "1",
        "--store",
        other.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("not cached"),
        "{}",
        text(&o)
    );
    // Unknown nodes are usage errors with the choices.
    let o = env.aorta(&[
        "explain",
        r,
        "--artifact",
        "environments/nope/env.json",
        "--store",
        store,
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // (miette may wrap the list of choices anywhere.)
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .split_whitespace()
            .collect::<String>()
            .contains("environments/local/env.json"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_rebuild_on_a_freshly_probed_machine_renders_nothing() {
    // A fresh probe differs in its capture time; env.json is keyed by what the keys used.
    let env = Env::new();
    let r = write(env.dir.path(), "r.yaml", PROBE);
    let (store, out) = (env.store(), env.dir.path().join("out"));
    let build = || {
        let o = assert_cmd::Command::cargo_bin("aorta")
            .unwrap()
            .env("AORTA_TIMING", "1")
            .env_remove("AORTA_ENV_SNAPSHOT")
            .env("AORTA_PROBE_CACHE", env.dir.path().join("probe-cache"))
            .args(build_true(&r, &store, &out))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(build().contains("artifacts: 5 rendered"));
    let second = build();
    assert!(
        second.contains("artifacts: 0 rendered, 0 restored from the store, 5 unchanged"),
        "{second}"
    );
}

/// `aorta build RECIPE --store STORE --output OUT -- true`.
fn build_true(recipe: &Path, store: &Path, out: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec!["build".into(), recipe.into()];
    args.extend([
        "--store".into(),
        store.into(),
        "--output".into(),
        out.into(),
    ]);
    args.extend(["--".into(), "true".into()]);
    args
}

#[test]
fn timing_marks_a_builds_head_and_tail_in_order() {
    // AORTA_TIMING is how a build's head and tail are profiled (docs/benchmarks.md): each line
    // ends with the milliseconds since main, and the points come in the order they happen.
    let env = Env::new();
    let r = write(env.dir.path(), "r.yaml", PROBE);
    let store = env.store();
    let out = env.dir.path().join("out");
    let o = env.aorta(&build_true(&r, &store, &out));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let points: Vec<(&str, f64)> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("aorta timing: "))
        .filter_map(|l| {
            let (what, at) = l.rsplit_once(" (at ")?;
            Some((what, at.strip_suffix(" ms)")?.parse().ok()?))
        })
        .collect();
    let names: Vec<&str> = points
        .iter()
        .map(|(w, _)| w.split(':').next().unwrap())
        .collect();
    let expected = [
        "arguments parsed",
        "session open",
        "env snapshot",
        "compile (recipe, environment, keys, DAG)",
        "store open, writable and locked",
        "run directory made",
        "trial lookups prefetched",
        "the first trial starting",
        "schedule (lookups + execution)",
        "traced inputs",
        "materialise",
        "cells and artifacts",
        "sync",
        "containment shut down, exiting",
    ];
    assert_eq!(names, expected, "{stderr}");
    assert!(
        points.windows(2).all(|w| w[0].1 <= w[1].1),
        "offsets go back in time: {stderr}"
    );
}

#[test]
fn exit_codes_follow_the_error_category() {
    let env = Env::new();
    let d = env.dir.path();
    let out = d.join("out");
    let out = out.to_str().unwrap();
    let store = env.store();
    let store = store.to_str().unwrap();
    // 2: bad input.
    let bad = write(d, "bad.yaml", "schema_version: 1\nmode: probe\ntrials: 0\n");
    assert_eq!(
        env.aorta(&[
            "build",
            bad.to_str().unwrap(),
            "--store",
            store,
            "--",
            "true"
        ])
        .status
        .code(),
        Some(2)
    );
    // 3: the store cannot be opened (its root is a regular file).
    let file = write(d, "not-a-dir", "x");
    let r = write(d, "r.yaml", PROBE);
    let r = r.to_str().unwrap();
    let o = env.aorta(&[
        "build",
        r,
        "--store",
        file.to_str().unwrap(),
        "--output",
        out,
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot open the store"),
        "{}",
        text(&o)
    );
    // 3: an unreadable environment snapshot.
    let o = env.aorta(&[
        "build",
        r,
        "--store",
        store,
        "--output",
        out,
        "--env-snapshot",
        d.join("missing.json").to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // 3: a workload that cannot start (the matrix is still written, the cell says why).
    let w = write(d, "w.yaml", "schema_version: 1\nworkload: no_such_workload\ntrials: 1\nsteps: 1\ncells:\n  - {name: base, mitigations: [none], environment: local}\n");
    let o = env.aorta(&[
        "build",
        w.to_str().unwrap(),
        "--store",
        store,
        "--output",
        out,
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("cell base could not run: workload 'no_such_workload' not found"),
        "{}",
        text(&o)
    );
    // 0 and --strict: every trial errors (a timeout), which AORTA reports with exit 0.
    let t = write(d, "t.yaml", "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\ntimeout_per_trial: 0.2\n");
    let t = t.to_str().unwrap();
    let o = env.aorta(&[
        "build", t, "--store", store, "--output", out, "--", "sleep", "5",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = env.aorta(&[
        "build", t, "--store", store, "--output", out, "--strict", "--", "sleep", "5",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("--strict: 1 cell(s) errored or ran no trial: none-none"),
        "{}",
        text(&o)
    );
    // --strict passes a build whose cells all ran and judged.
    let o = env.aorta(&[
        "build", r, "--store", store, "--output", out, "--strict", "--", "true",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Architecture invariant: only the engine opens the store, the remote tier or the snapshot.
#[test]
fn the_cli_reaches_store_remote_and_probe_only_through_the_engine() {
    let manifest = std::fs::read_to_string(repo_root().join("engine/cli/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for forbidden in [
        "aorta-store",
        "aorta-remote",
        "aorta-probe",
        "aorta-graph",
        "aorta-exec",
    ] {
        assert!(
            !deps.contains(forbidden),
            "engine/cli depends on {forbidden}: open it through aorta-engine's Session instead"
        );
    }
    // …and neither it nor the engine links libtorch or CUDA: GPU code lives in workload executables.
    for crate_dir in ["engine/cli", "engine/engine"] {
        let m = std::fs::read_to_string(repo_root().join(crate_dir).join("Cargo.toml")).unwrap();
        for gpu in [
            "tch",
            "torch-sys",
            "cudarc",
            "aorta-torch-workloads",
            "aorta-race",
            "aorta-hw-queue",
        ] {
            assert!(
                !m.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{gpu} "))
                        || l.trim_start().starts_with(&format!("{gpu}."))),
                "{crate_dir} depends on {gpu}"
            );
        }
    }
    let mut stack = vec![repo_root().join("engine/cli/src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            for needle in [
                "LocalStore::open",
                "RemoteCache",
                "aorta_remote::open",
                "Snapshot::from_json",
                "aorta_probe::probe",
                "trial_inputs(",
            ] {
                assert!(
                    !src.contains(needle),
                    "{} uses {needle}: that belongs to the engine",
                    p.display()
                );
            }
        }
    }
}

/// One route in: a recipe reaches the engine as an input of its compile database — a file with
/// its sidecars and command-line overlays, or a request the command line describes (flag
/// mode, `aorta run`, an agent look): `RecipeOrigin`. Only the database's `recipe` query
/// (engine/graph/src/db.rs) parses one; no other library or CLI module loads, parses or
/// assembles recipe JSON (the recipe crate itself, tests and examples aside).
#[test]
fn only_the_compile_database_loads_or_parses_a_recipe() {
    let mut offenders = Vec::new();
    for top in ["engine", "workloads"] {
        for krate in std::fs::read_dir(repo_root().join(top)).unwrap().flatten() {
            if krate.file_name() == "recipe" {
                continue;
            }
            let mut stack = vec![krate.path().join("src")];
            while let Some(dir) = stack.pop() {
                for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                    let path = e.path();
                    if path.is_dir() {
                        stack.push(path);
                        continue;
                    }
                    if path.extension().is_none_or(|x| x != "rs")
                        || path.ends_with("engine/graph/src/db.rs")
                    {
                        continue;
                    }
                    let code = code_of(&std::fs::read_to_string(&path).unwrap());
                    let builds_json =
                        code.contains("json!(") && code.contains("\"schema_version\"");
                    if code.contains("load_recipe(")
                        || code.contains("parse_recipe(")
                        || builds_json
                    {
                        offenders.push(
                            path.strip_prefix(repo_root())
                                .unwrap()
                                .display()
                                .to_string(),
                        );
                    }
                }
            }
        }
    }
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "{offenders:?} load, parse or assemble a recipe themselves: give the engine a RecipeOrigin (a File with Overlays, or a RecipeRequest) instead"
    );
}

/// Within each crate under engine/ and workloads/, modules import each other in one direction
/// only: a loop of `crate::` or `super::` paths (a.rs uses crate::b, b.rs uses crate::a) is two
/// modules that are one concept, or a shared piece that belongs below both. The crate root
/// (lib.rs, main.rs) is the façade and not counted; test modules are not counted.
#[test]
fn no_crate_has_a_module_import_loop() {
    let mut crates: Vec<PathBuf> = ["engine", "workloads"]
        .iter()
        .flat_map(|top| std::fs::read_dir(repo_root().join(top)).unwrap().flatten())
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() > 12, "found the crates: {crates:?}");
    for src in crates {
        let graph = module_imports(&src);
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "{}: modules import each other in a loop: {}",
                src.display(),
                cycle.join(" -> ")
            );
        }
    }
}

/// A source file's code: before its test module, without comment lines.
fn code_of(text: &str) -> String {
    text.split("#[cfg(test)]")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module file (relative to `src`) → the module files its `crate::` and `super::` paths name.
fn module_imports(src: &Path) -> BTreeMap<String, Vec<String>> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "bin") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let rel = |p: &Path| p.strip_prefix(src).unwrap().to_string_lossy().into_owned();
    let module_file = |segments: &[&str]| -> Option<String> {
        // The longest prefix of the path that is a module file: crate::a::b::Name → a/b.rs,
        // a/b/mod.rs, a.rs or a/mod.rs.
        (1..=segments.len()).rev().find_map(|n| {
            let base = segments[..n].join("/");
            [format!("{base}.rs"), format!("{base}/mod.rs")]
                .into_iter()
                .find(|f| src.join(f).is_file())
        })
    };
    let path_re =
        fancy_regex::Regex::new(r"crate::((?:[a-z_][a-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let group_re =
        fancy_regex::Regex::new(r"use crate::((?:[a-z_][a-z0-9_]*::)*)\{([^}]*)\}").unwrap();
    let mut graph = BTreeMap::new();
    for f in files {
        let me = rel(&f);
        if me == "lib.rs" || me == "main.rs" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        // `super::x` in a/b.rs (or a/b/mod.rs) is `crate::a::x`.
        let module: Vec<&str> = me
            .trim_end_matches(".rs")
            .trim_end_matches("/mod")
            .split('/')
            .collect();
        let parent = module[..module.len() - 1].join("::");
        let code = code.replace(
            "super::",
            &if parent.is_empty() {
                "crate::".to_string()
            } else {
                format!("crate::{parent}::")
            },
        );
        let mut paths: Vec<String> = path_re
            .captures_iter(&code)
            .map(|c| c.unwrap().get(1).unwrap().as_str().to_string())
            .collect();
        // `use crate::a::{b, c::D}`: each member is a path of its own.
        for c in group_re.captures_iter(&code) {
            let c = c.unwrap();
            let (prefix, members) = (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str());
            for member in members.split(',') {
                let member = member.trim().split(" as ").next().unwrap_or("");
                if !member.is_empty() && member != "self" {
                    paths.push(format!("{prefix}{member}"));
                }
            }
        }
        let mut targets: Vec<String> = paths
            .iter()
            .filter_map(|p| module_file(&p.split("::").collect::<Vec<_>>()))
            .filter(|t| *t != me && t != "lib.rs" && t != "main.rs")
            .collect();
        targets.sort();
        targets.dedup();
        graph.insert(me, targets);
    }
    graph
}

/// A loop in the graph, as the modules along it (first repeated at the end), if there is one.
fn find_cycle(graph: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, Vec<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == m).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}
