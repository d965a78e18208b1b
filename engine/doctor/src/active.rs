//! The active checks (level medium): run through the workload protocol by the
//! `aorta-workload-gpu_doctor` executable (workloads/hw-queue/src/doctor.rs), one trial per
//! GPU, then judged here against the SKU table and the link's limit.
//!
//! The workload only measures and compares bits; every threshold lives here, so a stand-in
//! workload answering in the protocol (tests/fixtures/workloads/) exercises every fail path on
//! a machine without a GPU.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::sku::{self, Sku};
use crate::verdict::{remedy, Check};

/// The workload's name (`aorta-workload-gpu_doctor`).
pub const WORKLOAD: &str = "gpu_doctor";
/// How long one GPU's active checks may take before the trial is killed.
pub const ACTIVE_TIMEOUT: Duration = Duration::from_secs(120);

/// What one GPU's trial is asked to do (the `config` of CONFIG.json).
#[derive(Debug, Clone)]
pub struct ActiveConfig {
    /// CUDA ordinal, in PCI bus order (the child runs with `CUDA_DEVICE_ORDER=PCI_BUS_ID`, so
    /// it is nvidia-smi's index).
    pub device: usize,
    /// GEMM edge (m = n = k).
    pub gemm_n: u32,
    /// Fraction of free device memory the pattern test covers.
    pub memtest_fraction: f64,
    /// Bytes per pinned copy.
    pub copy_bytes: u64,
    /// The multi-GPU trial: every ordered pair of these ordinals (empty: the per-GPU checks).
    pub peers: Vec<usize>,
    /// The collective trial: one NCCL rank per ordinal (empty: not this trial).
    pub allreduce: Vec<usize>,
}

impl Default for ActiveConfig {
    fn default() -> Self {
        ActiveConfig {
            device: 0,
            gemm_n: 8192,
            memtest_fraction: 0.5,
            copy_bytes: 256 << 20,
            peers: Vec::new(),
            allreduce: Vec::new(),
        }
    }
}

impl ActiveConfig {
    pub fn to_config_json(&self, trial_dir: &Path) -> Value {
        if !self.allreduce.is_empty() {
            return json!({
                "protocol": 1, "workload": WORKLOAD, "cell": "doctor-nccl", "trial_index": 0,
                "steps": 1, "config": {"device": self.device, "allreduce": self.allreduce},
                "trial_dir": trial_dir.display().to_string(),
            });
        }
        if !self.peers.is_empty() {
            return json!({
                "protocol": 1, "workload": WORKLOAD, "cell": "doctor-p2p", "trial_index": 0,
                "steps": 1, "config": {"device": self.device, "peers": self.peers},
                "trial_dir": trial_dir.display().to_string(),
            });
        }
        json!({
            "protocol": 1, "workload": WORKLOAD, "cell": "doctor", "trial_index": 0, "steps": 1,
            "config": {
                "device": self.device,
                "gemm_n": self.gemm_n,
                "memtest_fraction": self.memtest_fraction,
                "copy_bytes": self.copy_bytes,
            },
            "trial_dir": trial_dir.display().to_string(),
        })
    }
}

