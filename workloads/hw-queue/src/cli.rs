//! `aorta-hw-queue list|run|sweep|compare` (also reached as `aorta bench hw-queue …`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::{json, Map, Value};

use crate::compare::{compare, render};
use crate::config::{parse_set, Config, Order};
use crate::results::ResultFile;
use crate::{runner, table, workloads};

#[derive(Parser)]
#[command(
    name = "aorta-hw-queue",
    version,
    about = "How a GPU schedules work from many streams: hardware queues, false dependencies, convoys",
    after_help = "Exit status: 0 ok; 1 a GPU call failed or `compare` found a regression; 2 bad usage or no usable GPU."
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the workloads.
    List {
        /// Also the config keys each workload reads, with their defaults.
        #[arg(short, long)]
        verbose: bool,
        #[arg(long)]
        json: bool,
    },
    /// Run a workload in this process, with CUDA_DEVICE_MAX_CONNECTIONS as the environment has it.
    Run {
        workload: String,
        #[command(flatten)]
        w: WorkloadArgs,
        #[command(flatten)]
        o: OutputArgs,
    },
    /// Run a workload once per connection count, each in a fresh child process.
    Sweep {
        workload: String,
        /// CUDA_DEVICE_MAX_CONNECTIONS values (1..=32).
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
        connections: Vec<u32>,
        /// Concurrency below (1 − tolerance) · ideal counts as a false dependency.
        #[arg(long, default_value_t = 0.1)]
        tolerance: f64,
        #[command(flatten)]
        w: WorkloadArgs,
        #[command(flatten)]
        o: OutputArgs,
    },
    /// Compare two result files (run or sweep); exit 1 if any metric got worse beyond the threshold.
    Compare {
        base: PathBuf,
        test: PathBuf,
        /// Relative change that counts (0.1 = 10%).
        #[arg(long, default_value_t = 0.1)]
        threshold: f64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct WorkloadArgs {
    /// Stream counts, e.g. 1,2,4,8.
    #[arg(short, long, value_delimiter = ',')]
    streams: Option<Vec<u32>>,
    /// Launch orders: breadth, depth.
    #[arg(long, value_delimiter = ',')]
    order: Option<Vec<Order>>,
    #[arg(short, long)]
    iterations: Option<u32>,
    #[arg(short, long)]
    warmup: Option<u32>,
    #[arg(long)]
    kernel_ms: Option<f64>,
    #[arg(long)]
    kernels_per_stream: Option<u32>,
    #[arg(long)]
    samples: Option<u32>,
    /// GEMM shape M,N,K.
    #[arg(long, value_delimiter = ',')]
    gemm: Option<Vec<u64>>,
    /// f32, tf32, bf16 or f16.
    #[arg(long)]
    dtype: Option<String>,
    /// device (kernel stamps), events, or both.
    #[arg(long)]
    timing: Option<String>,
    /// Any config key (see `list --verbose`), repeatable: --set waves=20.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A JSON file of config keys.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The whole config as JSON (what `sweep` passes to its children).
    #[arg(long, hide = true)]
    config_json: Option<String>,
}

#[derive(Args)]
struct OutputArgs {
    /// Print the JSON result on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the JSON result to this file.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write result.json, table.txt and SVG plots into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn merge_json(cfg: &mut Config, text: &str, what: &str) -> Result<(), String> {
    match serde_json::from_str::<Value>(text).map_err(|e| format!("{what}: {e}"))? {
        Value::Object(m) => cfg.apply(&m),
        _ => Err(format!("{what}: expected a JSON object")),
    }
}

fn resolve(workload: &str, w: &WorkloadArgs) -> Result<Config, String> {
    if workloads::find(workload).is_none() {
        let names: Vec<&str> = workloads::WORKLOADS.iter().map(|w| w.name).collect();
        return Err(format!(
            "unknown workload {workload:?}; one of: {}",
            names.join(", ")
        ));
    }
    let mut cfg = workloads::config_for(workload);
    if let Some(p) = &w.config {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        merge_json(&mut cfg, &text, &p.display().to_string())?;
    }
    if let Some(j) = &w.config_json {
        merge_json(&mut cfg, j, "--config-json")?;
    }
    let mut m = Map::new();
    if let Some(v) = &w.streams {
        m.insert("streams".into(), json!(v));
    }
    if let Some(v) = &w.order {
        m.insert("orders".into(), json!(v));
    }
    for (k, v) in [
        ("iterations", w.iterations),
        ("warmup", w.warmup),
        ("kernels_per_stream", w.kernels_per_stream),
        ("samples", w.samples),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if let Some(v) = w.kernel_ms {
        m.insert("kernel_ms".into(), json!(v));
    }
    if let Some(v) = &w.gemm {
        m.insert("gemm".into(), json!(v));
    }
    if let Some(v) = &w.dtype {
        m.insert("dtype".into(), json!(v));
    }
    if let Some(v) = &w.timing {
        m.insert("timing".into(), json!(v));
    }
    for kv in &w.set {
        let (k, v) = parse_set(kv)?;
        m.insert(k, v);
    }
    cfg.apply(&m)?;
    Ok(cfg)
}

fn emit(file: &ResultFile, o: &OutputArgs) -> Result<(), String> {
    if o.json {
        println!("{}", file.to_json());
    } else {
        print!("{}", table::render(file));
    }
    if let Some(p) = &o.output {
        crate::results::write_atomic(p, file.to_json().as_bytes())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(dir) = &o.out {
        for f in runner::write_outputs(file, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

fn list(verbose: bool, as_json: bool) -> i32 {
    if as_json {
        let v: Vec<Value> = workloads::WORKLOADS
            .iter()
            .map(|w| json!({"name": w.name, "category": w.category, "description": w.description, "keys": w.keys,
                            "defaults": workloads::config_for(w.name)}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return 0;
    }
    println!("Available workloads ({}):", workloads::WORKLOADS.len());
    for w in workloads::WORKLOADS {
        println!("  {:<20} [{}] {}", w.name, w.category, w.description);
        if verbose {
            let d = serde_json::to_value(workloads::config_for(w.name)).expect("json");
            let keys: Vec<String> = w.keys.iter().map(|k| format!("{k}={}", d[*k])).collect();
            println!("  {:<20} keys: {}", "", keys.join(" "));
        }
    }
    0
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    let mut log = |m: String| eprintln!("{m}");
    match cli.cmd {
        Cmd::List { verbose, json } => list(verbose, json),
        Cmd::Run { workload, w, o } => {
            let cfg = match resolve(&workload, &w) {
                Ok(c) => c,
                Err(e) => return fail(2, &e),
            };
            match runner::run_in_process(&workload, &cfg, &mut log) {
                Ok(f) => emit(&f, &o).map_or_else(|e| fail(1, &e), |_| 0),
                Err(e) => fail(e.exit_code(), &e.to_string()),
            }
        }
        Cmd::Sweep {
            workload,
            connections,
            tolerance,
            w,
            o,
        } => {
            let cfg = match resolve(&workload, &w) {
                Ok(c) => c,
                Err(e) => return fail(2, &e),
            };
            match runner::run_sweep(&workload, &cfg, &connections, tolerance, &mut log) {
                Ok(f) => emit(&f, &o).map_or_else(|e| fail(1, &e), |_| 0),
                Err((code, e)) => fail(code, &e),
            }
        }
        Cmd::Compare {
            base,
            test,
            threshold,
            json,
        } => {
            let (a, b) = match (ResultFile::read(&base), ResultFile::read(&test)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return fail(2, &e),
            };
            let c = compare(&a, &b, threshold);
            if json {
                println!("{}", serde_json::to_string_pretty(&c).expect("json"));
            } else {
                print!("{}", render(&c));
            }
            if c.has_regressions() {
                eprintln!("RESULT: REGRESSIONS DETECTED");
                1
            } else {
                0
            }
        }
    }
}

fn fail(code: i32, msg: &str) -> i32 {
    eprintln!("aorta-hw-queue: error: {msg}");
    code
}
