#![allow(dead_code)]
use aorta_recipe::{parse_recipe, Recipe};
use aorta_registry::Registry;
use aorta_source::{Diag, DiagKind, SourceFile, Syntax};

pub fn parse(yaml: &str) -> Result<Recipe, Box<Diag>> {
    parse_recipe(
        &SourceFile::new("r.yaml", yaml),
        Syntax::Yaml,
        &Registry::builtin(),
    )
}

pub fn ok(yaml: &str) -> Recipe {
    parse(yaml).unwrap_or_else(|e| panic!("expected to load, got: {e}"))
}

/// Asserts an error of `kind` whose message contains `needle`, and returns the text it points at.
pub fn err(yaml: &str, kind: DiagKind, needle: &str) -> String {
    let e = parse(yaml)
        .err()
        .unwrap_or_else(|| panic!("expected an error containing {needle:?}"));
    assert_eq!(e.kind, kind, "{e}");
    assert!(
        e.to_string().contains(needle),
        "{e:?} does not contain {needle:?}"
    );
    e.primary_span()
        .map(|s| yaml[s].to_string())
        .unwrap_or_default()
}

pub const TRIAGE: &str = "schema_version: 1\nworkload: training\ntrials: 2\nsteps: 3\n";

pub fn triage_with(cells: &str) -> String {
    format!("{TRIAGE}cells:\n{cells}")
}

pub const BASE_CELL: &str = "  - {name: baseline, mitigations: [none], environment: local}\n";

pub fn probe_with(extra: &str) -> String {
    format!("schema_version: 1\nmode: probe\ntrials: 2\nmitigation_axis: [none, tf32_off]\ndiagnostic_axis: [none, xnack]\n{extra}")
}
