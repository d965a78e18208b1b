//! BUCK/.bzl evaluation: the Buck2 stubs, load(), and diagnostics for every failure class.

mod common;

use aorta_labels::{evaluate_package, LabelsErrorKind};
use common::{render, starlark_parts, Ws, LOAD};

#[test]
fn syntax_error_reports_file_line_column_and_snippet() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        &format!("{LOAD}\naorta_recipe(\n    name = \"x\",,\n)\n"),
    );
    let e = ws.err("//recipes:x");
    let (file, line, col, _) = starlark_parts(&ws, &e);
    assert_eq!((file.as_str(), line, col), ("recipes/BUCK", 4, 16));
    let shown = render(&e);
    assert!(
        shown.contains("recipes/BUCK:4:16") && shown.contains("name = \"x\",,"),
        "{shown}"
    );
    assert!(shown.contains("syntax error"), "help is rendered: {shown}");
}

#[test]
fn attribute_errors_point_at_the_call() {
    let ws = Ws::new();
    let cases = [
        (
            "aorta_recipe(name = \"x\", recipe = \"x.yaml\", recpie = \"y\")",
            "unknown attribute `recpie`",
        ),
        (
            "aorta_recipe(name = \"x\")",
            "missing required attribute `recipe`",
        ),
        (
            "aorta_recipe(recipe = \"x.yaml\")",
            "missing the mandatory `name`",
        ),
        (
            "aorta_recipe(name = \"x\", recipe = 3)",
            "expected a string (attrs.source()), got int `3`",
        ),
        (
            "aorta_recipe(name = \"x\", recipe = \"x.yaml\", labels = [1])",
            "attribute `labels`: item 0: expected a string",
        ),
        (
            "aorta_recipe(name = \"x\", recipe = \"../x.yaml\")",
            "inside the package",
        ),
        (
            "aorta_recipe(name = \"x\", recipe = \"x.yaml\", _aorta = \"//a:b\")",
            "private",
        ),
        (
            "aorta_recipe(name = \"bad name\", recipe = \"x.yaml\")",
            "invalid character",
        ),
        ("aorta_recipe(\"x\", recipe = \"x.yaml\")", "positional"),
    ];
    for (call, needle) in cases {
        ws.write("recipes/BUCK", &format!("{LOAD}\n{call}\n"));
        let e = ws.err("//recipes:x");
        let (file, line, col, message) = starlark_parts(&ws, &e);
        assert!(
            message.contains(needle),
            "{call}: `{message}` should contain `{needle}`"
        );
        assert_eq!((file.as_str(), line, col), ("recipes/BUCK", 3, 1), "{call}");
    }
}

#[test]
fn unknown_attribute_suggests_closest() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        &format!("{LOAD}aorta_recipe(name = \"x\", recipe = \"x.yaml\", lables = [])\n"),
    );
    let (_, _, _, message) = starlark_parts(&ws, &ws.err("//recipes:x"));
    assert!(message.contains("did you mean `labels`?"), "{message}");
    assert!(
        !message.contains("_aorta"),
        "private attrs are not advertised: {message}"
    );
}

#[test]
fn per_trial_attributes_are_checked_at_the_buck_call() {
    let ws = Ws::new();
    for (call, needle) in [
        (
            "aorta_recipe(name = \"x\", recipe = \"x.yaml\", cels = [\"a\"], trials = 2)",
            "did you mean `cells`?",
        ),
        (
            "aorta_recipe(name = \"x\", recipe = \"x.yaml\", cells = [\"a\"], trials = \"2\")",
            "attribute `trials`",
        ),
        (
            "aorta_recipe(name = \"x\", recipe = \"x.yaml\", gpus = [0])",
            "attribute `gpus`",
        ),
    ] {
        ws.write("recipes/BUCK", &format!("{LOAD}\n{call}\n"));
        let (file, line, col, message) = starlark_parts(&ws, &ws.err("//recipes:x"));
        assert!(
            message.contains(needle),
            "{call}: `{message}` should contain `{needle}`"
        );
        assert_eq!((file.as_str(), line, col), ("recipes/BUCK", 3, 1), "{call}");
    }
}

#[test]
fn duplicate_target_names_are_rejected() {
    let ws = Ws::new();
    ws.write("recipes/BUCK", &format!("{LOAD}aorta_recipe(name = \"x\", recipe = \"a.yaml\")\naorta_recipe(name = \"x\", recipe = \"b.yaml\")\n"));
    let (_, line, _, message) = starlark_parts(&ws, &ws.err("//recipes/..."));
    assert_eq!(line, 3);
    assert!(
        message.contains("duplicate target name `x` in //recipes"),
        "{message}"
    );
}

