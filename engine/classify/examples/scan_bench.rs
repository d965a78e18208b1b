//! Tier-4 scan throughput on a generated log (docs/benchmarks.md, "Log scan speed").
//!
//! ```sh
//! cargo run --release -p aorta-classify --example scan_bench -- gen /dev/shm/aorta-1g.log 1024
//! cargo run --release -p aorta-classify --example scan_bench -- run /dev/shm/aorta-1g.log --runs 5
//! cargo run --release -p aorta-classify --example scan_bench -- run /dev/shm/aorta-1g.log --runs 1 --unfiltered
//! ```
//!
//! `gen` writes SIZE MiB of healthy-looking training and serving output (step lines with
//! losses, tqdm bars, NCCL INFO, vLLM INFO, warnings) and ends it with a failure, so the scan
//! has to read to the end. `run` classifies the file as a trial's stdout with the built-in
//! library (one thread) and prints each run's time, the median and the peak RSS.
//! `--unfiltered` runs every Tier-4 regex over each 1 MiB window instead: the scan before
//! the prefilter, with today's library.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use aorta_classify::{classify, ClassifierConfig, Observation, TIER4_PATTERNS};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("gen") if args.len() == 3 => generate(&args[1], args[2].parse().expect("SIZE in MiB")),
        Some("run") if args.len() >= 2 => {
            let runs = args
                .iter()
                .position(|a| a == "--runs")
                .map_or(5, |i| args[i + 1].parse().expect("--runs N"));
            run(&args[1], runs, args.iter().any(|a| a == "--unfiltered"));
        }
        _ => {
            eprintln!("usage: scan_bench gen PATH SIZE_MIB | scan_bench run PATH [--runs N] [--unfiltered]");
            std::process::exit(2);
        }
    }
}

/// A small deterministic generator (xorshift), so every run scans the same bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn generate(path: &str, mib: usize) {
    let target = mib << 20;
    let mut out = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(path).expect("create the log"),
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut written = 0usize;
    let mut step = 0u64;
    while written < target {
        step += 1;
        let r = rng.below(100);
        let loss = 1.5 + (rng.below(10_000) as f64) / 10_000.0;
        let line = match r {
            0..=39 => format!(
                "[rank{}]: step {step:>7} | loss={loss:.4} | lr=3.0e-4 | grad_norm={:.3} | tokens/s={} | mem=61.2GiB\n",
                rng.below(8),
                0.5 + (rng.below(1000) as f64) / 1000.0,
                40_000 + rng.below(10_000)
            ),
            40..=54 => format!(
                "{{'loss': {loss:.4}, 'grad_norm': {:.4}, 'learning_rate': 4.9e-05, 'epoch': {:.2}}}\n",
                0.5 + (rng.below(1000) as f64) / 1000.0,
                step as f64 / 1e5
            ),
            55..=64 => format!(
                "Epoch 1:  {:>2}%|████▌     | {}/100000 [01:02<01:46,  5.93it/s, loss={loss:.3}, v_num=0]\n",
                step % 100,
                step % 100_000
            ),
            65..=74 => format!(
                "node{}:{}:{} [{}] NCCL INFO Channel {:02}/32 : 0[0] -> 1[1] via P2P/CUMEM/read\n",
                rng.below(4),
                800 + rng.below(100),
                900 + rng.below(100),
                rng.below(8),
                rng.below(32)
            ),
            75..=86 => format!(
                "INFO 01-02 12:{:02}:{:02} [metrics.py:455] Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: 12 reqs, GPU KV cache usage: 41.2%.\n",
                rng.below(60),
                rng.below(60),
                (rng.below(100_000) as f64) / 10.0,
                (rng.below(100_000) as f64) / 10.0
            ),
            87..=92 => format!(
                " iteration {step:>8}/ 5000000 | consumed samples: {:>10} | lm loss: {loss:.6E} | loss scale: 65536.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
                step * 128
            ),
            93..=96 => "WARNING 01-02 12:00:00 [config.py:1060] To see benefits of async output processing, enable CUDA graph. Since, enforce-eager is enabled, async output processor cannot be used\n".to_string(),
            _ => format!("[rank0]:[W102 12:00:00.{:06} 4123 ProcessGroupNCCL.cpp:4115] Warning: using GPU 0 to perform barrier as devices used by this process are currently unknown.\n", rng.below(1_000_000)),
        };
        out.write_all(line.as_bytes()).expect("write the log");
        written += line.len();
    }
    let tail = "[rank3]: Traceback (most recent call last):\n[rank3]:   File \"/workspace/train.py\", line 88, in <module>\n\
                [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n\
                {'loss': nan, 'grad_norm': nan, 'learning_rate': 4.9e-05, 'epoch': 3.0}\n";
    out.write_all(tail.as_bytes()).expect("write the log");
    out.flush().expect("write the log");
    println!("wrote {} bytes to {path}", written + tail.len());
}

