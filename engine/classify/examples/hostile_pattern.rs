//! The classifier's time on a hostile custom pattern (issue 36, part 4; docs/classify.md,
//! "Bounded time"). Writes LINES lines of LINE_KIB KiB of `a` as a trial's stdout and
//! classifies it with a custom pattern, by default `(?=(a+)+$)x|(?=(a+)+b)a`: issue 36's
//! `(?=(a+)+$)x` (quadratic in line length), with an alternative that `seek` cannot skip.
//!
//! ```sh
//! cargo run --release -p aorta-classify --example hostile_pattern -- 50 1024
//! cargo run --release -p aorta-classify --example hostile_pattern -- 1 64 '(?=(a+)+$)x'
//! ```

use std::time::Instant;

use aorta_classify::{classify, ClassifierConfig, CustomDetector, Observation, OnMatch};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("LINES LINE_KIB [REGEX]"))
        .take(2)
        .collect();
    let (lines, kib) = (
        args.first().copied().unwrap_or(50),
        args.get(1).copied().unwrap_or(1024),
    );
    let regex = std::env::args()
        .nth(3)
        .unwrap_or_else(|| "(?=(a+)+$)x|(?=(a+)+b)a".into());
    let dir = std::env::temp_dir().join(format!("aorta-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stdout.log");
    let mut line = "a".repeat(kib << 10);
    line.push('\n');
    std::fs::write(&path, line.repeat(lines)).unwrap();
    let obs = Observation {
        stdout_log: Some(path),
        ..Default::default()
    };
    let det = CustomDetector::new("hostile", &regex, None, OnMatch::Fail, false).unwrap();
    let cfg = ClassifierConfig {
        custom: vec![det],
        ..Default::default()
    };
    let t = Instant::now();
    let c = classify(&obs, &cfg);
    println!(
        "{lines} x {kib} KiB lines, {regex}: {:.2} s, verdict {:?}, classifier_error {:?}",
        t.elapsed().as_secs_f64(),
        c.verdict,
        c.capture.classifier_error
    );
    std::fs::remove_dir_all(&dir).ok();
}
