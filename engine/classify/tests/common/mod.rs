//! Shared helpers: a trial directory with real log files, fixture readers, detector builders.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use aorta_classify::{
    classify, Classification, ClassifierConfig, CustomDetector, Observation, OnMatch,
};

pub const MIB: usize = 1024 * 1024;

/// A temporary trial directory holding `stdout.log` / `stderr.log`.
pub struct Trial {
    pub dir: tempfile::TempDir,
}

impl Trial {
    pub fn new() -> Trial {
        Trial {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes both logs and returns an exit-0 observation pointing at them.
    pub fn logs(&self, stdout: impl AsRef<[u8]>, stderr: impl AsRef<[u8]>) -> Observation {
        std::fs::write(self.path("stdout.log"), stdout).unwrap();
        std::fs::write(self.path("stderr.log"), stderr).unwrap();
        Observation {
            stdout_log: Some(self.path("stdout.log")),
            stderr_log: Some(self.path("stderr.log")),
            trial_dir: self.dir.path().to_path_buf(),
            walltime_sec: 1.5,
            ..Default::default()
        }
    }

    pub fn obs(&self) -> Observation {
        self.logs("", "")
    }
}

pub fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `id<TAB>line` rows of a `.tsv` fixture, comments skipped.
pub fn tsv(name: &str) -> Vec<(String, String)> {
    fixture(name)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (id, line) = l.split_once('\t').unwrap();
            (id.to_string(), line.to_string())
        })
        .collect()
}

pub fn custom(id: &str, regex: &str) -> CustomDetector {
    CustomDetector::new(id, regex, None, OnMatch::Fail, false).unwrap()
}

pub fn custom_with(
    id: &str,
    regex: &str,
    condition: Option<&str>,
    on_match: OnMatch,
    required: bool,
) -> CustomDetector {
    CustomDetector::new(id, regex, condition, on_match, required).unwrap()
}

pub fn with_custom(custom: Vec<CustomDetector>) -> ClassifierConfig {
    ClassifierConfig {
        custom,
        ..Default::default()
    }
}

pub fn run(obs: &Observation) -> Classification {
    classify(obs, &ClassifierConfig::default())
}

/// `n` bytes of ordinary, pattern-free log lines.
pub fn filler(n: usize) -> String {
    let line = "[rank0] step 000123 loss=1.2345 lr=3.0e-4 tokens/s=48211 mem=61.2GiB\n";
    let mut s = line.repeat(n / line.len() + 1);
    s.truncate(n);
    if let Some(i) = s.rfind('\n') {
        s.truncate(i + 1);
    }
    s
}
