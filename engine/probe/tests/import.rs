//! AORTA's own env.json read for comparing (`Snapshot::from_json_or_aorta`), on real snapshots
//! AORTA 0.2.1 and 0.3.0 wrote (tests/fixtures/aorta/README.md).

use aorta_probe::{diff, KeyRules, Snapshot, SnapshotError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aorta")
        .join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn import(name: &str) -> Snapshot {
    Snapshot::from_json_or_aorta(&text(name)).unwrap()
}

fn not_compared(s: &Snapshot) -> Vec<String> {
    let i = s.probe.imported.as_ref().expect("imported");
    i.not_compared.iter().map(|n| n.field.clone()).collect()
}

#[test]
fn both_aorta_releases_import_with_what_was_not_compared() {
    for (name, release, schema) in [
        ("aorta-0.2.1-cpu.json", "AORTA 0.2.1", "1.7"),
        ("aorta-0.3.0-cpu.json", "AORTA 0.3.0", "1.17"),
    ] {
        let s = import(name);
        let i = s.probe.imported.as_ref().unwrap();
        assert_eq!(
            (i.from.as_str(), i.schema_version.as_str()),
            (release, schema)
        );
        // aorta's shape, AORTA's values.
        assert_eq!(s.schema_version, aorta_probe::SCHEMA_VERSION);
        assert_eq!(s.host.kernel_release.as_deref(), Some("6.18.44-fc-v1300"));
        assert_eq!(s.host.glibc_version.as_deref(), Some("2.36"));
        assert_eq!(s.host.machine.as_deref(), Some("x86_64"));
        assert_eq!(s.host.runtime.container.as_deref(), Some("docker"));
        assert_eq!(s.host.runtime.python_env.as_deref(), Some("venv"));
        assert_eq!(s.python.version.as_deref(), Some("3.11.7"));
        assert!(s.partial && !s.partial_reasons.is_empty());
        let r = &s.partial_reasons[0];
        assert_eq!(
            (r.field.as_str(), r.reason.as_str()),
            (
                "system_health",
                "rdhc not on PATH (see docs/env-probe.md#installing-rdhc)"
            )
        );
        assert!(s.env_vars.contains_key("NCCL_P2P_LEVEL"));
        // AORTA found no ROCm: its assumed /opt/rocm is not taken for a root.
        assert_eq!(s.rocm.root, None);
        let nc = not_compared(&s);
        for field in [
            "system_health",
            "hip.compiler",
            "hipblaslt.lib_hash",
            "hipblaslt.kernel_db_revision",
            "rccl.net_plugin_mode",
            "docker.image",
            "nics",
            "pytorch_build.install_kind",
            "build_system",
        ] {
            assert!(nc.contains(&field.to_string()), "{name}: {field} in {nc:?}");
        }
        for mapped in [
            "env_vars",
            "host",
            "host.kernel_release",
            "hip.version",
            "python_version",
        ] {
            assert!(
                !nc.iter()
                    .any(|f| f == mapped || f.starts_with(&format!("{mapped}."))),
                "{name}: {mapped} is mapped"
            );
        }
    }
    let new = import("aorta-0.3.0-cpu.json");
    assert_eq!(new.host.runtime.container_detected, Some(true));
    assert_eq!(
        new.host.runtime.namespace.as_deref(),
        Some("mnt:eb23e8c4fb996207")
    );
    assert_eq!(new.probe.invocation, None, "direct is not written");
    let nc = not_compared(&new);
    for field in [
        "tensile_catalog",
        "therock",
        "buck_invocation",
        "amdgpu_driver.package_name",
        "library_linkage.census",
        "library_linkage.libraries.*.scope",
        "execution_context.likely_execution_platform",
    ] {
        assert!(nc.contains(&field.to_string()), "{field} in {nc:?}");
    }
    // The named ROCm libraries' linkage: none found, so none recorded.
    assert_eq!(new.rocm.libraries["hip"], Default::default());
}

/// Where a snapshot keys trials, AORTA's file is refused by name, not misread.
#[test]
fn from_json_refuses_aorta_and_says_which() {
    for (name, from) in [
        ("aorta-0.2.1-cpu.json", "AORTA 0.2.1"),
        ("aorta-0.3.0-cpu.json", "AORTA 0.3.0"),
    ] {
        let e = Snapshot::from_json(&text(name)).unwrap_err();
        assert!(
            matches!(&e, SnapshotError::Aorta { from: f, .. } if f == from),
            "{e}"
        );
        assert!(e.to_string().contains("cannot key trials"), "{e}");
    }
    let e = Snapshot::from_json_or_aorta(r#"{"schema_version": "2.0"}"#).unwrap_err();
    assert!(matches!(&e, SnapshotError::OtherSchema(s) if s == "2.0"));
    let e = Snapshot::from_json_or_aorta(r#"{"schema_version": "1.17", "host": {"machine": 64}}"#)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "AORTA env.json (schema 1.17): field host.machine: expected a string or null, found a number"
    );
}

/// Every leaf of the real 0.3.0 file either reaches the snapshot (changing it changes the
/// import) or is listed as not compared (changing it changes only that entry's digest): the
/// list is exactly what the mapping does not read.
#[test]
fn every_aorta_field_is_mapped_or_listed_as_not_compared() {
    let base: Value = serde_json::from_str(&text("aorta-0.3.0-cpu.json")).unwrap();
    let mut leaves = Vec::new();
    leaves_of(&base, Vec::new(), &mut leaves);
    assert!(leaves.len() > 300, "{}", leaves.len());
    let candidates = |v: &Value| -> Vec<Value> {
        match v {
            Value::String(s) => vec![json!(format!("{s}x"))],
            Value::Bool(b) => vec![json!(!b)],
            Value::Number(n) => vec![json!(n.as_u64().unwrap_or(0) + 1)],
            _ => vec![
                json!("x"),
                json!(true),
                json!(7),
                json!(["x"]),
                json!({"x": "y"}),
                json!({"x": 1}),
            ],
        }
    };
    let (mut mapped, mut listed) = (0, 0);
    for path in leaves {
        if path == ["schema_version"] {
            continue;
        }
        let mut doc = base.clone();
        // The conditional mappings: AORTA's `rocm.root` counts only where it found ROCm, a
        // library's linkage only where it found the library.
        if path == ["rocm", "root"] {
            doc["rocm"]["root_source"] = json!("ROCM_PATH");
        }
        if path[0] == "library_linkage" && path.len() == 4 && path[3] != "path" {
            doc["library_linkage"]["libraries"][path[2].parse::<usize>().unwrap()]["path"] =
                json!("/opt/rocm/lib/x.so");
        }
        let before = Snapshot::from_json_or_aorta(&doc.to_string()).unwrap();
        let dotted = path.join(".");
        let group = before
            .probe
            .imported
            .as_ref()
            .unwrap()
            .not_compared
            .iter()
            .find(|n| {
                let norm: Vec<String> = path
                    .iter()
                    .map(|s| match s.parse::<usize>() {
                        Ok(_) => "*".to_string(),
                        Err(_) => s.clone(),
                    })
                    .collect();
                let f: Vec<&str> = n.field.split('.').collect();
                norm.len() >= f.len() && norm[..f.len()] == f[..]
            })
            .cloned();
        let outcomes: Vec<Option<Snapshot>> = candidates(pointer(&doc, &path))
            .into_iter()
            .map(|c| {
                let mut d = doc.clone();
                *pointer_mut(&mut d, &path) = c;
                Snapshot::from_json_or_aorta(&d.to_string()).ok()
            })
            .collect();
        match group {
            Some(g) => {
                listed += 1;
                for after in outcomes {
                    let after = after.unwrap_or_else(|| panic!("{dotted}: unread, yet refused"));
                    let (a, b) = (without_digests(&before), without_digests(&after));
                    assert_eq!(
                        a, b,
                        "{dotted} is listed as not compared, yet changed the import"
                    );
                    let digest = |s: &Snapshot| {
                        s.probe
                            .imported
                            .as_ref()
                            .unwrap()
                            .not_compared
                            .iter()
                            .find(|n| n.field == g.field)
                            .map(|n| n.digest.clone())
                    };
                    assert_ne!(
                        digest(&before),
                        digest(&after),
                        "{dotted}: {} digest",
                        g.field
                    );
                }
            }
            None => {
                mapped += 1;
                assert!(
                    outcomes.iter().flatten().any(|after| after != &before),
                    "{dotted} is not listed as not compared, yet no change reached the import"
                );
            }
        }
    }
    assert!(
        mapped > 80 && listed > 150,
        "mapped {mapped}, listed {listed}"
    );
}

fn without_digests(s: &Snapshot) -> Snapshot {
    let mut s = s.clone();
    if let Some(i) = &mut s.probe.imported {
        for n in &mut i.not_compared {
            n.digest.clear();
        }
    }
    s
}

fn leaves_of(v: &Value, path: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let mut p = path.clone();
                p.push(k.clone());
                leaves_of(x, p, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                let mut p = path.clone();
                p.push(i.to_string());
                leaves_of(x, p, out);
            }
        }
        _ => out.push(path),
    }
}

