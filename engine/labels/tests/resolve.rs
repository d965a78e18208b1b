//! Resolution against temporary workspaces: BUCK targets, yaml fallback and `...` recursion.

mod common;

use aorta_labels::{find_workspace_root, LabelsErrorKind};
use common::{Ws, LOAD};

#[test]
fn buck_target_resolves_without_the_recipe_file_existing() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        &format!(
            "{LOAD}aorta_recipe(\n    name = \"ticket-1234\",\n    recipe = \"./t/ticket.yaml\",\n    mitigations_files = [\"m1.yaml\", \"m2.yaml\"],\n    labels = [\"gpu\", \"nightly\"],\n)\n"
        ),
    );
    let t = ws.one("//recipes:ticket-1234");
    assert_eq!(t.label, "//recipes:ticket-1234");
    assert_eq!(t.recipe, ws.path("recipes/t/ticket.yaml"));
    assert_eq!(
        t.mitigations_files,
        [ws.path("recipes/m1.yaml"), ws.path("recipes/m2.yaml")]
    );
    assert_eq!(t.labels, ["gpu", "nightly"]);
    assert_eq!(t.declared_in, Some(ws.path("recipes/BUCK")));
}

#[test]
fn short_label_uses_last_component_as_target() {
    let ws = Ws::new();
    ws.write(
        "recipes/sub/BUCK",
        &format!("{LOAD}aorta_recipe(name = \"sub\", recipe = \"main.yaml\")\n"),
    );
    let t = ws.one("//recipes/sub");
    assert_eq!(t.label, "//recipes/sub:sub");
    assert_eq!(t.recipe, ws.path("recipes/sub/main.yaml"));
}

#[test]
fn falls_back_to_recipe_files() {
    let ws = Ws::new();
    // No BUCK at all.
    ws.write("plain/a.yaml", "")
        .write("plain/b.yml", "")
        .write("plain/c.json", "{}");
    for (label, file) in [
        ("//plain:a", "plain/a.yaml"),
        ("//plain:b", "plain/b.yml"),
        ("//plain:c", "plain/c.json"),
        ("//plain:a.yaml", "plain/a.yaml"),
    ] {
        let t = ws.one(label);
        assert_eq!(
            (t.label.as_str(), t.recipe.clone(), t.declared_in.clone()),
            (label, ws.path(file), None)
        );
    }
    // A BUCK file that does not declare the target: the file still wins over an error.
    ws.write(
        "recipes/BUCK",
        &format!("{LOAD}aorta_recipe(name = \"x\", recipe = \"x.yaml\")\n"),
    )
    .write("recipes/extra.yaml", "");
    let t = ws.one("//recipes:extra");
    assert_eq!(
        (t.recipe, t.declared_in),
        (ws.path("recipes/extra.yaml"), None)
    );
    // `.yaml` is preferred over `.yml`.
    ws.write("plain/a.yml", "");
    assert_eq!(ws.one("//plain:a").recipe, ws.path("plain/a.yaml"));
}

#[test]
fn recursive_lists_targets_and_untargeted_yaml_deterministically() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        &format!(
            "{LOAD}aorta_recipe(name = \"zeta\", recipe = \"z.yaml\", mitigations_files = [\"mit.yaml\"])\n\
             aorta_recipe(name = \"alpha\", recipe = \"a.yaml\")\n\
             aorta_recipe(name = \"dup\", recipe = \"other.yaml\")\n"
        ),
    )
    .write("recipes/z.yaml", "")
    .write("recipes/mit.yaml", "") // referenced as mitigations: not a recipe
    .write("recipes/loose.yaml", "")
    .write("recipes/dup.yaml", "") // stem collides with target `dup`
    .write("recipes/notes.txt", "")
    .write("recipes/data.json", "{}") // JSON is only used when named explicitly
    .write("recipes/sub/deep/c.yml", "")
    .write("recipes/.hidden/h.yaml", "")
    .write("recipes/target/t.yaml", "")
    .write("elsewhere/e.yaml", "");
    let expected = [
        "//recipes/sub/deep:c",
        "//recipes:alpha",
        "//recipes:dup",
        "//recipes:dup.yaml",
        "//recipes:loose",
        "//recipes:zeta",
    ];
    assert_eq!(ws.labels("//recipes/..."), expected);
    assert_eq!(ws.labels("//recipes/..."), expected, "same answer twice");
    // Every label `...` reports resolves on its own to the same recipe.
    for t in ws.resolve("//recipes/...").unwrap() {
        assert_eq!(ws.one(&t.label).recipe, t.recipe, "{}", t.label);
    }
    let all = ws.labels("//...");
    assert!(
        all.contains(&"//elsewhere:e".to_owned()) && all.len() == expected.len() + 1,
        "{all:?}"
    );
}

