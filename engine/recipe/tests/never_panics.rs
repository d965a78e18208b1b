//! The loader never panics: arbitrary bytes, and arbitrary recipe-shaped YAML built from the
//! real keys and hostile values, always give Ok or a located diagnostic.
use aorta_recipe::{parse_recipe, PROBE_KEYS, TRIAGE_KEYS};
use aorta_registry::Registry;
use aorta_source::{SourceFile, Syntax};
use proptest::prelude::*;

fn check(text: &str, syntax: Syntax) {
    let file = SourceFile::new("fuzz.yaml", text);
    if let Err(e) = parse_recipe(&file, syntax, &Registry::builtin()) {
        // Every diagnostic renders, and its span lies inside the text.
        let _ = e.to_string();
        if let Some(span) = e.primary_span() {
            assert!(
                span.start <= span.end && span.end <= text.len(),
                "span {span:?} outside text of {} bytes",
                text.len()
            );
        }
    }
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1".to_string()),
        Just("0".to_string()),
        Just("-5".to_string()),
        Just("yes".to_string()),
        Just("null".to_string()),
        Just("1.5".to_string()),
        Just("none".to_string()),
        Just("tf32_off".to_string()),
        Just("probe".to_string()),
        Just("'(unclosed'".to_string()),
        Just("\"capture['x'] * 2\"".to_string()),
        "[a-z_:.*-]{0,12}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    let leaf = scalar();
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec((key(), inner), 0..4).prop_map(|kv| format!(
                "{{{}}}",
                kv.into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    let keys: Vec<String> = TRIAGE_KEYS
        .iter()
        .chain(PROBE_KEYS)
        .chain(&[
            "name",
            "mitigations",
            "environment",
            "extra_env",
            "docker",
            "id",
            "match",
            "regex",
            "condition",
            "events",
            "max_trials",
            "on_pass",
            "threshold",
            "baseline_cell",
            "mode",
        ])
        .map(|s| s.to_string())
        .collect();
    prop::sample::select(keys)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        check(&text, Syntax::Yaml);
        check(&text, Syntax::Json);
    }

    #[test]
    fn recipe_shaped_documents(entries in prop::collection::vec((key(), value()), 0..12), probe in any::<bool>()) {
        let mut text = String::from("schema_version: 1\n");
        if probe {
            text.push_str("mode: probe\n");
        }
        for (k, v) in entries {
            text.push_str(&format!("{k}: {v}\n"));
        }
        check(&text, Syntax::Yaml);
    }

    /// A recipe with one byte that is not UTF-8 (a lone continuation byte, a cut-off
    /// sequence, an impossible byte) anywhere, even in a comment: the file is refused with the
    /// line and column of that byte, never read as empty.
    #[test]
    fn invalid_utf8_is_located(
        entries in prop::collection::vec((key(), value()), 1..8),
        at in any::<prop::sample::Index>(),
        bad in prop::sample::select(vec![0x80u8, 0xbf, 0xc3, 0xe2, 0xf0, 0xff]),
        comment in any::<bool>(),
    ) {
        let mut text = String::from("schema_version: 1\n");
        for (k, v) in entries {
            text.push_str(&format!("{k}: {v}"));
            text.push_str(if comment { " # café\n" } else { "\n" });
        }
        // Insert at a character boundary, followed by ASCII so the byte stays invalid.
        let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let offset = boundaries[at.index(boundaries.len())];
        let mut bytes = text.as_bytes()[..offset].to_vec();
        bytes.push(bad);
        bytes.push(b'x');
        bytes.extend_from_slice(&text.as_bytes()[offset..]);
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.yaml");
        std::fs::write(&path, &bytes).unwrap();
        let err = SourceFile::read(&path).expect_err("invalid UTF-8 must be refused");
        prop_assert!(err.to_string().contains("is not valid UTF-8"), "{}", err);
        prop_assert_eq!(err.line_col(), Some((line, col)));
    }
}
