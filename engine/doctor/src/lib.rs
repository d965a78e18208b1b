//! `aorta doctor`: is this GPU node healthy enough to trust a sweep? (docs/doctor.md)
//!
//! Each check is a named detector with a verdict (pass / warn / fail / not applicable with the
//! reason), the figure it measured, the threshold and a remedy line in DCGM's style.
//!
//! - quick (passive, no kernel launches): `nvidia-smi -q -x` twice a second apart (the clock
//!   event counters' window), `nvidia-smi nvlink --status`, amdgpu's sysfs and `amd-smi`, the
//!   kernel log since boot through the classifier's Tier 3 patterns;
//! - medium / long: quick, then the active checks of the `gpu_doctor` workload on each GPU
//!   (GEMM bits and TFLOP/s, pinned copy GB/s, a pattern memory test), judged in
//!   [`active`] against [`sku`].
//!
//! The sources are processes and files only: the `aorta` binary links no GPU library and runs
//! on a machine without a GPU, where every check says "not applicable".

pub mod active;
pub mod amd;
pub mod checks;
pub mod kernel_log;
pub mod nvidia;
mod proc;
pub mod report;
pub mod sku;
pub mod smi_text;
pub mod verdict;
mod xml;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use checks::EnvFacts;
pub use report::{Counts, GpuSummary, GpuVerdict, Level, NodeVerdict, Recorded, Report};
pub use verdict::{Check, Status};

/// Where the passive sources are. Defaults are the real ones; the `AORTA_DOCTOR_*` variables
/// ([`Sources::from_env`]) point them at recordings, which is how the CLI's tests run every
/// fail path on a machine without a GPU.
#[derive(Debug, Clone)]
pub struct Sources {
    /// `nvidia-smi` (`$AORTA_DOCTOR_NVIDIA_SMI`).
    pub nvidia_smi: String,
    /// `amd-smi` (`$AORTA_DOCTOR_AMD_SMI`).
    pub amd_smi: String,
    /// The filesystem root sysfs is read under (`$AORTA_DOCTOR_SYSFS_ROOT`, default `/`).
    pub sysfs_root: PathBuf,
    /// A file holding the kernel log instead of `/dev/kmsg`/`dmesg` (`$AORTA_DOCTOR_KMSG`).
    pub kernel_log: Option<PathBuf>,
    /// The clock-event counters' window (`$AORTA_DOCTOR_WINDOW_MS`, default 1000).
    pub window: Duration,
}

impl Default for Sources {
    fn default() -> Self {
        Sources {
            nvidia_smi: "nvidia-smi".into(),
            amd_smi: "amd-smi".into(),
            sysfs_root: PathBuf::from("/"),
            kernel_log: None,
            window: Duration::from_secs(1),
        }
    }
}

