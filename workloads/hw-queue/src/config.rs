//! One flat, versioned set of knobs shared by every workload; each workload starts from its own
//! defaults and reads the keys it lists (`aorta-hw-queue list --verbose`). Overrides come from
//! CLI flags, `--set key=value`, a JSON file, or the workload protocol's `config` object, and go
//! through serde with `deny_unknown_fields`, so a misspelt key is an error.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::Dtype;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Kernel j of every stream before kernel j+1 of any stream.
    Breadth,
    /// All (dependent) kernels of stream 0, then of stream 1, ...
    Depth,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Breadth => "breadth",
            Order::Depth => "depth",
        }
    }
}

impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "breadth" | "breadth-first" | "bf" => Ok(Order::Breadth),
            "depth" | "depth-first" | "df" => Ok(Order::Depth),
            _ => Err(format!("unknown launch order {s:?} (breadth|depth)")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timer {
    Globaltimer,
    Clock64,
}

/// Where per-stream busy intervals come from. `device`: the kernels' own `%globaltimer` stamps
/// (adds nothing to the queues); `events`: a timing event before each stream's first and after
/// its last kernel (what a framework would do; the event is a queue entry too); `both`: one
/// pass each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    Device,
    Events,
    Both,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Stream counts to measure.
    pub streams: Vec<u32>,
    pub orders: Vec<Order>,
    pub iterations: u32,
    pub warmup: u32,
    /// Dependent kernels per stream (spin_streams).
    pub kernels_per_stream: u32,
    /// Duration of one spin kernel.
    pub kernel_ms: f64,
    /// Threads per spin block.
    pub threads: u32,
    pub timer: Timer,
    pub timing: Timing,
    /// Launch a tiny kernel on one more stream while the load runs and time it from its
    /// host-side launch.
    pub probe: bool,
    /// GEMM shape M, N, K.
    pub gemm: [u64; 3],
    pub dtype: Dtype,
    /// cuBLASLt heuristic candidates timed; the best is used.
    pub algos: u32,
    /// Tiny ops per large GEMM (hetero_kernels).
    pub ratio: u32,
    /// Floats touched by one tiny kernel.
    pub tiny_elems: u32,
    pub ops_per_stream: u32,
    /// Waves of the long kernel (priority_convoy).
    pub waves: u32,
    /// Duration of one block of the long kernel.
    pub block_ms: f64,
    /// Host delay between the long kernel's launch and the probe's.
    pub delay_ms: f64,
    pub samples: u32,
    /// Priority of the high-priority stream (default: the device's greatest).
    pub priority: Option<i32>,
    pub copy_mib: u32,
    pub layers: u32,
    pub batch: u32,
    pub hidden: u32,
    /// Kernel launches timed by launch_overhead.
    pub launches: u32,
    pub device: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            streams: vec![1, 2, 4, 8, 16, 32, 64],
            orders: vec![Order::Breadth, Order::Depth],
            iterations: 3,
            warmup: 1,
            kernels_per_stream: 2,
            kernel_ms: 10.0,
            threads: 32,
            timer: Timer::Globaltimer,
            timing: Timing::Device,
            probe: true,
            gemm: [4096, 4096, 4096],
            dtype: Dtype::F32,
            algos: 8,
            ratio: 10,
            tiny_elems: 1024,
            ops_per_stream: 100,
            waves: 40,
            block_ms: 1.0,
            delay_ms: 2.0,
            samples: 20,
            priority: None,
            copy_mib: 256,
            layers: 3,
            batch: 256,
            hidden: 4096,
            launches: 20_000,
            device: 0,
        }
    }
}

impl Config {
    /// Merge `overrides` (a JSON object of Config keys) into `self`.
    pub fn apply(&mut self, overrides: &Map<String, Value>) -> Result<(), String> {
        if overrides.is_empty() {
            return Ok(());
        }
        let mut v = serde_json::to_value(&*self).map_err(|e| e.to_string())?;
        let obj = v.as_object_mut().expect("Config is an object");
        for (k, val) in overrides {
            obj.insert(k.clone(), val.clone());
        }
        *self = serde_json::from_value(v).map_err(|e| format!("bad workload config: {e}"))?;
        self.validate()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.streams.is_empty() || self.streams.iter().any(|&s| s == 0 || s > 256) {
            return Err(format!("streams must be 1..=256, got {:?}", self.streams));
        }
        if self.orders.is_empty() {
            return Err("orders must not be empty".into());
        }
        if self.iterations == 0 || self.samples == 0 || self.kernels_per_stream == 0 {
            return Err("iterations, samples and kernels_per_stream must be > 0".into());
        }
        if !(self.kernel_ms > 0.0 && self.block_ms > 0.0 && self.delay_ms >= 0.0) {
            return Err("kernel_ms and block_ms must be > 0, delay_ms >= 0".into());
        }
        if self.gemm.contains(&0) || self.threads == 0 || self.threads > 1024 {
            return Err("gemm dims must be > 0 and threads 1..=1024".into());
        }
        Ok(())
    }
}

/// Parse `key=value` into a JSON override; the value is JSON when it parses as JSON
/// (`streams=[1,2]`, `probe=false`, `kernel_ms=5`), else a string (`dtype=bf16`), and a comma list
/// of numbers or words becomes an array (`streams=1,2,4`, `orders=breadth,depth`).
pub fn parse_set(kv: &str) -> Result<(String, Value), String> {
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| format!("--set wants KEY=VALUE, got {kv:?}"))?;
    let v = v.trim();
    let value = if let Ok(j) = serde_json::from_str::<Value>(v) {
        j
    } else if v.contains(',') {
        Value::Array(
            v.split(',')
                .map(|p| {
                    serde_json::from_str::<Value>(p.trim())
                        .unwrap_or_else(|_| Value::String(p.trim().into()))
                })
                .collect(),
        )
    } else {
        Value::String(v.into())
    };
    Ok((k.trim().replace('-', "_"), value))
}

/// `1,2,4` → [1,2,4].
pub fn parse_list<T: FromStr>(s: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim().parse::<T>().map_err(|e| format!("{p:?}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_merge_and_reject_unknown_keys() {
        let mut c = Config::default();
        let mut m = Map::new();
        for kv in [
            "streams=1,8",
            "orders=depth",
            "kernel_ms=5",
            "dtype=bf16",
            "probe=false",
        ] {
            let (k, v) = parse_set(kv).unwrap();
            m.insert(k, v);
        }
        // A single word is a string, which serde does not take for a list: wrap it.
        m.insert("orders".into(), serde_json::json!(["depth"]));
        c.apply(&m).unwrap();
        assert_eq!(c.streams, vec![1, 8]);
        assert_eq!(c.orders, vec![Order::Depth]);
        assert_eq!(c.kernel_ms, 5.0);
        assert_eq!(c.dtype, Dtype::Bf16);
        assert!(!c.probe);
        let mut bad = Map::new();
        bad.insert("kernal_ms".into(), serde_json::json!(3));
        assert!(c.apply(&bad).unwrap_err().contains("kernal_ms"));
        let mut zero = Map::new();
        zero.insert("streams".into(), serde_json::json!([0]));
        assert!(Config::default().apply(&zero).is_err());
    }

    #[test]
    fn lists_parse() {
        assert_eq!(parse_list::<u32>("1, 2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(
            parse_list::<Order>("bf,depth").unwrap(),
            vec![Order::Breadth, Order::Depth]
        );
        assert!(parse_list::<u32>("1,x").is_err());
    }
}
