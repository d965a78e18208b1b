//! Limits on recipes (file size, cells, planned trials) and diagnostics on very long lines:
//! each is a located `aorta::limit` (or ordinary) diagnostic, never a panic or a runaway.
mod common;
use common::*;

use aorta_recipe::{
    load_recipe, parse_recipe, FlagRecipe, ProbeOverlays, MAX_CELLS, MAX_CELL_SETTINGS_BYTES,
    MAX_PLANNED_TRIALS, MAX_RECIPE_BYTES,
};
use aorta_registry::Registry;
use aorta_source::DiagKind::{Limit, Schema, Usage};
use aorta_source::{Diag, SourceFile, Syntax};
use miette::{GraphicalReportHandler, GraphicalTheme};
use std::time::{Duration, Instant};

/// The diagnostic as the CLI prints it (the renderer used to panic on long lines).
fn rendered(e: &Diag) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, e)
        .unwrap();
    out
}

#[test]
fn the_largest_u32_trials_is_refused_at_load_not_planned() {
    // The reproduction: `trials: 4294967295` made --dry-run grow ~90 MB/s.
    let t0 = Instant::now();
    let at = err(
        &triage_with(BASE_CELL).replace("trials: 2", "trials: 4294967295"),
        Limit,
        "at most 100000",
    );
    assert_eq!(at, "4294967295");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let e = parse(&triage_with(BASE_CELL).replace("trials: 2", "trials: 4294967295")).unwrap_err();
    assert_eq!(e.path.as_ref().unwrap().to_string(), "trials");
    assert!(e.help.as_deref().unwrap().contains("docs/recipes.md"));
    // Exactly at the limit is fine; one more is not.
    ok(&triage_with(BASE_CELL).replace("trials: 2", &format!("trials: {MAX_PLANNED_TRIALS}")));
    err(
        &triage_with(BASE_CELL)
            .replace("trials: 2", &format!("trials: {}", MAX_PLANNED_TRIALS + 1)),
        Limit,
        "plans 100001 trials",
    );
}

#[test]
fn trials_times_cells_is_what_counts_and_the_deciding_value_is_pointed_at() {
    let two =
        format!("{BASE_CELL}  - {{name: tf32, mitigations: [tf32_off], environment: local}}\n");
    let half = MAX_PLANNED_TRIALS / 2;
    ok(&triage_with(&two).replace("trials: 2", &format!("trials: {half}")));
    let at = err(
        &triage_with(&two).replace("trials: 2", &format!("trials: {}", half + 1)),
        Limit,
        "2 cells",
    );
    assert_eq!(at, (half + 1).to_string());
    // A cell-level override is the value to lower.
    let cells = format!("{BASE_CELL}  - {{name: tf32, mitigations: [tf32_off], environment: local, trials: 99999999}}\n");
    assert_eq!(err(&triage_with(&cells), Limit, "at most"), "99999999");
    // With stop_after, max_trials caps every cell.
    let text = probe_with("stop_after: {events: 1, max_trials: 4000000000}\n");
    assert_eq!(err(&text, Limit, "4 cells"), "4000000000");
    let e = parse(&text).unwrap_err();
    assert_eq!(
        e.path.as_ref().unwrap().to_string(),
        "stop_after.max_trials"
    );
}

#[test]
fn probe_axes_may_not_multiply_past_the_cell_limit() {
    let axis = |n: usize| format!("[{}]", vec!["none"; n].join(", "));
    let text = format!(
        "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: {}\ndiagnostic_axis: {}\n",
        axis(101),
        axis(100)
    );
    let t0 = Instant::now();
    err(
        &text,
        Limit,
        &format!("101 × 100 = 10100 cells; a recipe may have at most {MAX_CELLS}"),
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
    let cells: String = (0..=MAX_CELLS)
        .map(|i| format!("  - {{name: c{i}, mitigations: [none], environment: local}}\n"))
        .collect();
    err(
        &triage_with(&cells).replace("trials: 2", "trials: 1"),
        Limit,
        "10001 cells",
    );
}

#[test]
fn cli_overlays_and_flag_mode_respect_the_trials_limit() {
    let mut r = ok(&probe_with(""));
    let overlay = ProbeOverlays {
        stop_after_events: Some(1),
        max_trials: Some(4_294_967_295),
        ..Default::default()
    };
    let e = overlay.apply(&mut r).unwrap_err();
    assert_eq!(e.kind, Usage);
    assert!(
        e.to_string().contains("--max-trials") && e.to_string().contains("at most 100000"),
        "{e}"
    );
    let flags = FlagRecipe {
        workload: Some("training".into()),
        mitigation_axis: Some("none,tf32_off".into()),
        environment_axis: Some("local".into()),
        trials: Some(4_294_967_295),
        steps: Some(1),
        ..Default::default()
    };
    let e = flags.build(&Registry::builtin()).unwrap_err();
    assert!(
        e.to_string().contains("--trials") && e.to_string().contains("8589934590 trials"),
        "{e}"
    );
}

#[test]
fn a_recipe_file_over_the_size_limit_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    let mut text = triage_with(BASE_CELL);
    text.push_str(&format!("# {}\n", "x".repeat(MAX_RECIPE_BYTES as usize)));
    std::fs::write(&path, &text).unwrap();
    let e = load_recipe(&path, &[]).unwrap_err();
    assert_eq!(e.kind, Limit);
    assert!(e.to_string().contains("larger than 1048576 bytes"), "{e}");
    // The same text read by someone else (watch mode) is refused by the parser too.
    let e = parse_recipe(
        &SourceFile::new("big.yaml", text),
        Syntax::Yaml,
        &Registry::builtin(),
    )
    .unwrap_err();
    assert_eq!(e.kind, Limit);
    // A device that never ends is cut off at the limit, not read forever.
    let e = load_recipe(std::path::Path::new("/dev/zero"), &[]).unwrap_err();
    assert_eq!(e.kind, Limit, "{e}");
}