impl Sources {
    pub fn from_env() -> Sources {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let d = Sources::default();
        Sources {
            nvidia_smi: var("AORTA_DOCTOR_NVIDIA_SMI").unwrap_or(d.nvidia_smi),
            amd_smi: var("AORTA_DOCTOR_AMD_SMI").unwrap_or(d.amd_smi),
            sysfs_root: var("AORTA_DOCTOR_SYSFS_ROOT").map_or(d.sysfs_root, PathBuf::from),
            kernel_log: var("AORTA_DOCTOR_KMSG").map(PathBuf::from),
            window: var("AORTA_DOCTOR_WINDOW_MS")
                .and_then(|v| v.parse().ok())
                .map_or(d.window, Duration::from_millis),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub level: Level,
    /// nvidia-smi / amd-smi indices to check; `None`: all.
    pub gpus: Option<Vec<usize>>,
    pub sources: Sources,
    pub env: EnvFacts,
    /// The `aorta-workload-gpu_doctor` executable (medium and long); `None`: not found.
    pub workload: Option<PathBuf>,
    /// Where each GPU's active trial runs (CONFIG.json, RESULT.json, logs).
    pub work_dir: Option<PathBuf>,
}

fn selected(gpus: &Option<Vec<usize>>, index: usize) -> bool {
    gpus.as_ref().is_none_or(|g| g.contains(&index))
}

fn host() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

/// The vendor tools' JSON (`amd-smi static --json`), `None` when missing or unreadable.
fn amd_smi_json(program: &str, sub: &str) -> Option<serde_json::Value> {
    let out = proc::run_captured(program, &[sub, "--json"], Duration::from_secs(20)).ok()?;
    serde_json::from_str(&out).ok()
}

/// Runs the checks of `opts.level` and reports.
pub fn run(opts: &Options) -> Report {
    let t0 = Instant::now();
    let src = &opts.sources;
    let mut checks = Vec::new();
    let mut gpus = Vec::new();

    // NVIDIA: the first sample.
    let nv = nvidia::query(&src.nvidia_smi, &[]);
    let nv = match nv {
        Ok(v) => v,
        Err(e) => {
            // nvidia-smi is installed but did not answer: the driver is in trouble.
            checks.push(
                Check::new("driver.nvidia_smi", None, "nvidia-smi -q -x")
                    .measured(e.to_string())
                    .threshold("answers with its XML report")
                    .fail(verdict::remedy::RESET),
            );
            None
        }
    };
    let nv = nv.filter(|n| !n.gpus.is_empty());
    // AMD: sysfs, completed by amd-smi where installed.
    let mut amd = amd::from_sysfs(&src.sysfs_root);
    if !amd.is_empty() {
        let st = amd_smi_json(&src.amd_smi, "static");
        let me = amd_smi_json(&src.amd_smi, "metric");
        amd::merge_amd_smi(&mut amd, st.as_ref(), me.as_ref());
    }

    if nv.is_none() && amd.is_empty() {
        let reason = "no NVIDIA or AMD GPU found (no nvidia-smi GPU, no amdgpu card in sysfs)";
        if checks.is_empty() {
            checks.push(
                Check::new(
                    "gpu.present",
                    None,
                    "nvidia-smi -q -x; sysfs /sys/class/drm",
                )
                .not_applicable(reason),
            );
        }
        if opts.level != Level::Quick {
            checks.extend(active::not_applicable(None, reason));
        }
        return Report::new(opts.level, host(), gpus, checks, t0.elapsed().as_secs_f64());
    }

    // The kernel log, while the window runs.
    let log = match &src.kernel_log {
        Some(p) => std::fs::read_to_string(p)
            .map(|t| (t, "recorded"))
            .map_err(|e| format!("{}: {e}", p.display())),
        None => kernel_log::read(),
    };
    let events = log.as_ref().map(|(t, _)| kernel_log::scan(t));
    let log_source = log.as_ref().map_or("unreadable", |(_, s)| *s);

    // Every GPU's address, selected or not: an Xid on a GPU left out is not the node's.
    let buses: Vec<String> = nv
        .iter()
        .flat_map(|n| n.gpus.iter().map(|g| g.bus_id.clone()))
        .chain(amd.iter().map(|g| g.bdf.clone()))
        .collect();
    if let Some(nv) = &nv {
        let links = proc::run_captured(
            &src.nvidia_smi,
            &["nvlink", "--status"],
            Duration::from_secs(10),
        )
        .map(|t| nvidia::parse_nvlink_status(&t))
        .unwrap_or_default();
        // The second sample, a window after the first: what the clock events did meanwhile.
        let elapsed = t0.elapsed();
        if elapsed < src.window {
            std::thread::sleep(src.window - elapsed);
        }
        let t_after = t0.elapsed();
        let after = nvidia::query(&src.nvidia_smi, &["-d", "PERFORMANCE"])
            .ok()
            .flatten();
        let secs = t_after.as_secs_f64();
        for g in nv.gpus.iter().filter(|g| selected(&opts.gpus, g.index)) {
            gpus.push(GpuSummary {
                label: g.label(),
                name: g.product_name.clone(),
                vendor: "nvidia".into(),
            });
            let window = after
                .as_ref()
                .and_then(|a| a.gpus.iter().find(|x| x.bus_id == g.bus_id))
                .map(|a| checks::Window {
                    after: a,
                    seconds: secs,
                });
            checks::nvidia_gpu(g, window, &mut checks);
            let mine = links
                .iter()
                .find(|(i, _)| *i == g.index)
                .map(|(_, l)| l.as_slice());
            checks::nvlink(g, mine, &mut checks);
            match &events {
                Ok(ev) => checks::kernel_events(
                    ev,
                    Some((&g.label(), &g.bus_id)),
                    &[],
                    log_source,
                    &mut checks,
                ),
                Err(e) => checks.push(
                    Check::new("kernel.xid", Some(&g.label()), "kernel log since boot")
                        .not_applicable(format!(
                            "cannot read the kernel log ({e}): {}",
                            verdict::remedy::KERNEL_LOG
                        )),
                ),
            }
        }
        checks::versions(nv, &opts.env, &mut checks);
    }
    for g in amd.iter().filter(|g| selected(&opts.gpus, g.index)) {
        gpus.push(GpuSummary {
            label: g.label(),
            name: g.name.clone(),
            vendor: "amd".into(),
        });
        checks::amd_gpu(g, &mut checks);
    }
    match &events {
        Ok(ev) => checks::kernel_events(ev, None, &buses, log_source, &mut checks),
        Err(e) => checks.push(
            Check::new("kernel.events", None, "kernel log since boot").not_applicable(format!(
                "cannot read the kernel log ({e}): {}",
                verdict::remedy::KERNEL_LOG
            )),
        ),
    }

    if opts.level != Level::Quick {
        active_checks(opts, nv.as_ref(), &amd, &mut checks);
    }
    Report::new(opts.level, host(), gpus, checks, t0.elapsed().as_secs_f64())
}

fn active_checks(
    opts: &Options,
    nv: Option<&nvidia::NvidiaSmi>,
    amd: &[amd::AmdGpu],
    checks: &mut Vec<Check>,
) {
    for g in amd.iter().filter(|g| selected(&opts.gpus, g.index)) {
        checks.extend(active::not_applicable(
            Some(&g.label()),
            "the active checks run on CUDA only so far (a HIP backend is a follow-up)",
        ));
    }
    let Some(nv) = nv else {
        return;
    };
    let chosen: Vec<&nvidia::NvGpu> = nv
        .gpus
        .iter()
        .filter(|g| selected(&opts.gpus, g.index))
        .collect();
    let Some(exe) = &opts.workload else {
        for g in &chosen {
            checks.push(
                Check::new("active.workload", Some(&g.label()), "aorta-workload-gpu_doctor")
                    .warn("the active checks did not run: aorta-workload-gpu_doctor not found; build it with `cargo build --release -p aorta-hw-queue` and put it beside aorta or on $AORTA_WORKLOAD_PATH"),
            );
        }
        return;
    };
    let base = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    for g in &chosen {
        let mut cfg = active::ActiveConfig {
            device: g.index,
            ..Default::default()
        };
        if opts.level == Level::Long {
            cfg.memtest_fraction = 0.9;
        }
        let dir = base.join(format!("doctor-gpu{}", g.index));
        let label = g.label();
        let result = std::fs::create_dir_all(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))
            .and_then(|_| active::run_trial(exe, &cfg, &dir));
        match result {
            Ok(r) => {
                let sku = g.product_name.as_deref().and_then(sku::lookup);
                let link = g.pcie.gen_max.zip(g.pcie.width_max);
                checks.extend(active::evaluate(&r, &label, sku, link));
            }
            Err(e) => checks.push(
                Check::new("active.workload", Some(&label), "aorta-workload-gpu_doctor")
                    .measured(e)
                    .fail(format!(
                        "the active checks crashed or hung on this GPU: {}",
                        verdict::remedy::RESET
                    )),
            ),
        }
    }
    // The least a path between GPUs should give: the slowest selected GPU's PCIe link.
    let floor = chosen
        .iter()
        .filter_map(|g| g.pcie.gen_max.zip(g.pcie.width_max))
        .filter_map(|(g, w)| sku::pcie_limit_gbs(g, w))
        .reduce(f64::min);
    let ordinals: Vec<usize> = chosen.iter().map(|g| g.index).collect();
    if ordinals.len() < 2 {
        checks.push(
            Check::new("p2p.bandwidth", None, "aorta-workload-gpu_doctor")
                .not_applicable("one GPU: nothing to connect"),
        );
    } else {
        let cfg = active::ActiveConfig {
            device: ordinals[0],
            peers: ordinals.clone(),
            ..Default::default()
        };
        checks.push(match multi_gpu_trial(exe, &cfg, &base.join("doctor-p2p")) {
            Ok(r) => active::evaluate_p2p(&r, floor),
            Err(e) => Check::new("p2p.bandwidth", None, "aorta-workload-gpu_doctor")
                .measured(e)
                .fail(format!(
                    "the peer-copy trial crashed or hung: {}",
                    verdict::remedy::RESET
                )),
        });
    }
    if let Some(&first) = ordinals.first() {
        let cfg = active::ActiveConfig {
            device: first,
            allreduce: ordinals.clone(),
            ..Default::default()
        };
        checks.push(
            match multi_gpu_trial(exe, &cfg, &base.join("doctor-nccl")) {
                Ok(r) => active::evaluate_allreduce(&r, floor),
                Err(e) => Check::new("nccl.allreduce", None, "aorta-workload-gpu_doctor")
                    .measured(e)
                    .fail(format!(
                        "the all-reduce trial crashed or hung: {}",
                        verdict::remedy::RESET
                    )),
            },
        );
    }
}

fn multi_gpu_trial(
    exe: &Path,
    cfg: &active::ActiveConfig,
    dir: &Path,
) -> Result<serde_json::Value, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    active::run_trial(exe, cfg, dir)
}

