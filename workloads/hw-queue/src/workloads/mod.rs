//! The workloads: AORTA's P0 set (hetero_kernels, tiny_kernel_stress, large_gemm_only) and
//! the patterns that need no framework. Each returns points; the caller wraps them in a run.

pub mod common;
mod convoy;
mod gemm;
mod overlap;
mod spin;

use serde_json::{json, Value};

use crate::backend::{Dtype, Gpu, Result};
use crate::config::{Config, Order, Timing};
use crate::results::Point;

pub struct WorkloadInfo {
    pub name: &'static str,
    pub category: &'static str,
    pub description: &'static str,
    /// Config keys this workload reads.
    pub keys: &'static [&'static str],
}

pub const WORKLOADS: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "spin_streams",
        category: "queues",
        description: "N streams × k dependent one-block spin kernels, breadth- or depth-first, plus a tiny \
                      probe kernel on one more stream: concurrency and false dependencies (the sweep's default)",
        keys: &["streams", "orders", "kernels_per_stream", "kernel_ms", "threads", "timer", "timing", "probe", "iterations", "warmup"],
    },
    WorkloadInfo {
        name: "hetero_kernels",
        category: "p0",
        description: "AORTA P0: first ⌊n/2⌋ streams one large GEMM each, the rest `ratio` tiny kernels per GEMM; \
                      GFLOPS as AORTA computes them, plus per-stream busy, concurrency and tiny-kernel latency",
        keys: &["streams", "orders", "gemm", "dtype", "algos", "ratio", "tiny_elems", "iterations", "warmup"],
    },
    WorkloadInfo {
        name: "tiny_kernel_stress",
        category: "p0",
        description: "AORTA P0: every stream `ops_per_stream` tiny kernels; launch cost, kernels/s, latency from launch",
        keys: &["streams", "orders", "ops_per_stream", "tiny_elems", "iterations", "warmup"],
    },
    WorkloadInfo {
        name: "large_gemm_only",
        category: "p0",
        description: "AORTA P0: one large GEMM per stream; TFLOP/s against cuBLASLt's best single-stream algorithm",
        keys: &["streams", "gemm", "dtype", "algos", "iterations", "warmup"],
    },
    WorkloadInfo {
        name: "priority_convoy",
        category: "latency",
        description: "a tiny kernel launched while a multi-wave kernel fills every SM, on a normal and on a \
                      high-priority stream: latency from the host-side launch (p50/p99) vs the long kernel's rest",
        keys: &["waves", "block_ms", "threads", "delay_ms", "samples", "priority"],
    },
    WorkloadInfo {
        name: "prefill_decode",
        category: "latency",
        description: "large prefill GEMMs on one stream, decode steps (small GEMMs + marker) on another, normal \
                      and high priority: token latency p50/p99 and prefill throughput",
        keys: &["gemm", "dtype", "batch", "hidden", "layers", "samples", "priority", "algos"],
    },
    WorkloadInfo {
        name: "copy_overlap",
        category: "copy",
        description: "H2D, D2H and D2D copies on side streams while GEMMs run: bandwidths alone and together, \
                      copy-engine overlap",
        keys: &["copy_mib", "gemm", "dtype", "iterations", "algos"],
    },
    WorkloadInfo {
        name: "graph_subgraphs",
        category: "graphs",
        description: "split → one MLP subgraph per stream → aggregate, launched eagerly and as one CUDA graph: \
                      host submit time and GPU time per iteration",
        keys: &["streams", "layers", "batch", "hidden", "dtype", "iterations", "warmup"],
    },
    WorkloadInfo {
        name: "launch_overhead",
        category: "launch",
        description: "host time per cuLaunchKernel in a tight loop (empty, 2-arg and 5-arg kernels), per event \
                      record, and per kernel inside a graph launch",
        keys: &["launches"],
    },
];

pub fn find(name: &str) -> Option<&'static WorkloadInfo> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// The workload's own defaults as JSON overrides of `Config::default()`.
pub fn default_overrides(name: &str) -> Value {
    match name {
        "hetero_kernels" => {
            json!({"streams": [2, 4, 8, 16, 32], "orders": ["breadth"], "iterations": 20, "warmup": 3})
        }
        "tiny_kernel_stress" => {
            json!({"streams": [1, 4, 16, 64], "orders": ["breadth", "depth"], "tiny_elems": 256, "iterations": 10})
        }
        "large_gemm_only" => {
            json!({"streams": [1, 2, 4], "gemm": [8192, 8192, 8192], "iterations": 10, "warmup": 2})
        }
        "priority_convoy" => json!({"threads": 1024, "streams": [1]}),
        "prefill_decode" => {
            json!({"gemm": [8192, 8192, 8192], "dtype": "bf16", "batch": 32, "hidden": 8192, "layers": 8, "samples": 100})
        }
        "copy_overlap" => json!({"gemm": [8192, 8192, 8192], "dtype": "bf16", "iterations": 4}),
        "graph_subgraphs" => {
            json!({"streams": [4, 10], "dtype": "bf16", "batch": 256, "hidden": 4096, "iterations": 50, "warmup": 5})
        }
        "launch_overhead" => json!({"streams": [1]}),
        _ => json!({}),
    }
}

pub fn config_for(name: &str) -> Config {
    let mut c = Config::default();
    if let Value::Object(m) = default_overrides(name) {
        c.apply(&m).expect("built-in defaults are valid");
    }
    c
}

pub fn run(
    name: &str,
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    match name {
        "spin_streams" => spin::spin_streams(cfg, gpu, log),
        "tiny_kernel_stress" => spin::tiny_kernel_stress(cfg, gpu, log),
        "launch_overhead" => spin::launch_overhead(cfg, gpu, log),
        "hetero_kernels" => gemm::hetero_kernels(cfg, gpu, log),
        "large_gemm_only" => gemm::large_gemm_only(cfg, gpu, log),
        "priority_convoy" => convoy::priority_convoy(cfg, gpu, log),
        "prefill_decode" => convoy::prefill_decode(cfg, gpu, log),
        "copy_overlap" => overlap::copy_overlap(cfg, gpu, log),
        "graph_subgraphs" => overlap::graph_subgraphs(cfg, gpu, log),
        other => Err(crate::backend::GpuError::call(
            "workload",
            format!("unknown workload {other:?}"),
        )),
    }
}

/// Labels a point by its order when the workload takes several.
pub fn order_label(o: Order) -> String {
    o.as_str().to_string()
}

pub fn timing_passes(t: Timing) -> (bool, bool) {
    match t {
        Timing::Device => (true, false),
        Timing::Events => (false, true),
        Timing::Both => (true, true),
    }
}

pub fn dtype_name(d: Dtype) -> &'static str {
    match d {
        Dtype::F32 => "f32",
        Dtype::Tf32 => "tf32",
        Dtype::Bf16 => "bf16",
        Dtype::F16 => "f16",
    }
}
