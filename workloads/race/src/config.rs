//! The workload's configuration: AORTA's `ReproducerConfig` (spec §8.5, same names and
//! defaults) plus the knobs of the planted race. Parsed from the recipe's `workload_config`
//! object; a wrong type or value is an error naming the key, unknown keys are warnings.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::pattern::Dtype;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Default,
    Ddp,
    Fsdp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CommPriority {
    Normal,
    High,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RaceConfig {
    pub mode: Mode,
    pub warmup_iterations: u64,
    pub verify_iterations: u64,
    pub stop_on_first_corruption: bool,
    pub log_interval: u64,
    pub h2d_tensor_size: usize,
    pub alltoall_tensor_size: usize,
    pub allreduce_tensor_size: usize,
    pub fsdp_shard_size: usize,
    pub dtype: Dtype,
    pub simulate_compute: bool,
    pub gemm_size: u64,
    /// GEMMs in each block of compute between communication points.
    pub gemm_layers: u32,
    /// Layers (fsdp) or gradient buckets (ddp with `ddp_bucketed`).
    pub num_layers: u32,
    pub shared_layer_weights: bool,
    pub ddp_bucketed: bool,
    pub reuse_buffers: bool,
    pub pin_memory: bool,
    pub h2d_prefetch: bool,
    pub same_stream_mode: bool,
    /// The planted bug: drop the event waits between producing and consuming streams.
    pub missing_sync: bool,
    /// How long the slow producer/consumer kernels hold their data (the race window), µs.
    pub race_window_us: f64,
    /// Priority of the communication stream (the `high_priority_comm` cell).
    pub comm_priority: CommPriority,
    /// A spin kernel after each collective on the comm stream, standing in for the wire time
    /// a one-rank NCCL does not have (so there is overlap for a serialising knob to lose).
    pub comm_delay_us: f64,
    /// Ranks to launch when not started by torchrun (one process per GPU).
    pub nproc: u32,
    /// Copies of every buffer that crosses streams in the fixed schedule (`missing_sync: false`):
    /// 1 restores the waits on single buffers (serialising communication with compute), 2 or
    /// more pipelines the iterations (docs/race.md, "How `fixed` works"). The planted bug always
    /// runs the single-buffered schedule.
    pub buffer_depth: u32,
}

impl Default for RaceConfig {
    fn default() -> Self {
        RaceConfig {
            mode: Mode::Default,
            warmup_iterations: 100,
            verify_iterations: 10000,
            stop_on_first_corruption: true,
            log_interval: 100,
            h2d_tensor_size: 1_000_000,
            alltoall_tensor_size: 100_000,
            allreduce_tensor_size: 100_000,
            fsdp_shard_size: 100_000,
            dtype: Dtype::Bf16,
            simulate_compute: true,
            gemm_size: 5120,
            gemm_layers: 26,
            num_layers: 4,
            shared_layer_weights: false,
            ddp_bucketed: false,
            reuse_buffers: true,
            pin_memory: true,
            h2d_prefetch: false,
            same_stream_mode: false,
            missing_sync: false,
            race_window_us: 200.0,
            comm_priority: CommPriority::Normal,
            comm_delay_us: 0.0,
            nproc: 1,
            buffer_depth: 2,
        }
    }
}

/// More copies than this only cost memory (see docs/race.md).
pub const MAX_BUFFER_DEPTH: u32 = 16;

/// AORTA fields this workload accepts but does not model (transformer compute, optimizers,
/// AMD's GPU_MAX_HW_QUEUES): setting one is a warning, not an error.
const ACCEPTED_NO_EFFECT: &[&str] = &[
    "model_dim",
    "num_heads",
    "ffn_size",
    "seq_len",
    "batch_size",
    "include_backward_compute",
    "real_backward",
    "optimizer",
    "optimizer_lr",
    "optimizer_weight_decay",
    "optimizer_betas",
    "optimizer_eps",
    "deterministic",
    "deterministic_seed",
    "gpu_max_hw_queues",
];

/// A configuration error: the key, what is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
    pub hint: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "workload_config.{}: {}", self.key, self.message)
    }
}

fn err(key: &str, message: impl Into<String>, hint: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
        hint: hint.into(),
    }
}

fn as_u64(key: &str, v: &Value) -> Result<u64, ConfigError> {
    v.as_u64().ok_or_else(|| {
        err(
            key,
            format!("expected a non-negative integer, got {v}"),
            format!("{key}: 10"),
        )
    })
}

fn as_bool(key: &str, v: &Value) -> Result<bool, ConfigError> {
    v.as_bool().ok_or_else(|| {
        err(
            key,
            format!("expected true or false, got {v}"),
            format!("{key}: true"),
        )
    })
}

fn as_f64(key: &str, v: &Value) -> Result<f64, ConfigError> {
    match v.as_f64() {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(err(
            key,
            format!("expected a number >= 0, got {v}"),
            format!("{key}: 100"),
        )),
    }
}