#[test]
fn a_65540_character_ticket_line_then_an_unknown_key_renders() {
    // The reproduction (a panic inside miette's renderer, exit 101).
    let text = format!("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\nticket: {}\nx: y\n", "T".repeat(65_540));
    let e = parse(&text).unwrap_err();
    assert_eq!(e.kind, Schema);
    let out = rendered(&e);
    assert!(
        out.contains("unknown key 'x'") && out.contains("[r.yaml:7:1]"),
        "{out}"
    );
    assert!(out.len() < 4_000, "{out}");
}

#[test]
fn a_one_line_json_recipe_over_64_kib_with_an_unknown_key_renders() {
    let json = format!(
        "{{\"schema_version\": 1, \"workload\": \"training\", \"trials\": 1, \"steps\": 1, \"ticket\": \"{}\", \"cells\": [{{\"name\": \"b\", \"mitigations\": [\"none\"], \"environment\": \"local\"}}], \"bogus\": 1}}",
        "J".repeat(70_000)
    );
    let e = parse_recipe(
        &SourceFile::new("r.json", json.clone()),
        Syntax::Json,
        &Registry::builtin(),
    )
    .unwrap_err();
    let out = rendered(&e);
    let col = json.find("\"bogus\"").unwrap() + 1;
    assert!(
        out.contains("unknown key 'bogus'") && out.contains(&format!("[r.json:1:{col}]")),
        "{out}"
    );
    assert!(out.len() < 4_000, "{out}");
}

#[test]
fn errors_quoting_a_huge_value_stay_short_and_fast() {
    // A 20 MB scalar where a number belongs: the message quotes it, bounded.
    let t0 = Instant::now();
    let text =
        triage_with(BASE_CELL).replace("trials: 2", &format!("trials: '{}'", "9".repeat(20 << 20)));
    let e = parse_recipe(
        &SourceFile::new("r.yaml", text),
        Syntax::Yaml,
        &Registry::builtin(),
    )
    .unwrap_err();
    let out = rendered(&e);
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "took {:?}",
        t0.elapsed()
    );
    assert!(out.len() < 4_000, "{} bytes", out.len());
    // An unknown key of 20 MB: no edit-distance search over it either.
    let t0 = Instant::now();
    let text = format!("{}{}: 1\n", triage_with(BASE_CELL), "k".repeat(20 << 20));
    let e = parse_recipe(
        &SourceFile::new("r.yaml", text),
        Syntax::Yaml,
        &Registry::builtin(),
    )
    .unwrap_err();
    assert!(rendered(&e).len() < 4_000);
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn settings_copied_into_every_cell_are_bounded() {
    // 64 KiB of recipe-level workload_config copied into 300 cells: 20 MB to plan, refused.
    let blob = "v".repeat(64 << 10);
    let cells: String = (0..300)
        .map(|i| format!("  - {{name: c{i}, mitigations: [none], environment: local}}\n"))
        .collect();
    let text = format!("{TRIAGE}workload_config: {{blob: '{blob}'}}\ncells:\n{cells}");
    let t0 = Instant::now();
    let e = parse(&text).unwrap_err();
    assert_eq!(e.kind, Limit, "{e}");
    assert!(e.to_string().contains("is copied into every cell"), "{e}");
    assert_eq!(e.path.as_ref().unwrap().to_string(), "workload_config");
    assert!(t0.elapsed() < Duration::from_secs(5));
    // The same config in a few cells, for many trials, is fine.
    ok(
        &format!("{TRIAGE}workload_config: {{blob: '{blob}'}}\ncells:\n{BASE_CELL}")
            .replace("trials: 2", "trials: 5000"),
    );
    // Env vars from a registry bundle count per cell; the heaviest cell is pointed at.
    let env: String = (0..20_000)
        .map(|i| format!("\"V{i}\": \"{}\"", "e".repeat(24)))
        .collect::<Vec<_>>()
        .join(", ");
    let sidecar = SourceFile::new(
        "big.json",
        format!("{{\"version\": 1, \"mitigations\": {{\"big_env\": {{{env}}}}}}}"),
    );
    let registry = Registry::from_sources(None, &[("big.json".into(), sidecar)]).unwrap();
    let cells: String = (0..10_000)
        .map(|i| format!("  - {{name: c{i}, mitigations: [big_env], environment: local}}\n"))
        .collect();
    let t0 = Instant::now();
    let e = parse_recipe(
        &SourceFile::new("r.yaml", triage_with(&cells)),
        Syntax::Yaml,
        &registry,
    )
    .unwrap_err();
    assert_eq!(e.kind, Limit, "{e}");
    let per_cell: u64 = (0..20_000)
        .map(|i| format!("V{i}").len() as u64 + 24 + 2)
        .sum();
    let n = MAX_CELL_SETTINGS_BYTES / per_cell + 1;
    assert!(
        e.to_string().contains(&format!("the first {n} cells")),
        "{e}"
    );
    assert_eq!(
        e.path.as_ref().unwrap().to_string(),
        format!("cells[{}]", n - 1),
        "stops at the cell past the limit"
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}