fn pointer<'v>(v: &'v Value, path: &[String]) -> &'v Value {
    v.pointer(&format!("/{}", path.join("/"))).unwrap()
}

fn pointer_mut<'v>(v: &'v mut Value, path: &[String]) -> &'v mut Value {
    v.pointer_mut(&format!("/{}", path.join("/"))).unwrap()
}

/// Two AORTA files: the diff lists what neither compared and which of those differ.
#[test]
fn aorta_against_aorta_says_which_uncompared_fields_differ() {
    let (old, new) = (
        import("aorta-0.2.1-cpu.json"),
        import("aorta-0.3.0-cpu.json"),
    );
    let d = diff(&old, &new, &KeyRules::default());
    let u = d.uncompared_differences();
    // 0.3.0's new blocks, and a block both have whose content changed (1.8 added its commit).
    for f in ["tensile_catalog", "therock", "library_linkage.census"] {
        assert!(u.only_b.contains(&f.to_string()), "{f} in {u:?}");
    }
    assert_eq!(u.different, ["fbgemm"]);
    assert!(u.only_a.is_empty(), "{u:?}");
    for same in ["hip.compiler", "nics", "aiter"] {
        assert!(!u.only_b.contains(&same.to_string()), "{same} in {u:?}");
    }
    let text = d.render("a.json", "b.json");
    assert!(
        text.starts_with("A: a.json\n   imported from AORTA 0.2.1's env.json (schema 1.7); "),
        "{text}"
    );
    assert!(
        text.contains("not compared, and different in A and B:\n     fbgemm\n"),
        "{text}"
    );
    assert!(
        text.contains("not compared, only in B:\n     amdgpu_driver.{kfd_sysfs_present, "),
        "{text}"
    );
    // The same file twice: nothing differs, compared or not.
    let d = diff(&new, &new, &KeyRules::default());
    assert!(d.is_empty() && d.uncompared_differences().is_empty());
    assert!(d
        .render("a", "b")
        .contains("not compared, and the same in A and B"));
}