/// Runs one trial of the workload at `exe` in `trial_dir`; the RESULT.json, or why there is
/// none.
pub fn run_trial(exe: &Path, cfg: &ActiveConfig, trial_dir: &Path) -> Result<Value, String> {
    let config = trial_dir.join("CONFIG.json");
    let result = trial_dir.join("RESULT.json");
    std::fs::write(&config, cfg.to_config_json(trial_dir).to_string())
        .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    let log = |n: &str| std::fs::File::create(trial_dir.join(n)).map(Stdio::from);
    let mut cmd = Command::new(exe);
    if let Some(p) = library_path() {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    let mut child = cmd
        .args(["run", "--config"])
        .arg(&config)
        .arg("--result")
        .arg(&result)
        .current_dir(trial_dir)
        .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        .stdin(Stdio::null())
        .stdout(log("stdout.log").map_err(|e| e.to_string())?)
        .stderr(log("stderr.log").map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() > ACTIVE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not finish within {} s",
                    exe.display(),
                    ACTIVE_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let text = std::fs::read_to_string(&result).map_err(|e| {
        let tail = std::fs::read_to_string(trial_dir.join("stderr.log")).unwrap_or_default();
        format!(
            "{} exited with {status} and wrote no result ({e}): {}",
            exe.display(),
            tail.lines().last().unwrap_or("")
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", result.display()))
}

/// `LD_LIBRARY_PATH` for the workload: the caller's, then the CUDA toolkit's lib64
/// (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`) where cuBLAS usually is; the workload
/// dlopens it by name. `None` when there is nothing to add.
fn library_path() -> Option<std::ffi::OsString> {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let before = dirs.len();
    for root in ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(std::path::PathBuf::from)
        .chain([std::path::PathBuf::from("/usr/local/cuda")])
    {
        let lib = root.join("lib64");
        if lib.is_dir() && !dirs.contains(&lib) {
            dirs.push(lib);
        }
    }
    (dirs.len() > before)
        .then(|| std::env::join_paths(dirs).ok())
        .flatten()
}

/// The active checks' ids, for "not applicable" rows when they cannot run.
pub const IDS: &[&str] = &[
    "gemm.correctness",
    "gemm.throughput",
    "copy.h2d",
    "copy.d2h",
    "memtest.patterns",
];

/// Every active check, not applicable with `reason` (no GPU, workload missing).
pub fn not_applicable(gpu: Option<&str>, reason: &str) -> Vec<Check> {
    IDS.iter()
        .map(|id| Check::new(id, gpu, "aorta-workload-gpu_doctor").not_applicable(reason))
        .collect()
}

/// Judges the collective trial's `allreduce` metrics (nccl-tests' `-c 1` idea): every element of
/// every rank's output must be the exact sum; with two or more ranks the bus bandwidth must
/// reach [`sku::COPY_WARN_FRACTION`] of the slowest GPU's PCIe link (`floor_gbs`), the least a
/// path between GPUs should give. No NCCL library is not applicable (a node may serve
/// workloads that never use it), with where it was looked for.
pub fn evaluate_allreduce(result: &Value, floor_gbs: Option<f64>) -> Check {
    let c = Check::new(
        "nccl.allreduce",
        None,
        "aorta-workload-gpu_doctor: NCCL fp32 sum all-reduce, one rank per GPU, every element checked",
    );
    let why = || {
        result
            .pointer("/failure_details/0/error")
            .and_then(Value::as_str)
            .unwrap_or("no detail")
            .to_owned()
    };
    if result.get("main_work_started").and_then(Value::as_bool) == Some(false) {
        return c.not_applicable(format!("the check could not start: {}", why()));
    }
    let Some(m) = result.pointer("/metrics/allreduce") else {
        return c.fail(format!(
            "the all-reduce did not complete: {}; {}",
            why(),
            remedy::RESET
        ));
    };
    if let Some(u) = m.get("unavailable").and_then(Value::as_str) {
        return c.not_applicable(u.to_owned());
    }
    let ranks = m["ranks"].as_u64().unwrap_or(0);
    let bad = m["mismatches"].as_u64().unwrap_or(1);
    let busbw = f(m, "/busbw_gbs").unwrap_or(0.0);
    let version = m["nccl_version"]
        .as_u64()
        .map(nccl_version)
        .unwrap_or_else(|| "?".into());
    let mib = m["bytes"].as_u64().unwrap_or(0) >> 20;
    let c = if ranks >= 2 {
        c.measured(format!(
            "{ranks} ranks, bus {busbw:.1} GB/s (algorithm {:.1}), {mib} MiB, NCCL {version}",
            f(m, "/algbw_gbs").unwrap_or(0.0)
        ))
    } else {
        c.measured(format!(
            "1 rank, {mib} MiB, NCCL {version} (bandwidth between GPUs needs two)"
        ))
    };
    let floor = floor_gbs.filter(|_| ranks >= 2);
    let c = match floor {
        Some(fl) => c.threshold(format!(
            "exact sums; bus ≥ {:.1} GB/s (60% of the PCIe link)",
            fl * sku::COPY_WARN_FRACTION
        )),
        None => c.threshold("exact sums"),
    };
    if bad > 0 {
        let at = &m["first_bad"];
        c.fail(format!(
            "the all-reduce returned {bad} wrong element(s) (first: rank {}, index {}): drain the node; confirm with nccl-tests' all_reduce_perf -c 1; check NVLink / the PCIe switch (nvidia-smi nvlink -e); RMA if it recurs",
            at["rank"], at["index"]
        ))
    } else if floor.is_some_and(|fl| busbw < fl * sku::COPY_WARN_FRACTION) {
        c.warn("the all-reduce is slow: check nvidia-smi topo -m, nvidia-smi nvlink --status, NCCL_P2P_DISABLE / NCCL_SHM_DISABLE in the environment, ACS/IOMMU on the PCIe switch")
    } else {
        c.pass()
    }
}

/// NCCL's version code (`ncclGetVersion`: major × 10000 + minor × 100 + patch since 2.9) as text.
fn nccl_version(code: u64) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

/// Judges the multi-GPU trial's `p2p` metrics: every ordered pair's copy must be bit-exact;
/// its bandwidth must reach [`sku::COPY_WARN_FRACTION`] of the slower end's PCIe link limit
/// (`floor_gbs`), the least a peer path should give (NVLink gives several times more); a pair
/// without peer access warns (its copies go through host memory).
pub fn evaluate_p2p(result: &Value, floor_gbs: Option<f64>) -> Check {
    let c = Check::new(
        "p2p.bandwidth",
        None,
        "aorta-workload-gpu_doctor: cuMemcpyPeer between every ordered pair, every word checked",
    );
    if result.get("main_work_started").and_then(Value::as_bool) == Some(false) {
        let why = result
            .pointer("/failure_details/0/error")
            .and_then(Value::as_str)
            .unwrap_or("no detail");
        return c.not_applicable(format!("the check could not start: {why}"));
    }
    let Some(pairs) = result
        .pointer("/metrics/p2p/pairs")
        .and_then(Value::as_array)
    else {
        let why = result
            .pointer("/failure_details/0/error")
            .and_then(Value::as_str)
            .unwrap_or("no pairs measured");
        return c.fail(format!(
            "the peer copies did not complete: {why}; {}",
            remedy::RESET
        ));
    };
    let pair = |p: &Value| format!("{}→{}", p["from"], p["to"]);
    let slowest = pairs.iter().min_by(|a, b| {
        f(a, "/gbs")
            .unwrap_or(0.0)
            .total_cmp(&f(b, "/gbs").unwrap_or(0.0))
    });
    let Some(slowest) = slowest else {
        return c.not_applicable("no pair measured");
    };
    let min = f(slowest, "/gbs").unwrap_or(0.0);
    let max = pairs
        .iter()
        .filter_map(|p| f(p, "/gbs"))
        .fold(0.0, f64::max);
    let c = c.measured(format!(
        "{} pairs, slowest {} {min:.1} GB/s, fastest {max:.1} GB/s",
        pairs.len(),
        pair(slowest)
    ));
    let c = match floor_gbs {
        Some(fl) => c.threshold(format!(
            "bit-exact; ≥ {:.1} GB/s per pair (60% of the PCIe link)",
            fl * sku::COPY_WARN_FRACTION
        )),
        None => c.threshold("bit-exact"),
    };
    let bad: Vec<String> = pairs
        .iter()
        .filter(|p| p["mismatches"].as_u64().unwrap_or(1) > 0)
        .map(pair)
        .collect();
    let no_peer: Vec<String> = pairs
        .iter()
        .filter(|p| p["peer_access"] == false)
        .map(pair)
        .collect();
    if !bad.is_empty() {
        c.fail(format!("peer copies returned wrong data ({}): drain the node, reset the GPUs; check NVLink / the PCIe switch; RMA if it recurs", bad.join(", ")))
    } else if floor_gbs.is_some_and(|fl| min < fl * sku::COPY_WARN_FRACTION) {
        c.warn(format!("peer copies {} are slow: check nvidia-smi topo -m, nvidia-smi nvlink --status, ACS/IOMMU settings on the PCIe switch", pair(slowest)))
    } else if !no_peer.is_empty() {
        c.warn(format!("no peer access between {}: copies go through host memory; check nvidia-smi topo -p2p r, ACS and IOMMU", no_peer.join(", ")))
    } else {
        c.pass()
    }
}

fn f(v: &Value, p: &str) -> Option<f64> {
    v.pointer(p).and_then(Value::as_f64)
}

/// Judges one GPU's RESULT.json. `sku`: the expected figures (None: throughput is reported,
/// not judged); `link`: (gen, width) the copy bandwidth is judged against (the link's maximum,
/// so a downtrained link shows here too).
pub fn evaluate(
    result: &Value,
    gpu: &str,
    sku: Option<Sku>,
    link: Option<(u32, u32)>,
) -> Vec<Check> {
    let src = "aorta-workload-gpu_doctor";
    let started = result.get("main_work_started").and_then(Value::as_bool) != Some(false);
    let first_error = result
        .pointer("/failure_details/0/error")
        .and_then(Value::as_str)
        .unwrap_or("no detail")
        .to_owned();
    if !started {
        return not_applicable(
            Some(gpu),
            &format!("the checks could not start: {first_error}"),
        );
    }
    let m = result.get("metrics").cloned().unwrap_or(Value::Null);
    let mut out = Vec::new();
    if let Some(why) = m.pointer("/gemm/unavailable").and_then(Value::as_str) {
        for id in ["gemm.correctness", "gemm.throughput"] {
            out.push(
                Check::new(id, Some(gpu), src)
                    .not_applicable(format!("the GEMM could not run here: {why}")),
            );
        }
    }

    let gemm_ran = m.pointer("/gemm/unavailable").is_none();
    // GEMM correctness: integer-valued inputs make the exact product representable, so any
    // difference is a wrong bit, not rounding.
    let gc = Check::new(
        "gemm.correctness",
        Some(gpu),
        &format!("{src}: cuBLAS bf16 GEMM vs fp64 host reference"),
    )
    .threshold("0 mismatching elements");
    if gemm_ran {
        out.push(match m.get("gemm") {
        None => gc.fail(format!("the GEMM did not complete: {first_error}; {}", remedy::RESET)),
        Some(g) => {
            let n = g.get("mismatches").and_then(Value::as_u64).unwrap_or(u64::MAX);
            let checked = g.get("checked").and_then(Value::as_u64).unwrap_or(0);
            let gc = gc.measured(format!("{n} of {checked} sampled elements differ"));
            if n == 0 && checked > 0 {
                gc.pass()
            } else {
                let at = g.get("first_mismatch").map(Value::to_string).unwrap_or_default();
                gc.fail(format!(
                    "the GPU computed a wrong GEMM result (first mismatch {at}): {}; run DCGM level 3 or file an RMA if it recurs",
                    remedy::RESET
                ))
            }
        }
    });
        let gt = Check::new(
            "gemm.throughput",
            Some(gpu),
            &format!("{src}: cuBLAS bf16 GEMM, timed by CUDA events"),
        );
        out.push(match (f(&m, "/gemm/tflops"), sku) {
        (None, _) => gt.not_applicable("no throughput measured"),
        (Some(t), None) => gt
            .measured(format!("{t:.1} TFLOP/s"))
            .not_applicable("GPU model not in the SKU table (crate aorta-doctor, sku.rs): figure not judged"),
        (Some(t), Some(s)) => {
            let warn = s.bf16_dense_tflops * sku::GEMM_WARN_FRACTION;
            let fail = s.bf16_dense_tflops * sku::GEMM_FAIL_FRACTION;
            let gt = gt.measured(format!("{t:.1} TFLOP/s ({:.0}% of {} dense bf16 peak {:.0})", 100.0 * t / s.bf16_dense_tflops, s.name, s.bf16_dense_tflops))
                .threshold(format!("≥ {warn:.0} TFLOP/s (warn), ≥ {fail:.0} (fail)"));
            let why = "check clocks and power (nvidia-smi -q -d PERFORMANCE,POWER: power cap, clocks event reasons), application clocks (nvidia-smi -rac) and other processes on the GPU";
            if t < fail {
                gt.fail(format!("GEMM far below the model's expectation: {why}"))
            } else if t < warn {
                gt.warn(format!("GEMM below the model's expectation: {why}"))
            } else {
                gt.pass()
            }
        }
    });
    }
    let limit = link.and_then(|(g, w)| sku::pcie_limit_gbs(g, w));
    for (id, key, dir) in [
        ("copy.h2d", "h2d_gbs", "host to device"),
        ("copy.d2h", "d2h_gbs", "device to host"),
    ] {
        let c = Check::new(id, Some(gpu), &format!("{src}: pinned cuMemcpy {dir}"));
        out.push(match (f(&m, &format!("/copy/{key}")), limit) {
            (None, _) => c.not_applicable("no copy measured"),
            (Some(b), None) => c.measured(format!("{b:.1} GB/s")).not_applicable("the link's generation and width are unknown: figure not judged"),
            (Some(b), Some(l)) => {
                let (gen, width) = link.unwrap_or((0, 0));
                let c = c
                    .measured(format!("{b:.1} GB/s ({:.0}% of Gen{gen} x{width}'s {l:.1})", 100.0 * b / l))
                    .threshold(format!("≥ {:.1} GB/s (warn), ≥ {:.1} (fail)", l * sku::COPY_WARN_FRACTION, l * sku::COPY_FAIL_FRACTION));
                let why = format!("{dir} copies are slow for the link: check the link under load (pcie.link), the NUMA placement (nvidia-smi topo -m) and IOMMU settings; {}", remedy::RISER);
                if b < l * sku::COPY_FAIL_FRACTION {
                    c.fail(why)
                } else if b < l * sku::COPY_WARN_FRACTION {
                    c.warn(why)
                } else {
                    c.pass()
                }
            }
        });
    }
    let mt = Check::new(
        "memtest.patterns",
        Some(gpu),
        &format!("{src}: PTX write/verify kernels over a fraction of free memory"),
    )
    .threshold("0 mismatching words");
    out.push(match m.get("memtest") {
        None => mt.fail(format!("the memory test did not complete: {first_error}; {}", remedy::RESET)),
        Some(t) => {
            let n = t.get("mismatches").and_then(Value::as_u64).unwrap_or(u64::MAX);
            let gib = t.get("bytes").and_then(Value::as_f64).unwrap_or(0.0) / f64::from(1u32 << 30);
            let pats = t.get("patterns").and_then(Value::as_array).map_or(0, Vec::len);
            let mt = mt.measured(format!("{n} mismatching words over {gib:.1} GiB × {pats} patterns"));
            if n == 0 && gib > 0.0 {
                mt.pass()
            } else {
                let at = t.get("first_bad_offset").map(Value::to_string).unwrap_or_default();
                mt.fail(format!(
                    "device memory returned wrong data (first bad byte offset {at}): {}; check rows.remap_pending afterwards, RMA if it recurs",
                    remedy::RESET
                ))
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Status;

    fn healthy() -> Value {
        json!({"passed": true, "main_work_started": true, "metrics": {
            "gemm": {"n": 8192, "tflops": 700.0, "checked": 4096, "mismatches": 0},
            "copy": {"bytes": 268435456u64, "h2d_gbs": 53.0, "d2h_gbs": 54.0},
            "memtest": {"bytes": 42949672960u64, "patterns": ["a","b","c","d","e"], "mismatches": 0}
        }})
    }

    fn by_id<'a>(c: &'a [Check], id: &str) -> &'a Check {
        c.iter().find(|c| c.id == id).unwrap()
    }

    #[test]
    fn healthy_h100_passes_every_check() {
        let sku = sku::lookup("NVIDIA H100 80GB HBM3");
        let c = evaluate(&healthy(), "0", sku, Some((5, 16)));
        assert_eq!(c.len(), 5);
        assert!(c.iter().all(|c| c.status == Status::Pass), "{c:#?}");
    }

    #[test]
    fn mismatches_slow_gemm_and_slow_copies_fail() {
        let mut r = healthy();
        r["metrics"]["gemm"]["mismatches"] = json!(3);
        r["metrics"]["gemm"]["tflops"] = json!(400.0);
        r["metrics"]["memtest"]["mismatches"] = json!(1);
        r["metrics"]["copy"]["h2d_gbs"] = json!(12.0);
        let c = evaluate(&r, "0", sku::lookup("NVIDIA H100 80GB HBM3"), Some((5, 16)));
        assert_eq!(by_id(&c, "gemm.correctness").status, Status::Fail);
        assert_eq!(by_id(&c, "gemm.throughput").status, Status::Warn);
        assert_eq!(by_id(&c, "memtest.patterns").status, Status::Fail);
        assert_eq!(by_id(&c, "copy.h2d").status, Status::Fail);
        assert_eq!(by_id(&c, "copy.d2h").status, Status::Pass);
    }

    #[test]
    fn peer_copies_are_judged_for_bits_speed_and_access() {
        let pair = |from: u32, to: u32, gbs: f64, bad: u64, peer: bool| json!({"from": from, "to": to, "gbs": gbs, "mismatches": bad, "peer_access": peer});
        let r = |pairs: Vec<Value>| json!({"main_work_started": true, "metrics": {"p2p": {"pairs": pairs}}});
        let floor = sku::pcie_limit_gbs(5, 16);
        let ok = evaluate_p2p(
            &r(vec![pair(0, 1, 350.0, 0, true), pair(1, 0, 340.0, 0, true)]),
            floor,
        );
        assert_eq!(ok.status, Status::Pass, "{ok:?}");
        assert_eq!(
            ok.measured.as_deref(),
            Some("2 pairs, slowest 1→0 340.0 GB/s, fastest 350.0 GB/s")
        );
        let bad = evaluate_p2p(
            &r(vec![pair(0, 1, 350.0, 3, true), pair(1, 0, 340.0, 0, true)]),
            floor,
        );
        assert_eq!(bad.status, Status::Fail);
        let slow = evaluate_p2p(
            &r(vec![pair(0, 1, 10.0, 0, true), pair(1, 0, 340.0, 0, true)]),
            floor,
        );
        assert_eq!(slow.status, Status::Warn);
        let host = evaluate_p2p(
            &r(vec![pair(0, 1, 45.0, 0, false), pair(1, 0, 45.0, 0, false)]),
            floor,
        );
        assert_eq!(host.status, Status::Warn);
        assert!(host.remedy.unwrap().contains("no peer access"));
        let none = evaluate_p2p(
            &json!({"main_work_started": true, "failure_details": [{"error": "p2p: cuMemcpyPeer failed"}], "metrics": {}}),
            floor,
        );
        assert_eq!(none.status, Status::Fail);
    }

    #[test]
    fn the_all_reduce_is_judged_for_exact_sums_speed_and_availability() {
        let r = |ranks: u64, busbw: f64, bad: u64| {
            json!({"main_work_started": true, "metrics": {"allreduce": {
            "ranks": ranks, "bytes": 268435456u64, "nccl_version": 22803, "algbw_gbs": busbw / 2.0 * ranks as f64 / (ranks as f64 - 1.0).max(1.0),
            "busbw_gbs": busbw, "mismatches": bad, "first_bad": if bad > 0 { json!({"rank": 1, "index": 7}) } else { Value::Null }}}})
        };
        let floor = sku::pcie_limit_gbs(5, 16);
        let ok = evaluate_allreduce(&r(8, 360.0, 0), floor);
        assert_eq!(ok.status, Status::Pass, "{ok:?}");
        assert!(
            ok.measured
                .as_deref()
                .unwrap()
                .starts_with("8 ranks, bus 360.0 GB/s"),
            "{ok:?}"
        );
        assert!(ok
            .measured
            .as_deref()
            .unwrap()
            .ends_with("256 MiB, NCCL 2.28.3"));
        let wrong = evaluate_allreduce(&r(8, 360.0, 3), floor);
        assert_eq!(wrong.status, Status::Fail);
        assert!(wrong
            .remedy
            .as_deref()
            .unwrap()
            .contains("3 wrong element(s) (first: rank 1, index 7)"));
        assert_eq!(
            evaluate_allreduce(&r(2, 5.0, 0), floor).status,
            Status::Warn
        );
        // One rank: correctness only; a bus bandwidth of 0 is not "slow".
        let one = evaluate_allreduce(&r(1, 0.0, 0), floor);
        assert_eq!(one.status, Status::Pass, "{one:?}");
        assert_eq!(one.threshold.as_deref(), Some("exact sums"));
        assert_eq!(
            evaluate_allreduce(&r(1, 0.0, 1), floor).status,
            Status::Fail
        );
        let missing = json!({"main_work_started": true, "metrics": {"allreduce": {"unavailable": "NCCL (libnccl.so.2) was not found"}}});
        let na = evaluate_allreduce(&missing, floor);
        assert_eq!(na.status, Status::NotApplicable);
        assert!(na.reason.as_deref().unwrap().contains("libnccl.so.2"));
        let crashed = json!({"main_work_started": true, "failure_details": [{"error": "allreduce: ncclCommInitRank: ncclSystemError"}], "metrics": {}});
        let f = evaluate_allreduce(&crashed, floor);
        assert_eq!(f.status, Status::Fail);
        assert!(f.remedy.as_deref().unwrap().contains("ncclSystemError"));
    }

    #[test]
    fn a_missing_cublas_is_not_a_sick_gpu() {
        let mut r = healthy();
        r["metrics"]["gemm"] =
            json!({"unavailable": "cuBLAS (libcublas.so.13 or similar) was not found"});
        let c = evaluate(&r, "0", sku::lookup("NVIDIA H100 80GB HBM3"), Some((5, 16)));
        assert_eq!(by_id(&c, "gemm.correctness").status, Status::NotApplicable);
        assert_eq!(by_id(&c, "gemm.throughput").status, Status::NotApplicable);
        assert_eq!(by_id(&c, "memtest.patterns").status, Status::Pass);
        assert_eq!(c.len(), 5);
    }

    #[test]
    fn a_trial_that_could_not_start_is_not_applicable() {
        let r = json!({"passed": false, "main_work_started": false, "failure_details": [{"error": "no usable GPU: cuInit"}]});
        let c = evaluate(&r, "0", None, None);
        assert!(c.iter().all(|c| c.status == Status::NotApplicable));
        assert!(c[0].reason.as_deref().unwrap().contains("cuInit"));
    }
}