fn as_str<'a>(key: &str, v: &'a Value) -> Result<&'a str, ConfigError> {
    v.as_str().ok_or_else(|| {
        err(
            key,
            format!("expected a string, got {v}"),
            format!("{key}: <name>"),
        )
    })
}

fn positive(key: &str, v: &Value) -> Result<u64, ConfigError> {
    match as_u64(key, v)? {
        0 => Err(err(key, "must be at least 1", format!("{key}: 1"))),
        n => Ok(n),
    }
}

fn small(key: &str, v: &Value) -> Result<u32, ConfigError> {
    let n = positive(key, v)?;
    u32::try_from(n).map_err(|_| err(key, format!("{n} is too large"), format!("{key}: 4")))
}

impl RaceConfig {
    /// Parse `workload_config`; returns the config and the warnings to print.
    pub fn from_map(map: &Map<String, Value>) -> Result<(RaceConfig, Vec<String>), ConfigError> {
        let mut c = RaceConfig::default();
        let mut warnings = Vec::new();
        let mut depth_set = false;
        for (k, v) in map {
            let key = k.as_str();
            match key {
                "mode" => {
                    c.mode = match as_str(key, v)? {
                        "default" => Mode::Default,
                        "ddp" => Mode::Ddp,
                        "fsdp" => Mode::Fsdp,
                        o => return Err(err(key, format!("unknown mode {o:?}"), "mode: default | ddp | fsdp")),
                    }
                }
                "dtype" => {
                    let s = as_str(key, v)?;
                    c.dtype = Dtype::parse(s).ok_or_else(|| {
                        err(key, format!("unknown dtype {s:?}"), "dtype: bfloat16 | bf16 | float16 | fp16 | float32 | fp32")
                    })?
                }
                "compute_type" => match as_str(key, v)? {
                    "gemm" => {}
                    "transformer" => {
                        return Err(err(key, "transformer compute is not modelled by this workload", "compute_type: gemm"))
                    }
                    o => return Err(err(key, format!("unknown compute_type {o:?}"), "compute_type: gemm")),
                },
                "comm_priority" => {
                    c.comm_priority = match as_str(key, v)? {
                        "normal" => CommPriority::Normal,
                        "high" => CommPriority::High,
                        o => return Err(err(key, format!("unknown priority {o:?}"), "comm_priority: normal | high")),
                    }
                }
                "warmup_iterations" => c.warmup_iterations = as_u64(key, v)?,
                "verify_iterations" => c.verify_iterations = positive(key, v)?,
                "log_interval" => c.log_interval = positive(key, v)?,
                "stop_on_first_corruption" => c.stop_on_first_corruption = as_bool(key, v)?,
                "h2d_tensor_size" => c.h2d_tensor_size = positive(key, v)? as usize,
                "alltoall_tensor_size" => c.alltoall_tensor_size = positive(key, v)? as usize,
                "allreduce_tensor_size" => c.allreduce_tensor_size = positive(key, v)? as usize,
                "fsdp_shard_size" => c.fsdp_shard_size = positive(key, v)? as usize,
                "simulate_compute" => c.simulate_compute = as_bool(key, v)?,
                "gemm_size" => c.gemm_size = positive(key, v)?,
                "gemm_layers" => c.gemm_layers = small(key, v)?,
                "num_layers" => c.num_layers = small(key, v)?,
                "shared_layer_weights" => c.shared_layer_weights = as_bool(key, v)?,
                "ddp_bucketed" => c.ddp_bucketed = as_bool(key, v)?,
                "reuse_buffers" => c.reuse_buffers = as_bool(key, v)?,
                "pin_memory" => c.pin_memory = as_bool(key, v)?,
                "h2d_prefetch" => c.h2d_prefetch = as_bool(key, v)?,
                "same_stream_mode" => c.same_stream_mode = as_bool(key, v)?,
                "missing_sync" => c.missing_sync = as_bool(key, v)?,
                "race_window_us" => c.race_window_us = as_f64(key, v)?,
                "comm_delay_us" => c.comm_delay_us = as_f64(key, v)?,
                "nproc" => c.nproc = small(key, v)?,
                "buffer_depth" => {
                    c.buffer_depth = small(key, v)?;
                    depth_set = true;
                }
                "steps" => {}
                _ if key.starts_with("_aorta_") => {}
                _ if ACCEPTED_NO_EFFECT.contains(&key) => {
                    warnings.push(format!("race: workload_config key {key:?} is accepted for AORTA compatibility but has no effect here"))
                }
                _ => warnings.push(format!("race: ignoring unknown workload_config key {key:?}")),
            }
        }
        if c.race_window_us > 1e6 {
            return Err(err(
                "race_window_us",
                "must be at most 1 s (1e6 µs)",
                "race_window_us: 200",
            ));
        }
        if c.gemm_size > 32768 {
            return Err(err("gemm_size", "must be at most 32768", "gemm_size: 4096"));
        }
        if c.buffer_depth > MAX_BUFFER_DEPTH {
            return Err(err(
                "buffer_depth",
                format!("must be at most {MAX_BUFFER_DEPTH}"),
                "buffer_depth: 2",
            ));
        }
        if c.h2d_prefetch && c.mode != Mode::Ddp {
            warnings.push("race: h2d_prefetch only applies to mode ddp".into());
        }
        if depth_set && c.missing_sync {
            warnings.push("race: buffer_depth only applies to the fixed schedule (missing_sync: false); the planted bug runs single-buffered".into());
        }
        Ok((c, warnings))
    }