fn run(path: &str, runs: usize, unfiltered: bool) {
    let size = std::fs::metadata(path).expect("the log exists").len() as f64 / 1e6;
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (start, cpu_start) = (Instant::now(), cpu_secs());
        let fired = if unfiltered {
            unfiltered_scan(path)
        } else {
            prefiltered_scan(path)
        };
        let (secs, cpu_used) = (start.elapsed().as_secs_f64(), cpu_secs() - cpu_start);
        println!(
            "run {}: wall {secs:.3} s ({:.0} MB/s), cpu {cpu_used:.3} s ({:.0} MB/s per core), fired {fired:?}",
            i + 1,
            size / secs,
            size / cpu_used
        );
        wall.push(secs);
        cpu.push(cpu_used);
    }
    let (w, c) = (median(&mut wall), median(&mut cpu));
    println!(
        "{:.0} MB, {runs} runs: median wall {w:.3} s = {:.0} MB/s; median cpu {c:.3} s = {:.0} MB/s per core \
         (cpu min {:.3} s, max {:.3} s); peak RSS {} MiB",
        size,
        size / w,
        size / c,
        cpu[0],
        cpu[cpu.len() - 1],
        peak_rss_kib() / 1024
    );
}

/// Sorts `v` and returns its median (the upper one for an even count).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// User plus system CPU seconds of this process: a core's worth of work even when other
/// processes share the core (wall time alone would charge their time to the scan).
fn cpu_secs() -> f64 {
    let u = rusage();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// What `aorta` runs: `classify` with the built-in library, the log as the trial's stdout.
fn prefiltered_scan(path: &str) -> Vec<String> {
    let obs = Observation {
        stdout_log: Some(PathBuf::from(path)),
        ..Default::default()
    };
    classify(&obs, &ClassifierConfig::default()).failure_detectors_fired
}

/// The scan before the prefilter: each regex over each 1 MiB run of whole lines.
fn unfiltered_scan(path: &str) -> Vec<String> {
    let regexes: Vec<_> = TIER4_PATTERNS
        .iter()
        .map(|p| (p.id, p.compile().expect("built-ins compile")))
        .collect();
    let mut fired = vec![false; regexes.len()];
    let mut reader =
        BufReader::with_capacity(1 << 20, std::fs::File::open(path).expect("open the log"));
    let mut window = String::new();
    loop {
        window.clear();
        while window.len() < 1 << 20 {
            if reader.read_line(&mut window).expect("read the log") == 0 {
                break;
            }
        }
        if window.is_empty() {
            break;
        }
        for ((_, re), hit) in regexes.iter().zip(fired.iter_mut()) {
            if !*hit {
                *hit = matches!(re.is_match(&window), Ok(true));
            }
        }
    }
    regexes
        .iter()
        .zip(fired)
        .filter(|(_, f)| *f)
        .map(|((id, _), _)| id.to_string())
        .collect()
}

fn peak_rss_kib() -> i64 {
    rusage().ru_maxrss
}

fn rusage() -> libc::rusage {
    // SAFETY: rusage is plain data (integers and timevals), for which all zeroes is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given, which lives for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage
}