#[test]
fn missing_target_lists_available_names_closest_first() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        &format!("{LOAD}aorta_recipe(name = \"race_smoke\", recipe = \"race_smoke.yaml\")\naorta_recipe(name = \"quickstart\", recipe = \"quickstart.yaml\")\n"),
    )
    .write("recipes/loose.yaml", "");
    let e = ws.err("//recipes:quikstart");
    assert_eq!(
        e.to_string(),
        "no target 'quikstart' in //recipes (BUCK declares 2 recipes) and no file recipes/quikstart.yaml"
    );
    let LabelsErrorKind::NoTarget {
        available, help, ..
    } = e.kind()
    else {
        panic!("{e:?}")
    };
    assert_eq!(available[0], "quickstart");
    assert_eq!(available.len(), 3);
    assert!(
        help.starts_with("did you mean //recipes:quickstart?"),
        "{help}"
    );

    ws.write("nobuck/a.yaml", "");
    let e = ws.err("//nobuck:b");
    assert!(e.to_string().contains("(no BUCK file)"), "{e}");
}

#[test]
fn missing_package_and_empty_patterns() {
    let ws = Ws::new();
    assert!(matches!(
        ws.err("//nope:x").kind(),
        LabelsErrorKind::NoPackage { .. }
    ));
    assert!(matches!(
        ws.err("//nope/...").kind(),
        LabelsErrorKind::NoPackage { .. }
    ));
    ws.write("empty/README.md", "");
    assert!(matches!(
        ws.err("//empty/...").kind(),
        LabelsErrorKind::NoRecipes { .. }
    ));
}

#[test]
fn invalid_labels_are_rejected_with_accepted_forms() {
    let ws = Ws::new();
    for spec in ["recipes:x", "//recipes:", "//recipes:a:b", "//../x:y", ":x"] {
        let e = ws.err(spec);
        assert!(
            matches!(e.kind(), LabelsErrorKind::InvalidLabel(_)),
            "{spec}: {e:?}"
        );
        let help = miette::Diagnostic::help(&e).unwrap().to_string();
        assert!(
            help.contains("//pkg:target") && help.contains("//pkg/..."),
            "{spec}: {help}"
        );
    }
}

#[test]
fn recipe_paths_are_accepted_directly() {
    let ws = Ws::new();
    ws.write("recipes/my-recipe.yaml", "");
    let abs = ws.path("recipes/my-recipe.yaml");
    let t = ws.one(abs.to_str().unwrap());
    assert_eq!(
        (t.label.as_str(), &t.recipe, &t.declared_in),
        ("my-recipe", &abs, &None)
    );
    // Relative paths fall back to the workspace root when not found from the current directory.
    assert_eq!(ws.one("recipes/my-recipe.yaml").recipe, abs);
}

#[test]
fn workspace_root_is_nearest_marker() {
    let ws = Ws::new();
    ws.write("a/b/c/file", "").write("a/.buckconfig", "");
    assert_eq!(find_workspace_root(&ws.path("a/b/c")), ws.path("a"));
    assert_eq!(find_workspace_root(&ws.path("x")), ws.root());
    let bare = tempfile::tempdir().unwrap();
    assert_eq!(find_workspace_root(bare.path()), bare.path());
}

#[test]
fn buck_v2_shadows_buck() {
    let ws = Ws::new();
    ws.write(
        "p/BUCK",
        &format!("{LOAD}aorta_recipe(name = \"t\", recipe = \"old.yaml\")\n"),
    )
    .write(
        "p/BUCK.v2",
        &format!("{LOAD}aorta_recipe(name = \"t\", recipe = \"new.yaml\")\n"),
    );
    assert_eq!(ws.one("//p:t").recipe, ws.path("p/new.yaml"));
}
