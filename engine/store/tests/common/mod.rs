//! Helpers shared by the integration tests.
#![allow(dead_code)]

use aorta_store::{Key, LocalStore, Manifest};
use std::path::Path;
use std::time::{Duration, Instant};

pub fn key(seed: &str) -> Key {
    Key::of_bytes(seed.as_bytes())
}

/// A manifest for `seed` whose outputs are the given (path, content) pairs, uploaded to `store`.
pub fn manifest(store: &LocalStore, seed: &str, outputs: &[(&str, &[u8])]) -> Manifest {
    let mut m = Manifest::new(
        key(seed),
        serde_json::json!({"verdict": "pass", "seed": seed}),
    );
    for (path, content) in outputs {
        let blob = store.put_blob_bytes(content).unwrap();
        m.outputs.insert((*path).to_owned(), blob);
    }
    m.exec_seconds = 1.25;
    m
}

/// Polls until `path` exists; panics after `timeout`.
pub fn wait_for(path: &Path, timeout: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < timeout,
            "timed out waiting for {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Number of entries in a directory (0 if missing).
pub fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|rd| rd.count()).unwrap_or(0)
}
