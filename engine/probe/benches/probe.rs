//! Cold and warm probe wall time on this machine: `cargo bench -p aorta-probe`.
//! `AORTA_BENCH_PYTHON=/path/to/python3` picks the interpreter; `AORTA_BENCH_RUNS` (default 5)
//! the warm repetitions; `AORTA_BENCH_JSON=FILE` writes the cold snapshot; `AORTA_BENCH_SUMMARY`
//! prints the brief; `AORTA_BENCH_DEEP=1` probes with `deep` (imports torch). Cold = empty cache
//! directory (runs the interpreter and hashes libraries); warm = the same directory again (no
//! Python, cached hashes).

use aorta_probe::{probe, ProbeCache, ProbeOptions};
use std::time::Instant;

fn main() {
    let mut opts = ProbeOptions::current();
    opts.python = std::env::var_os("AORTA_BENCH_PYTHON").map(Into::into);
    opts.deep = std::env::var_os("AORTA_BENCH_DEEP").is_some_and(|v| v == "1");
    let runs: usize = std::env::var("AORTA_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().expect("temp dir");
    opts.cache = Some(ProbeCache::new(dir.path()));

    let t = Instant::now();
    let cold = probe(&opts);
    let cold_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut warm_ms = Vec::new();
    let mut last = cold.clone();
    for _ in 0..runs {
        let t = Instant::now();
        last = probe(&opts);
        warm_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    warm_ms.sort_by(f64::total_cmp);
    let same_key = cold.key(&Default::default()).hash == last.key(&Default::default()).hash;
    println!(
        "probe cold: {cold_ms:.1} ms (python cache {:?}, hashed {} bytes, steps {:?})",
        cold.probe.python_cache,
        cold.probe.hashed_bytes.unwrap_or(0),
        cold.probe.steps_ms
    );
    println!("probe warm: median {:.1} ms, min {:.1} ms, max {:.1} ms over {runs} run(s) (python cache {:?}, steps {:?})", warm_ms[warm_ms.len() / 2], warm_ms[0], warm_ms[warm_ms.len() - 1], last.probe.python_cache, last.probe.steps_ms);
    println!("same key cold/warm: {same_key}");
    if let Some(path) = std::env::var_os("AORTA_BENCH_JSON") {
        std::fs::write(path, cold.to_json_pretty() + "\n").expect("write the snapshot");
    }
    if std::env::var_os("AORTA_BENCH_SUMMARY").is_some() {
        print!("{}", last.summary());
    }
}