#[test]
fn unknown_symbol_hints_at_load() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        "aorta_recipe(name = \"x\", recipe = \"x.yaml\")\n",
    );
    let e = ws.err("//recipes:x");
    let (_, line, col, message) = starlark_parts(&ws, &e);
    assert_eq!((line, col), (1, 1));
    assert!(message.contains("aorta_recipe"), "{message}");
    assert!(miette::Diagnostic::help(&e)
        .unwrap()
        .to_string()
        .contains("load(\"//rules:aorta.bzl\""));
}

#[test]
fn loading_a_missing_bzl_fails_at_the_load() {
    let ws = Ws::new();
    ws.write(
        "recipes/BUCK",
        "load(\"//rules:missing.bzl\", \"aorta_recipe\")\n",
    );
    let e = ws.err("//recipes:x");
    let (file, line, _, message) = starlark_parts(&ws, &e);
    assert_eq!((file.as_str(), line), ("recipes/BUCK", 1));
    assert!(
        message.contains("rules/missing.bzl does not exist"),
        "{message}"
    );

    for (bad, needle) in [
        ("rules/aorta.bzl", "expected"),
        ("//rules/aorta.bzl", "`:`"),
        ("cell//rules:aorta.bzl", "cell"),
        ("//../x:a.bzl", "inside the workspace"),
    ] {
        ws.write(
            "recipes/BUCK",
            &format!("load(\"{bad}\", \"aorta_recipe\")\n"),
        );
        let (_, _, _, message) = starlark_parts(&ws, &ws.err("//recipes:x"));
        assert!(message.contains(needle), "{bad}: {message}");
    }
}

#[test]
fn errors_inside_bzl_point_into_the_bzl() {
    let ws = Ws::new();
    ws.write("recipes/defs.bzl", "def checked(name):\n    if name.startswith(\"_\"):\n        fail(\"recipe names may not start with _\")\n");
    ws.write(
        "recipes/BUCK",
        "load(\":defs.bzl\", \"checked\")\nchecked(\"_x\")\n",
    );
    let e = ws.err("//recipes:x");
    let (file, line, col, message) = starlark_parts(&ws, &e);
    assert_eq!((file.as_str(), line, col), ("recipes/defs.bzl", 3, 9));
    assert!(message.contains("may not start with _"), "{message}");

    ws.write("rules/broken.bzl", "def f(:\n");
    ws.write("recipes/BUCK", "load(\"//rules:broken.bzl\", \"f\")\n");
    let (file, line, _, _) = starlark_parts(&ws, &ws.err("//recipes:x"));
    assert_eq!((file.as_str(), line), ("rules/broken.bzl", 1));
}

#[test]
fn macros_in_relative_bzl_declare_targets() {
    let ws = Ws::new();
    ws.write(
        "recipes/defs.bzl",
        "load(\"//rules:aorta.bzl\", \"aorta_recipe\")\n\
         def smoke(name, tags = []):\n    aorta_recipe(name = name, recipe = name + \".yaml\", labels = [\"smoke\"] + tags)\n",
    );
    ws.write(
        "recipes/BUCK",
        "load(\":defs.bzl\", \"smoke\")\nfor n in [\"a\", \"b\"]:\n    smoke(n, tags = [package_name()])\nprint(\"not shown\")\n",
    );
    assert_eq!(ws.labels("//recipes/..."), ["//recipes:a", "//recipes:b"]);
    assert_eq!(ws.one("//recipes:b").labels, ["smoke", "recipes"]);
}

