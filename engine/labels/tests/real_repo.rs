//! The repository's own `recipes/BUCK`, `rules/BUCK` and `rules/aorta.bzl` must evaluate.

use std::path::{Path, PathBuf};

use aorta_labels::{evaluate_package, find_workspace_root, resolve, LabelsErrorKind};

fn repo_root() -> PathBuf {
    let root = find_workspace_root(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(
        root.join(".buckconfig").is_file(),
        "the repo root is marked by .buckconfig: {}",
        root.display()
    );
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert_eq!(
        root.canonicalize().unwrap(),
        expected.canonicalize().unwrap()
    );
    root
}

#[test]
fn quickstart_resolves_to_recipes_quickstart_yaml() {
    let root = repo_root();
    let t = resolve(&root, "//recipes:quickstart").unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].label, "//recipes:quickstart");
    assert_eq!(t[0].recipe, root.join("recipes/quickstart.yaml"));
    assert_eq!(t[0].declared_in, Some(root.join("recipes/BUCK")));
}

#[test]
fn recipes_buck_declares_every_recipe_by_stem() {
    let root = repo_root();
    let bf = evaluate_package(&root, "recipes").unwrap().unwrap();
    for t in &bf.targets {
        assert_eq!(t.rule, "aorta_recipe");
        assert_eq!(t.attrs["recipe"], format!("{}.yaml", t.name));
    }
    let names: Vec<&str> = bf.targets.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "quickstart",
        "example-probe-smoke",
        "race_smoke",
        "ainic-gdr-flush-sdc",
        "ticket-1234",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let all = resolve(&root, "//recipes/...").unwrap();
    assert!(all.iter().any(|t| t.label == "//recipes:ticket-1234"));
}

#[test]
fn rules_buck_declares_the_aorta_tool() {
    let root = repo_root();
    let bf = evaluate_package(&root, "rules").unwrap().unwrap();
    assert_eq!(bf.targets.len(), 1);
    assert_eq!(
        (bf.targets[0].rule.as_str(), bf.targets[0].name.as_str()),
        ("aorta_tool", "aorta")
    );
    assert_eq!(bf.targets[0].attrs["binary"], "aorta");
    let e = resolve(&root, "//rules:aorta").unwrap_err();
    assert!(
        matches!(e.kind(), LabelsErrorKind::NotARecipe { .. }),
        "{e:?}"
    );
}