/// Reads the toolkit's CUDA version (`version.json`) for the `driver.cuda` check.
pub fn toolkit_cuda(root: &Path) -> Option<String> {
    let from_json = std::fs::read_to_string(root.join("version.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.pointer("/cuda/version")?.as_str().map(str::to_owned));
    // Toolkits installed without version.json (the H100 machine's) still ship cuda.h.
    from_json.or_else(|| {
        let header = std::fs::read_to_string(root.join("include/cuda.h")).ok()?;
        cuda_h_version(&header)
    })
}

/// `#define CUDA_VERSION 13000` → `13.0`.
fn cuda_h_version(header: &str) -> Option<String> {
    let n: u32 = header
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define CUDA_VERSION "))?
        .trim()
        .parse()
        .ok()?;
    Some(format!("{}.{}", n / 1000, (n % 1000) / 10))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod version_tests {
    #[test]
    fn cuda_h_gives_the_toolkit_version() {
        let h = "/* x */\n#define CUDA_VERSION 13000\n#define CUDA_API_PER_THREAD 1\n";
        assert_eq!(super::cuda_h_version(h).as_deref(), Some("13.0"));
        assert_eq!(
            super::cuda_h_version("#define CUDA_VERSION 12080\n").as_deref(),
            Some("12.8")
        );
        assert_eq!(super::cuda_h_version("nothing"), None);
    }
}