    /// Whether the fixed, pipelined schedule runs (no planted bug, at least two buffers).
    pub fn pipelined(&self) -> bool {
        !self.missing_sync && self.buffer_depth >= 2
    }

    /// Iterations configured in all (warmup + verify), as AORTA reports them.
    pub fn configured_iterations(&self) -> u64 {
        self.warmup_iterations + self.verify_iterations
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<(RaceConfig, Vec<String>), ConfigError> {
        RaceConfig::from_map(v.as_object().unwrap())
    }

    #[test]
    fn defaults_follow_the_spec() {
        let (c, w) = parse(json!({})).unwrap();
        assert!(w.is_empty());
        assert_eq!((c.warmup_iterations, c.verify_iterations), (100, 10000));
        assert_eq!(
            (c.h2d_tensor_size, c.alltoall_tensor_size, c.fsdp_shard_size),
            (1_000_000, 100_000, 100_000)
        );
        assert_eq!(
            (c.dtype, c.gemm_size, c.gemm_layers, c.num_layers),
            (Dtype::Bf16, 5120, 26, 4)
        );
        assert!(c.stop_on_first_corruption && !c.missing_sync && c.reuse_buffers && c.pin_memory);
        assert_eq!(c.buffer_depth, 2, "fixed is double-buffered by default");
        assert!(c.pipelined());
    }

    #[test]
    fn buffer_depth_is_checked_and_only_shapes_the_fix() {
        let (c, w) = parse(json!({"buffer_depth": 1})).unwrap();
        assert!(w.is_empty() && !c.pipelined());
        let (c, w) = parse(json!({"buffer_depth": 4, "missing_sync": true})).unwrap();
        assert!(!c.pipelined(), "the planted bug stays single-buffered");
        assert!(w[0].contains("buffer_depth"));
        let (_, w) = parse(json!({"missing_sync": true})).unwrap();
        assert!(
            w.is_empty(),
            "no warning when the depth is left at its default"
        );
        for bad in [
            json!({"buffer_depth": 0}),
            json!({"buffer_depth": 17}),
            json!({"buffer_depth": 2.5}),
        ] {
            assert_eq!(parse(bad).unwrap_err().key, "buffer_depth");
        }
    }

    #[test]
    fn reads_every_kind_of_value() {
        let (c, _) = parse(
            json!({"mode": "fsdp", "dtype": "fp32", "missing_sync": true, "race_window_us": 50.5,
            "comm_priority": "high", "verify_iterations": 7, "nproc": 2}),
        )
        .unwrap();
        assert_eq!(
            (c.mode, c.dtype, c.comm_priority),
            (Mode::Fsdp, Dtype::F32, CommPriority::High)
        );
        assert!(c.missing_sync);
        assert_eq!(
            (c.race_window_us, c.verify_iterations, c.nproc),
            (50.5, 7, 2)
        );
    }

    #[test]
    fn bad_values_name_the_key_with_a_hint() {
        for (v, key) in [
            (json!({"mode": "zero"}), "mode"),
            (json!({"dtype": "int8"}), "dtype"),
            (json!({"compute_type": "transformer"}), "compute_type"),
            (json!({"verify_iterations": 0}), "verify_iterations"),
            (json!({"missing_sync": "yes"}), "missing_sync"),
            (json!({"race_window_us": -1}), "race_window_us"),
            (json!({"gemm_layers": 1.5}), "gemm_layers"),
            (json!({"comm_priority": "urgent"}), "comm_priority"),
        ] {
            let e = parse(v).unwrap_err();
            assert_eq!(e.key, key);
            assert!(!e.hint.is_empty() && e.to_string().contains(key));
        }
    }

    #[test]
    fn unknown_keys_warn_and_aorta_keys_pass() {
        let (_, w) =
            parse(json!({"colour": 1, "steps": 3, "_aorta_collect": [], "optimizer": "adamw"}))
                .unwrap();
        assert_eq!(w.len(), 2);
        assert!(w[0].contains("colour") && w[1].contains("optimizer"));
    }
}