/// AORTA 0.3.0 and aorta on one machine in one minute: what both record agrees, down to the
/// mount-namespace token; what only one records is one-sided, and the tracked-variable lists
/// and the two probes' partial reasons are counted, not listed.
#[test]
fn aorta_and_aorta_of_one_machine_agree_where_both_record() {
    let (theirs, ours) = (import("aorta-0.3.0-cpu.json"), import("aorta-cpu.json"));
    assert!(ours.probe.imported.is_none());
    assert_eq!(ours.host.runtime.namespace, theirs.host.runtime.namespace);
    let d = diff(&theirs, &ours, &KeyRules::default());
    let entries: Vec<(&str, aorta_probe::Change)> = d
        .sections
        .iter()
        .flat_map(|s| &s.entries)
        .map(|e| (e.path.as_str(), e.change))
        .collect();
    for agreed in [
        "host.kernel_release",
        "host.kernel_version",
        "host.glibc_version",
        "host.machine",
        "host.runtime",
        "python.version",
        "env_vars",
        "status",
        "partial_reasons",
        "rocm",
    ] {
        assert!(
            !entries.iter().any(|(p, _)| p.starts_with(agreed)),
            "{agreed} in {entries:?}"
        );
    }
    // What AORTA does not record is only in B.
    for only_ours in [
        "host.distro.id",
        "host.cpu.model",
        "gpu.count",
        "python.implementation",
    ] {
        assert!(
            entries.contains(&(only_ours, aorta_probe::Change::OnlyB)),
            "{only_ours} in {entries:?}"
        );
    }
    assert!(d.unlisted.env_vars > 100 && d.unlisted.partial_reasons);
    let text = d.render("aorta-0.3.0-cpu.json", "aorta-cpu.json");
    assert!(text.contains("not listed: partial_reasons"), "{text}");
    // Either order.
    let back = diff(&ours, &theirs, &KeyRules::default());
    assert_eq!(back.len(), d.len());
    assert!(back.imported_b.is_some() && back.imported_a.is_none());
}