#[test]
fn other_rules_are_collected_but_are_not_recipes() {
    let ws = Ws::new();
    ws.write(
        "cells/cell.bzl",
        "def _impl(ctx):\n    return [DefaultInfo()]\n\
         CellInfo = provider(fields = [\"gpu\"])\n\
         aorta_cell = rule(impl = _impl, attrs = {\"gpus\": attrs.int(default = 1), \"env\": attrs.dict(attrs.string(), attrs.string(), default = {}), \"deps\": attrs.list(attrs.dep(providers = [CellInfo]), default = [])})\n",
    );
    ws.write(
        "cells/BUCK",
        &format!("{LOAD}load(\":cell.bzl\", \"aorta_cell\")\naorta_cell(name = \"c8\", gpus = 8, env = {{\"A\": \"1\"}}, deps = [\":r\"])\naorta_recipe(name = \"r\", recipe = \"r.yaml\")\n"),
    );
    let bf = evaluate_package(ws.root(), "cells").unwrap().unwrap();
    let rules: Vec<(&str, &str, &str)> = bf
        .targets
        .iter()
        .map(|t| (t.rule.as_str(), t.rule_file.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(
        rules,
        [
            ("aorta_cell", "//cells:cell.bzl", "c8"),
            ("aorta_recipe", "//rules:aorta.bzl", "r")
        ]
    );
    let c8 = &bf.targets[0].attrs;
    assert_eq!(
        serde_json::Value::Object(c8.clone()),
        serde_json::json!({"name": "c8", "gpus": 8, "env": {"A": "1"}, "deps": [":r"]})
    );
    assert_eq!(bf.targets[1].attrs["_aorta"], "//rules:aorta");

    assert_eq!(ws.labels("//cells/..."), ["//cells:r"]);
    let e = ws.err("//cells:c8");
    assert!(
        matches!(e.kind(), LabelsErrorKind::NotARecipe { rule, .. } if rule == "aorta_cell"),
        "{e:?}"
    );
    assert!(evaluate_package(ws.root(), "nope").unwrap().is_none());
}

#[test]
fn rules_cannot_declare_targets_while_loading_a_bzl() {
    let ws = Ws::new();
    ws.write("recipes/defs.bzl", "load(\"//rules:aorta.bzl\", \"aorta_recipe\")\naorta_recipe(name = \"x\", recipe = \"x.yaml\")\n");
    ws.write("recipes/BUCK", "load(\":defs.bzl\", \"aorta_recipe\")\n");
    let (file, line, _, message) = starlark_parts(&ws, &ws.err("//recipes:x"));
    assert_eq!((file.as_str(), line), ("recipes/defs.bzl", 2));
    assert!(message.contains("only BUCK files"), "{message}");
}

#[test]
fn load_cycles_are_reported() {
    let ws = Ws::new();
    ws.write("p/a.bzl", "load(\":b.bzl\", \"b\")\na = 1\n")
        .write("p/b.bzl", "load(\":a.bzl\", \"a\")\nb = 1\n");
    ws.write("p/BUCK", "load(\":a.bzl\", \"a\")\n");
    let (_, _, _, message) = starlark_parts(&ws, &ws.err("//p:x"));
    assert!(
        message.contains("load cycle p/a.bzl -> p/b.bzl -> p/a.bzl"),
        "{message}"
    );
}

#[test]
fn bad_rule_definitions_fail_in_the_bzl() {
    let ws = Ws::new();
    for (attrs, needle) in [
        ("{\"x\": \"string\"}", "must be an attrs.* value"),
        ("{\"name\": attrs.string()}", "implicit attribute"),
        (
            "{\"_tool\": attrs.dep()}",
            "private attributes need a default",
        ),
        ("{\"n\": attrs.int(default = \"three\")}", "invalid default"),
    ] {
        ws.write(
            "p/r.bzl",
            &format!("def _impl(ctx):\n    return []\nr = rule(impl = _impl, attrs = {attrs})\n"),
        );
        ws.write("p/BUCK", "load(\":r.bzl\", \"r\")\n");
        let (file, _, _, message) = starlark_parts(&ws, &ws.err("//p:x"));
        assert_eq!(file, "p/r.bzl");
        assert!(message.contains(needle), "{attrs}: {message}");
    }
}

#[test]
fn rule_identity_comes_from_the_bzl_export_name_not_the_local_alias() {
    let ws = Ws::new();
    ws.write("p/BUCK", "load(\"//rules:aorta.bzl\", recipe = \"aorta_recipe\")\nrecipe(name = \"t\", recipe = \"t.yaml\")\n");
    let bf = evaluate_package(ws.root(), "p").unwrap().unwrap();
    assert_eq!(bf.targets[0].rule, "aorta_recipe");
    assert_eq!(ws.one("//p:t").recipe, ws.path("p/t.yaml"));
}

#[test]
fn non_ascii_and_odd_input_never_panics() {
    let ws = Ws::new();
    for spec in [
        "é",
        "//é:x",
        "//recipes:é",
        "//\u{0}",
        "",
        " ",
        "//recipes:x\n",
    ] {
        let _ = ws.resolve(spec).map(|_| ()).map_err(|e| common::render(&e));
    }
    ws.write("p/BUCK", "x = \"é\" +\n");
    let _ = common::render(&ws.err("//p:x"));
}
