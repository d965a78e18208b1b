//! Prints the Tier-4 detectors that fire on each log file, one JSON object per line:
//! `{"file": "...", "fired": ["tier4:..."]}`. Used by bench/classify/corpus.py.
//!
//! ```sh
//! cargo run --release -p aorta-classify --example classify_logs -- LOG...
//! ```

use std::path::PathBuf;

use aorta_classify::{classify, ClassifierConfig, Observation};

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: classify_logs LOG...");
        std::process::exit(2);
    }
    for file in files {
        // The log as the trial's stdout of an exit-0 run: only the log tiers can fire.
        let obs = Observation {
            stdout_log: Some(PathBuf::from(&file)),
            ..Default::default()
        };
        let c = classify(&obs, &ClassifierConfig::default());
        if let Some(err) = c.capture.classifier_error.as_ref() {
            eprintln!("{file}: {err}");
            std::process::exit(1);
        }
        let fired: Vec<&String> = c
            .failure_detectors_fired
            .iter()
            .filter(|id| id.starts_with("tier4:"))
            .collect();
        println!("{}", serde_json::json!({ "file": file, "fired": fired }));
    }
}
