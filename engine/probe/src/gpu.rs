//! `gpu`: vendor-neutral device facts from `nvidia-smi` (NVIDIA) or `amd-smi` and
//! `rocm_agent_enumerator` (AMD).
//!
//! NVIDIA: one `--query-gpu` CSV (≈ 45 ms on the H200), `--version` for the driver and its CUDA
//! version, `topo -m` for links; all three run in parallel. A machine with no GPU tool and no
//! GPU device node is a CPU machine, which is an answer, not a partial snapshot.

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::schema::{Gpu, GpuAffinity, GpuArch, GpuDevice, GpuVolatile, TopoLink, Topology};
use crate::util::{read_text, rooted, Reasons, Steps};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--query-gpu` fields, in output order. Every one exists since driver 510; an older driver
/// rejects the whole query, and [`CORE_FIELDS`] is tried instead.
pub(crate) const QUERY_FIELDS: &str = "index,name,uuid,pci.bus_id,compute_cap,memory.total,driver_version,vbios_version,ecc.mode.current,mig.mode.current,power.limit,power.default_limit,clocks.applications.graphics,clocks.applications.memory,clocks.max.sm,clocks.max.memory,persistence_mode,compute_mode,serial,clocks.sm,temperature.gpu,memory.used";
const CORE_FIELDS: &str = "index,name,uuid,pci.bus_id,memory.total,driver_version";

/// The `gpu` section and what the CUDA and ROCm sections need to know of the machine.
#[derive(Debug, Default)]
pub(crate) struct Gpus {
    pub gpu: Gpu,
    /// The driver's CUDA version, `nvidia-smi`'s "CUDA Version".
    pub driver_api: Option<String>,
    /// `rocm.gpu_arch`, from `rocm_agent_enumerator`.
    pub arch: GpuArch,
    pub nvidia: bool,
    pub amd: bool,
}

/// What the AMD tools said (raw): `rocm_agent_enumerator` and `amd-smi static --json`.
#[derive(Debug, Default)]
struct AmdRaw {
    agents: Option<Result<String, ProbeError>>,
    amd_static: Option<Result<String, ProbeError>>,
}

/// The whole section, on its own thread: the AMD tools (step `amd`) run here while
/// `nvidia-smi` runs on another (step `nvidia-smi`, its three queries at once). Then NVIDIA if
/// its tools or driver are there, else AMD, else a CPU machine.
pub(crate) fn section(
    tools: &Tools,
    root: &Path,
    env: &BTreeMap<String, String>,
    t: Duration,
    reasons: &Reasons,
    steps: &Steps,
) -> Gpus {
    let smi = nvidia_smi_path(tools, root);
    let (nvidia, amd) = std::thread::scope(|s| {
        let nv = smi.map(|smi| s.spawn(move || nvidia(tools, &smi, t, steps)));
        let amd = amd_tools(tools, root, env, t, steps);
        (nv.and_then(|h| h.join().ok()), amd)
    });
    let mut g = Gpus {
        nvidia: nvidia.is_some()
            || rooted(root, "/proc/driver/nvidia/version").exists()
            || rooted(root, "/dev/nvidiactl").exists(),
        amd: rooted(root, "/dev/kfd").exists()
            || rooted(root, "/sys/module/amdgpu").exists()
            || amd.agents.as_ref().is_some_and(|a| {
                a.as_ref()
                    .is_ok_and(|o| !parse_agents(o).gfx_targets.is_empty())
            }),
        ..Gpus::default()
    };
    if g.nvidia {
        (g.gpu, g.driver_api) = from_nvidia(nvidia.unwrap_or_default(), root, reasons);
    } else if g.amd {
        g.gpu = from_amd(&amd, root, reasons);
    } else {
        g.gpu.count = Some(0);
    }
    if let Some(Ok(a)) = &amd.agents {
        g.arch = parse_agents(a);
    } else if let (Some(Err(e)), true) = (&amd.agents, g.amd) {
        reasons.add("rocm.gpu_arch", e);
    }
    g
}

/// `nvidia-smi`: the device query, `--version` and `topo -m`, each on a thread of its own.
fn nvidia(tools: &Tools, smi: &Path, t: Duration, steps: &Steps) -> NvidiaRaw {
    let _clock = steps.clock("nvidia-smi");
    std::thread::scope(|s| {
        let q = s.spawn(|| nvidia_query(tools, smi, t));
        let v = s.spawn(|| {
            tools
                .run(smi, &["--version"], t)
                .and_then(|o| o.check("nvidia-smi --version"))
                .map(|o| o.stdout)
        });
        let topo = s.spawn(|| {
            tools
                .run(smi, &["topo", "-m"], t)
                .and_then(|o| o.check("nvidia-smi topo -m"))
                .map(|o| o.stdout)
        });
        NvidiaRaw {
            query: q.join().ok(),
            version: v.join().ok(),
            topo: topo.join().ok(),
        }
    })
}

/// `rocm_agent_enumerator` and `amd-smi`, found on `PATH`, in `$ROCM_PATH/bin` or `/opt/rocm/bin`.
fn amd_tools(
    tools: &Tools,
    root: &Path,
    env: &BTreeMap<String, String>,
    t: Duration,
    steps: &Steps,
) -> AmdRaw {
    let _clock = steps.clock("amd");
    let fallback: Vec<PathBuf> = env
        .get("ROCM_PATH")
        .map(|p| Path::new(p).join("bin"))
        .into_iter()
        .chain([rooted(root, "/opt/rocm/bin")])
        .collect();
    let agents = tools.which("rocm_agent_enumerator", &fallback).map(|p| {
        tools
            .run(&p, &[], t)
            .and_then(|o| o.check("rocm_agent_enumerator"))
            .map(|o| o.stdout)
    });
    let amd_static = tools
        .which("amd-smi", &fallback)
        .map(|_| tools.stdout_of("amd-smi", &fallback, &["static", "--json"], t));
    AmdRaw { agents, amd_static }
}

/// What the NVIDIA tools said (raw), gathered in parallel.
#[derive(Debug, Default)]
struct NvidiaRaw {
    pub query: Option<Result<(String, String), ProbeError>>,
    pub version: Option<Result<String, ProbeError>>,
    pub topo: Option<Result<String, ProbeError>>,
}

fn nvidia_query(tools: &Tools, smi: &Path, t: Duration) -> Result<(String, String), ProbeError> {
    let run = |fields: &str| {
        tools.run(
            smi,
            &[
                &format!("--query-gpu={fields}"),
                "--format=csv,noheader,nounits",
            ],
            t,
        )
    };
    let o = run(QUERY_FIELDS)?;
    if o.success() {
        return Ok((QUERY_FIELDS.to_string(), o.stdout));
    }
    let o2 = run(CORE_FIELDS)?;
    if o2.success() {
        Ok((CORE_FIELDS.to_string(), o2.stdout))
    } else {
        // The full query's failure says more than the core one's.
        Err(ProbeError::Failed {
            command: "nvidia-smi --query-gpu".into(),
            exit: o.failure(),
        })
    }
}

fn nvidia_smi_path(tools: &Tools, root: &Path) -> Option<PathBuf> {
    tools.which("nvidia-smi", &[rooted(root, "/usr/bin")])
}

/// Builds the section from NVIDIA output. `cuda_driver_api` receives the "CUDA Version".
fn from_nvidia(raw: NvidiaRaw, root: &Path, reasons: &Reasons) -> (Gpu, Option<String>) {
    let mut gpu = Gpu {
        vendor: Some("nvidia".into()),
        source: Some("nvidia-smi".into()),
        ..Gpu::default()
    };
    match raw.query {
        Some(Ok((fields, csv))) => {
            gpu.devices = parse_query(&fields, &csv);
            gpu.driver_version = query_driver(&fields, &csv);
        }
        Some(Err(e)) => reasons.add("gpu.devices", e),
        None => reasons.add(
            "gpu.devices",
            "nvidia-smi not on PATH although an NVIDIA driver is loaded",
        ),
    }
    gpu.count = Some(gpu.devices.len() as u32).filter(|_| !gpu.devices.is_empty());
    let mut api = None;
    match raw.version {
        Some(Ok(text)) => {
            let (drv, cuda) = parse_version(&text);
            gpu.driver_version = drv.or(gpu.driver_version.take());
            api = cuda;
            if api.is_none() {
                reasons.add(
                    "cuda.driver_api_version",
                    "nvidia-smi --version printed no \"CUDA Version\"",
                );
            }
        }
        Some(Err(e)) => reasons.add("cuda.driver_api_version", e),
        None => {}
    }
    if gpu.driver_version.is_none() {
        gpu.driver_version = proc_driver_version(root);
    }
    if gpu.driver_version.is_none() {
        reasons.add(
            "gpu.driver_version",
            "neither nvidia-smi nor /proc/driver/nvidia/version gave a driver version",
        );
    }
    match raw.topo {
        Some(Ok(text)) => gpu.topology = parse_topo(&text),
        Some(Err(e)) => reasons.add("gpu.topology", e),
        None => {}
    }
    (gpu, api)
}

/// Builds the section from the AMD tools' output: `amd-smi`, else one device per agent.
fn from_amd(raw: &AmdRaw, root: &Path, reasons: &Reasons) -> Gpu {
    let mut gpu = Gpu {
        vendor: Some("amd".into()),
        ..Gpu::default()
    };
    match &raw.amd_static {
        Some(Ok(text)) => match parse_amd_static(text) {
            Ok(d) => {
                gpu.devices = d;
                gpu.source = Some("amd-smi".into());
                gpu.driver_version = amd_driver_version(text);
            }
            Err(e) => reasons.add("gpu.devices", e),
        },
        Some(Err(e)) => reasons.add("gpu.devices", e),
        None => {}
    }
    if gpu.devices.is_empty() {
        if let Some(Ok(a)) = &raw.agents {
            let arch = parse_agents(a);
            gpu.source = Some("rocm_agent_enumerator".into());
            let mut i = 0;
            for (t, n) in &arch.agent_arch_counts {
                for _ in 0..*n {
                    gpu.devices.push(GpuDevice {
                        index: Some(i),
                        arch: Some(t.clone()),
                        ..GpuDevice::default()
                    });
                    i += 1;
                }
            }
        } else if raw.amd_static.is_none() {
            reasons.add("gpu.devices", "an AMD GPU driver is loaded but neither amd-smi nor rocm_agent_enumerator is on PATH or in $ROCM_PATH/bin, /opt/rocm/bin");
        }
    }
    gpu.count = (!gpu.devices.is_empty()).then_some(gpu.devices.len() as u32);
    if gpu.driver_version.is_none() {
        gpu.driver_version = read_text(&rooted(root, "/sys/module/amdgpu/version")).ok();
    }
    gpu
}

/// One device per CSV line; `[N/A]`, `[Not Supported]` and friends become `null`.
pub(crate) fn parse_query(fields: &str, csv: &str) -> Vec<GpuDevice> {
    let names: Vec<&str> = fields.split(',').collect();
    let mut out = Vec::new();
    for line in csv.lines().filter(|l| !l.trim().is_empty()) {
        let vals: Vec<&str> = line.split(", ").map(str::trim).collect();
        let get = |f: &str| {
            names
                .iter()
                .position(|n| *n == f)
                .and_then(|i| vals.get(i))
                .map(|v| v.trim())
                .filter(|v| !v.is_empty() && !v.starts_with('[') && *v != "N/A")
                .map(str::to_string)
        };
        let num = |f: &str| get(f).and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok());
        let lower = |f: &str| get(f).map(|v| v.to_ascii_lowercase());
        let cc = get("compute_cap");
        out.push(GpuDevice {
            index: num("index").map(|v| v as u32),
            name: get("name"),
            arch: cc.as_deref().and_then(sm_arch),
            compute_capability: cc,
            uuid: get("uuid"),
            serial: get("serial"),
            pci_bus_id: get("pci.bus_id"),
            memory_total_mib: num("memory.total").map(|v| v as u64),
            vbios_version: get("vbios_version"),
            ecc_mode: lower("ecc.mode.current"),
            mig_mode: lower("mig.mode.current"),
            power_limit_w: num("power.limit"),
            power_default_limit_w: num("power.default_limit"),
            app_clock_graphics_mhz: num("clocks.applications.graphics").map(|v| v as u32),
            app_clock_memory_mhz: num("clocks.applications.memory").map(|v| v as u32),
            max_clock_graphics_mhz: num("clocks.max.sm").map(|v| v as u32),
            max_clock_memory_mhz: num("clocks.max.memory").map(|v| v as u32),
            persistence_mode: lower("persistence_mode"),
            compute_mode: get("compute_mode"),
            volatile: GpuVolatile {
                clock_graphics_mhz: num("clocks.sm").map(|v| v as u32),
                temperature_c: num("temperature.gpu").map(|v| v as i32),
                memory_used_mib: num("memory.used").map(|v| v as u64),
            },
        });
    }
    out
}

/// The `driver_version` column of the first CSV line.
fn query_driver(fields: &str, csv: &str) -> Option<String> {
    let i = fields.split(',').position(|f| f == "driver_version")?;
    csv.lines()
        .next()?
        .split(", ")
        .nth(i)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && !v.starts_with('['))
}

/// `9.0` → `sm_90`, `10.0` → `sm_100`, `12.1` → `sm_121`.
pub(crate) fn sm_arch(cc: &str) -> Option<String> {
    let (maj, min) = cc.trim().split_once('.')?;
    let (maj, min): (u32, u32) = (maj.parse().ok()?, min.parse().ok()?);
    Some(format!("sm_{maj}{min}"))
}

/// `nvidia-smi --version`: `DRIVER version : 580.159.04`, `CUDA Version : 13.0`. Also accepts
/// the table header of plain `nvidia-smi` (`Driver Version: … CUDA Version: …`).
pub(crate) fn parse_version(text: &str) -> (Option<String>, Option<String>) {
    let after = |key: &str| {
        text.lines().find_map(|l| {
            let i = l.to_ascii_lowercase().find(&key.to_ascii_lowercase())?;
            let rest = l[i + key.len()..]
                .trim_start()
                .trim_start_matches(':')
                .trim();
            rest.split_whitespace()
                .next()
                .map(|v| v.trim_end_matches('|').to_string())
                .filter(|v| !v.is_empty())
        })
    };
    (after("DRIVER version"), after("CUDA Version"))
}

/// The version in `/proc/driver/nvidia/version`.
fn proc_driver_version(root: &Path) -> Option<String> {
    let t = read_text(&rooted(root, "/proc/driver/nvidia/version")).ok()?;
    crate::driver::proc_version(&t)
}

/// `nvidia-smi topo -m`: a tab-separated matrix whose header row names `GPU0…`, `NIC0…` and
/// the `CPU Affinity`/`NUMA Affinity` columns. Only GPU↔GPU cells become links.
pub(crate) fn parse_topo(text: &str) -> Topology {
    let clean = strip_ansi(text);
    let mut lines = clean.lines().filter(|l| !l.trim().is_empty());
    let mut topo = Topology {
        source: Some("nvidia-smi topo -m".into()),
        raw: Some(clean.trim_end().to_string()),
        ..Topology::default()
    };
    let Some(header) = lines.next() else {
        return topo;
    };
    let cols: Vec<String> = header
        .split('\t')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect();
    for line in lines {
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        let Some(row) = cells
            .first()
            .filter(|r| r.starts_with("GPU") && r[3..].bytes().all(|b| b.is_ascii_digit()))
        else {
            if line.starts_with("Legend") {
                break;
            }
            continue;
        };
        let vals = &cells[1..];
        let col = |name: &str| {
            cols.iter()
                .position(|c| c == name)
                .and_then(|i| vals.get(i))
                .map(|v| v.to_string())
                .filter(|v| !v.is_empty() && v != "N/A")
        };
        for (i, c) in cols.iter().enumerate() {
            if c.starts_with("GPU")
                && c.as_str() > *row
                && c[3..].bytes().all(|b| b.is_ascii_digit())
            {
                if let Some(v) = vals.get(i) {
                    topo.links.push(TopoLink {
                        a: row.to_string(),
                        b: c.clone(),
                        link: v.to_string(),
                    });
                }
            }
        }
        topo.affinity.push(GpuAffinity {
            gpu: row.to_string(),
            cpu_affinity: col("CPU Affinity"),
            numa_affinity: col("NUMA Affinity"),
        });
    }
    topo.links.sort_by_key(|l| (gpu_no(&l.a), gpu_no(&l.b)));
    topo
}

fn gpu_no(s: &str) -> u32 {
    s.trim_start_matches("GPU").parse().unwrap_or(u32::MAX)
}

pub(crate) fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' && it.peek() == Some(&'[') {
            it.next();
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `rocm_agent_enumerator`: one target per line; `gfx000` is the CPU agent and is dropped.
pub(crate) fn parse_agents(text: &str) -> GpuArch {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for t in text
        .lines()
        .map(str::trim)
        .filter(|t| t.starts_with("gfx") && *t != "gfx000")
    {
        *counts.entry(t.to_string()).or_default() += 1;
    }
    GpuArch {
        agent_count: Some(counts.values().sum()),
        gfx_targets: counts.keys().cloned().collect(),
        agent_arch_counts: counts,
    }
}

/// `amd-smi static --json`: a list of cards, or `{"gpu_data": [...]}` (ROCm ≥ 6.4).
pub(crate) fn parse_amd_static(text: &str) -> Result<Vec<GpuDevice>, ProbeError> {
    let v: Value = serde_json::from_str(text.trim()).map_err(ProbeError::AmdJson)?;
    let cards = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => o
            .get("gpu_data")
            .or_else(|| o.get("gpus"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let s = |c: &Value, path: &[&str]| {
        let mut cur = c;
        for p in path {
            cur = cur.get(p)?;
        }
        match cur {
            Value::String(s) if !s.is_empty() && s != "N/A" => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    Ok(cards
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mem = c
                .pointer("/vram/size/value")
                .or_else(|| c.pointer("/vram/size"))
                .and_then(|v| {
                    v.as_u64()
                        .or_else(|| v.as_str()?.split_whitespace().next()?.parse().ok())
                });
            GpuDevice {
                index: c
                    .get("gpu")
                    .and_then(Value::as_u64)
                    .map(|g| g as u32)
                    .or(Some(i as u32)),
                name: s(c, &["asic", "market_name"]),
                arch: s(c, &["asic", "target_graphics_version"]),
                uuid: s(c, &["uuid"]).or_else(|| s(c, &["asic", "asic_serial"])),
                pci_bus_id: s(c, &["bus", "bdf"]),
                memory_total_mib: mem,
                vbios_version: s(c, &["vbios", "version"])
                    .or_else(|| s(c, &["vbios", "part_number"])),
                power_limit_w: s(c, &["limit", "max_power"])
                    .or_else(|| s(c, &["limit", "ppt0", "max_power_limit"]))
                    .and_then(|p| p.split_whitespace().next()?.parse().ok()),
                ..GpuDevice::default()
            }
        })
        .collect())
}

pub(crate) fn amd_driver_version(text: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text.trim()).ok()?;
    let first = match &v {
        Value::Array(a) => a.first()?.clone(),
        Value::Object(o) => o.get("gpu_data")?.as_array()?.first()?.clone(),
        _ => return None,
    };
    first
        .pointer("/driver/version")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topo_of_two_nvlinked_gpus() {
        let t = "\t\u{1b}[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\u{1b}[0m\nGPU0\t X \tNV18\tSYS\t0-55,112-167\t0\t\tN/A\nGPU1\tNV18\t X \tSYS\t0-55,112-167\t0\t\tN/A\nNIC0\tSYS\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n";
        let topo = parse_topo(t);
        assert_eq!(
            topo.links,
            vec![TopoLink {
                a: "GPU0".into(),
                b: "GPU1".into(),
                link: "NV18".into()
            }]
        );
        assert_eq!(
            topo.affinity[1].cpu_affinity.as_deref(),
            Some("0-55,112-167")
        );
        assert_eq!(topo.affinity[1].numa_affinity.as_deref(), Some("0"));
        assert!(!topo.raw.unwrap().contains('\u{1b}'));
    }

    #[test]
    fn query_with_missing_values() {
        let d = parse_query(
            "index,name,compute_cap,ecc.mode.current,power.limit",
            "3, NVIDIA A100-SXM4-80GB, 8.0, [N/A], [Not Supported]\n",
        );
        assert_eq!(d[0].index, Some(3));
        assert_eq!(d[0].arch.as_deref(), Some("sm_80"));
        assert_eq!(d[0].ecc_mode, None);
        assert_eq!(d[0].power_limit_w, None);
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("NVIDIA-SMI version  : 580.159.04\nDRIVER version      : 580.159.04\nCUDA Version        : 13.0\n"), (Some("580.159.04".into()), Some("13.0".into())));
        assert_eq!(
            parse_version(
                "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04     CUDA Version: 13.0     |"
            )
            .1
            .as_deref(),
            Some("13.0")
        );
        assert_eq!(sm_arch("10.0").as_deref(), Some("sm_100"));
    }

    #[test]
    fn agents_drop_the_cpu() {
        let a = parse_agents("gfx000\ngfx942\ngfx942\ngfx90a\n");
        assert_eq!(a.agent_count, Some(3));
        assert_eq!(a.gfx_targets, vec!["gfx90a", "gfx942"]);
        assert_eq!(a.agent_arch_counts["gfx942"], 2);
    }
}
