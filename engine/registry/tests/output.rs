//! What the CLI prints: the list tables, JSON, and unknown-name hints.

use aorta_registry::Registry;
use std::path::Path;

fn with_sidecar() -> Registry {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/sidecars/mitigations-sidecar.json");
    Registry::load(None, &[p]).unwrap()
}

#[test]
fn mitigations_table_layout() {
    let reg = with_sidecar();
    let table = reg.mitigations_table();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + reg.mitigations().count());
    let header = lines[0];
    assert!(header.starts_with("NAME  "), "{header}");
    let col = |h: &str| header.find(h).unwrap();
    let widest = reg.mitigations().map(|m| m.name.len()).max().unwrap();
    assert_eq!(
        col("SOURCE"),
        widest + 2,
        "NAME column is as wide as the longest name"
    );
    assert!(col("SOURCE") < col("ENV") && col("ENV") < col("DESCRIPTION"));
    let none = lines.iter().find(|l| l.starts_with("none ")).unwrap();
    assert_eq!(&none[col("SOURCE")..col("SOURCE") + 7], "aorta  ");
    assert_eq!(&none[col("ENV")..col("ENV") + 6], "(none)");
    let flight = lines
        .iter()
        .find(|l| l.starts_with("torch_nccl_flight_recorder "))
        .unwrap();
    assert!(
        flight.contains("TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_TRACE_BUFFER_SIZE=2000"),
        "K=V sorted by key"
    );
    let mine = lines.iter().find(|l| l.starts_with("my_flag ")).unwrap();
    assert!(mine.contains("sidecar:mitigations-sidecar.json") && mine.contains("MY_FLAG=1"));
    assert!(
        lines.iter().all(|l| l.trim_end() == *l),
        "no trailing spaces"
    );
    assert!(lines[1..].windows(2).all(|w| w[0] < w[1]), "sorted by name");
}

#[test]
fn environments_table_layout() {
    let table = with_sidecar().environments_table();
    let lines: Vec<&str> = table.lines().collect();
    let header = lines[0];
    for (a, b) in [
        ("NAME", "SOURCE"),
        ("SOURCE", "DOCKER"),
        ("DOCKER", "VENV"),
        ("VENV", "BUCK_TARGET"),
        ("BUCK_TARGET", "DESCRIPTION"),
    ] {
        assert!(header.find(a).unwrap() < header.find(b).unwrap());
    }
    let local = lines.iter().find(|l| l.starts_with("local ")).unwrap();
    let docker = header.find("DOCKER").unwrap();
    assert_eq!(&local[docker..docker + 1], "-");
    let venv_row = lines
        .iter()
        .find(|l| l.starts_with("host_venv_3_12 "))
        .unwrap();
    assert_eq!(
        &venv_row[header.find("VENV").unwrap()..][..16],
        "/opt/venvs/py312"
    );
}

#[test]
fn json_uses_the_source_string() {
    let reg = with_sidecar();
    let v = serde_json::to_value(reg.mitigation("tf32_off").unwrap()).unwrap();
    assert_eq!(v["source"], "aorta");
    assert_eq!(v["env"]["DISABLE_TF32"], "1");
    let v = serde_json::to_value(reg.environment("my_local_image").unwrap()).unwrap();
    assert_eq!(v["source"], "sidecar:mitigations-sidecar.json");
    assert_eq!(v["venv"], serde_json::Value::Null);
}

#[test]
fn unknown_names_get_a_suggestion_and_the_full_list() {
    let reg = Registry::builtin();
    let hint = reg.unknown_mitigation_hint("tf32_of");
    assert!(
        hint.starts_with("did you mean 'tf32_off'? available: amd_log_level_4, "),
        "{hint}"
    );
    let names: Vec<&str> = reg.mitigations().map(|m| m.name.as_str()).collect();
    assert!(hint.contains(&names.join(", ")), "every name, sorted");
    let d = reg.unknown_mitigation("tf32_of");
    assert_eq!(d.to_string(), "unknown mitigation 'tf32_of'");
    assert_eq!(d.help.as_deref(), Some(hint.as_str()));

    let hint = reg.unknown_environment_hint("lokal");
    assert!(
        hint.starts_with("did you mean 'local'? available: default, local;"),
        "{hint}"
    );
    assert!(reg
        .unknown_environment_hint("zzzzzzzz")
        .starts_with("available: default, local;"));
}

#[test]
fn diagnostics_render_with_miette() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/sidecars/bad-non-string-value.json");
    let e = Registry::load(None, &[p]).err().unwrap();
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .render_report(&mut out, e.as_ref())
        .unwrap();
    assert!(out.contains("bad-non-string-value.json:4:24"), "{out}");
    assert!(
        out.contains("aorta::registry") && out.contains("expected a string"),
        "{out}"
    );
}
