//! `aorta-workload-example`: the smallest workload shipped with aorta, installed beside the
//! `aorta` binary so `aorta run --workload example` works on any machine (no GPU, no libtorch).
//! It speaks the workload protocol (docs/workload-protocol.md): each step sums a vector of
//! floats on `threads` threads and checks the result bit for bit against a serial sum. Float
//! addition is not associative, so a parallel sum differs in its last bits, the way a GPU
//! reduction's result depends on its launch configuration; `AORTA_EXAMPLE_THREADS=1` (or the
//! `threads: 1` config) is the "mitigation" that makes it deterministic.

use serde_json::{json, Value};
use std::time::Instant;

fn describe() {
    println!(
        "{}",
        json!({"protocol": 1, "name": "example", "version": "1.0.0", "launch_mode": "single_process", "min_world_size": 1})
    );
}

/// A deterministic pseudo-random vector (xorshift), so every trial sums the same numbers.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1_000_000) as f32 / 997.0
        })
        .collect()
}

fn parallel_sum(v: &[f32], threads: usize) -> f32 {
    let chunk = v.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        v.chunks(chunk)
            .map(|c| s.spawn(move || c.iter().sum::<f32>()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap_or(f32::NAN))
            .sum()
    })
}

// String: the example prints its one error line and exits; nothing matches on it.
fn run(config_path: &str, result_path: &str) -> Result<(), String> {
    let cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(config_path)
            .map_err(|e| format!("cannot read {config_path}: {e}"))?,
    )
    .map_err(|e| format!("{config_path}: {e}"))?;
    let opts = &cfg["config"];
    let steps = cfg["steps"].as_u64().unwrap_or(1);
    let n = opts["elements"].as_u64().unwrap_or(100_000) as usize;
    let env_threads = std::env::var("AORTA_EXAMPLE_THREADS")
        .ok()
        .and_then(|t| t.parse::<usize>().ok());
    let threads = env_threads
        .or(opts["threads"].as_u64().map(|t| t as usize))
        .unwrap_or(4)
        .max(1);
    let (mut times, mut mismatches, mut first_failure) = (Vec::new(), 0u64, None);
    for step in 0..steps {
        let t0 = Instant::now();
        let v = data(n, step + 1);
        let serial: f32 = v.iter().sum();
        let parallel = parallel_sum(&v, threads);
        if serial.to_bits() != parallel.to_bits() {
            mismatches += 1;
            first_failure.get_or_insert(step);
        }
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        println!("step {step} sum={parallel} serial={serial}");
    }
    let passed = mismatches == 0;
    let result = json!({
        "passed": passed,
        "failure_count": mismatches,
        "first_failure_iteration": first_failure,
        "failure_details": if passed { json!([]) } else { json!([{"type": "mismatch", "hint": "a parallel float sum differs from the serial one; set AORTA_EXAMPLE_THREADS=1"}]) },
        "total_iterations": steps,
        "executed_iterations": steps,
        "configured_iterations": steps,
        "step_times_ms": times,
        "elapsed_sec": times.iter().sum::<f64>() / 1000.0,
        "metrics": {"threads": threads, "elements": n},
        "main_work_started": true,
    });
    std::fs::write(result_path, result.to_string())
        .map_err(|e| format!("cannot write {result_path}: {e}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [_, "describe"] => {
            describe();
            0
        }
        [_, "run", "--config", c, "--result", r] => match run(c, r) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("aorta-workload-example: {e}");
                1
            }
        },
        _ => {
            eprintln!("usage: aorta-workload-example describe | run --config C --result R");
            2
        }
    };
    std::process::exit(code);
}
