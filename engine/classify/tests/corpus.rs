//! The log corpus (tests/corpus/MANIFEST.tsv): each failure log fires exactly its listed
//! Tier-4 detectors, each clean log fires nothing at all, and the prefiltered scan agrees
//! with every regex run over the whole file.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aorta_classify::{Verdict, TIER4_PATTERNS};
use common::*;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// `(file, expected tier4 ids)` rows of the manifest.
fn manifest() -> Vec<(String, BTreeSet<String>)> {
    let text = std::fs::read_to_string(corpus_dir().join("MANIFEST.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 3, "MANIFEST.tsv row {l:?}");
            let ids = match cols[1] {
                "-" => BTreeSet::new(),
                ids => ids.split(',').map(|id| format!("tier4:{id}")).collect(),
            };
            (cols[0].to_string(), ids)
        })
        .collect()
}

#[test]
fn every_corpus_log_is_listed_and_every_listed_id_exists() {
    let listed: BTreeSet<String> = manifest().into_iter().map(|(f, _)| f).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(listed, on_disk);
    let known: BTreeSet<&str> = TIER4_PATTERNS.iter().map(|p| p.id).collect();
    for (file, ids) in manifest() {
        for id in ids {
            assert!(known.contains(id.as_str()), "{file}: unknown detector {id}");
        }
    }
}

#[test]
fn each_log_fires_exactly_its_detectors() {
    let mut wrong = Vec::new();
    for (file, want) in manifest() {
        let text = std::fs::read(corpus_dir().join(&file)).unwrap();
        // On stdout and on stderr alike.
        for (out, err) in [(&text[..], &b""[..]), (&b""[..], &text[..])] {
            let t = Trial::new();
            let c = run(&t.logs(out, err));
            let got: BTreeSet<String> = c.failure_detectors_fired.iter().cloned().collect();
            if got != want {
                wrong.push(format!("{file}: fired {got:?}, want {want:?}"));
            }
            let verdict = if want.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            assert_eq!(c.verdict, verdict, "{file}");
            assert!(c.warn_detectors_fired.is_empty(), "{file}");
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_prefiltered_scan_agrees_with_whole_file_regexes() {
    let regexes: Vec<_> = TIER4_PATTERNS
        .iter()
        .map(|p| (p.id, p.compile().unwrap()))
        .collect();
    for (file, _) in manifest() {
        let text =
            String::from_utf8_lossy(&std::fs::read(corpus_dir().join(&file)).unwrap()).into_owned();
        let whole: Vec<&str> = regexes
            .iter()
            .filter(|(_, re)| re.is_match(&text).unwrap())
            .map(|(id, _)| *id)
            .collect();
        let t = Trial::new();
        assert_eq!(
            run(&t.logs(&text, "")).failure_detectors_fired,
            whole,
            "{file}"
        );
    }
}

#[test]
fn every_tier4_detector_is_exercised_and_clean_logs_are_a_fifth_of_the_corpus() {
    let rows = manifest();
    for p in TIER4_PATTERNS {
        assert!(
            rows.iter().any(|(_, ids)| ids.contains(p.id)),
            "no corpus log fires {}",
            p.id
        );
    }
    let clean = rows.iter().filter(|(_, ids)| ids.is_empty()).count();
    assert!(
        clean * 5 >= rows.len(),
        "{clean} clean logs of {}",
        rows.len()
    );
}

/// The scan only runs a pattern's regex on lines holding one of its triggers: every match in
/// the corpus and in the Tier-4 fixture lines must contain one (a deterministic check of what
/// the scan's property test samples at random).
#[test]
fn every_match_contains_a_trigger_of_its_pattern() {
    let mut texts: Vec<(String, String)> = manifest()
        .into_iter()
        .map(|(f, _)| {
            let text = String::from_utf8_lossy(&std::fs::read(corpus_dir().join(&f)).unwrap())
                .into_owned();
            (f, text)
        })
        .collect();
    texts.extend(tsv("tier4_lines.tsv"));
    let mut matches = 0;
    for p in TIER4_PATTERNS {
        let re = p.compile().unwrap();
        for (name, text) in &texts {
            for m in re.find_iter(text) {
                let m = m.unwrap();
                matches += 1;
                let bytes = text.as_bytes();
                let held = p.triggers.iter().any(|t| {
                    let lit = t.literal.as_bytes();
                    (m.start()..=m.end().saturating_sub(lit.len())).any(|i| {
                        &bytes[i..i + lit.len()] == lit && t.holds_at(bytes, i, i + lit.len())
                    })
                });
                assert!(
                    held,
                    "{}: match {:?} in {name} holds none of its triggers",
                    p.id,
                    m.as_str()
                );
            }
        }
    }
    assert!(matches > 100, "{matches}");
}
