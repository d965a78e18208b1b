//! `host`: kernel, glibc, distro, CPU, memory, NUMA, container runtime. File reads under the
//! probe root (`/proc`, `/sys`, `/etc`); the glibc version from the loaded library, or one
//! `getconf` under another root; nothing here can take long.

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::libs::list_dir;
use crate::schema::{Cpu, Distro, Host, Runtime};
use crate::util::{read_text, rooted, Reasons, Steps};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// CPU flags that select different kernels in BLAS/oneDNN/PyTorch CPU code paths.
const SIMD_FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
    "asimd",
    "asimdhp",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
];

/// The whole section, on its own thread (step `host`), then the container the environment names.
pub(crate) fn section(
    root: &Path,
    env: &BTreeMap<String, String>,
    tools: &Tools,
    timeout: Duration,
    reasons: &Reasons,
    steps: &Steps,
) -> Host {
    let (mut host, own) = {
        let _clock = steps.clock("host");
        let own = SelfProc::read(root);
        (facts(root, &own, tools, timeout, reasons), own)
    };
    container_from_env(&mut host.runtime, env);
    host.runtime.container_detected = Some(isolated(root, &own, &host.runtime));
    host.runtime.namespace = namespace(root, &own);
    host
}

/// What `/proc/self` says about where this process runs, read once per probe: container
/// detection, the container id and the namespace each look at it.
struct SelfProc {
    /// `/proc/self/ns/mnt`'s link (`mnt:[4026531841]`), if readable.
    mnt_ns: Option<PathBuf>,
    /// `/proc/self/cgroup`; empty when unreadable.
    cgroup: String,
}

impl SelfProc {
    fn read(root: &Path) -> Self {
        SelfProc {
            mnt_ns: std::fs::read_link(rooted(root, "/proc/self/ns/mnt")).ok(),
            cgroup: std::fs::read_to_string(rooted(root, "/proc/self/cgroup")).unwrap_or_default(),
        }
    }
}

/// AORTA 0.3.0's `container_detected`: a named container, a mount namespace other than PID
/// 1's (a sandbox sharing the host's PID namespace: some remote-execution workers, `unshare
/// -m`), or a container runtime's token in this process's cgroup path.
fn isolated(root: &Path, own: &SelfProc, rt: &Runtime) -> bool {
    let named = rt.container.as_deref().is_some_and(|c| c != "baremetal");
    let own_mount_ns = matches!(
        (&own.mnt_ns, std::fs::read_link(rooted(root, "/proc/1/ns/mnt")).ok()),
        (Some(a), Some(b)) if *a != b
    );
    let token = ["docker", "containerd", "kubepods", "libpod", "lxc", "crio"]
        .iter()
        .any(|t| own.cgroup.contains(t));
    named || own_mount_ns || token
}

/// The mount namespace (else the cgroup namespace) as AORTA 0.3.0 writes `probe_namespace`:
/// `mnt:` and the first 16 hex of sha256(`mnt\0<boot_id>\0mnt:[<inode>]`), `-local` without a
/// boot id. `None` where `/proc/self/ns` cannot be read; not a partial reason: it is never
/// keyed, only a way to tell two places apart.
fn namespace(root: &Path, own: &SelfProc) -> Option<String> {
    use sha2::Digest;
    let boot_id = read_text(&rooted(root, "/proc/sys/kernel/random/boot_id")).ok();
    let token = |link: Option<&Path>| {
        let t = link?.to_str()?.to_string();
        (!t.is_empty()).then_some(t)
    };
    let (kind, token) = token(own.mnt_ns.as_deref())
        .map(|t| ("mnt", t))
        .or_else(|| {
            let cgroup_ns = std::fs::read_link(rooted(root, "/proc/self/ns/cgroup")).ok();
            token(cgroup_ns.as_deref()).map(|t| ("cgroup-ns", t))
        })?;
    let (material, prefix) = match &boot_id {
        Some(b) => (format!("{kind}\0{b}\0{token}"), kind.to_string()),
        None => (format!("{kind}\0{token}"), format!("{kind}-local")),
    };
    let digest = sha2::Sha256::digest(material.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Some(format!("{prefix}:{hex}"))
}

fn facts(root: &Path, own: &SelfProc, tools: &Tools, timeout: Duration, reasons: &Reasons) -> Host {
    let kernel = |name: &str| {
        reasons.ok(
            &format!("host.{name}"),
            read_text(&rooted(
                root,
                &format!("/proc/sys/kernel/{}", name_file(name)),
            )),
        )
    };
    let hostname = read_text(&rooted(root, "/proc/sys/kernel/hostname")).ok();
    let (mem_total, mem_avail) = meminfo(root, reasons);
    Host {
        hostname,
        os: Some(std::env::consts::OS.to_string()),
        machine: Some(std::env::consts::ARCH.to_string()),
        kernel_release: kernel("kernel_release"),
        kernel_version: kernel("kernel_version"),
        glibc_version: reasons.ok(
            "host.glibc_version",
            match root == Path::new("/") {
                true => shared_glibc().map_or_else(|| glibc(tools, timeout), Ok),
                false => glibc(tools, timeout),
            },
        ),
        distro: distro(root, reasons),
        cpu: cpu(root, reasons),
        memory_total_bytes: mem_total,
        memory_total_gib: mem_total.map(|b| (b + (1 << 29)) >> 30),
        memory_available_bytes: mem_avail,
        numa_nodes: numa_nodes(root),
        runtime: runtime(root, own, reasons),
    }
}

fn name_file(field: &str) -> &'static str {
    if field == "kernel_release" {
        "osrelease"
    } else {
        "version"
    }
}

/// The version of the shared glibc this process runs on: the system's, as `getconf` would
/// print it, without starting `getconf` (0.6–1 ms, the slowest step of a probe on a 2-core VM).
/// None unless glibc is loaded as a shared library (a static or non-glibc build): ask `getconf`.
#[cfg(target_env = "gnu")]
fn shared_glibc() -> Option<String> {
    let f = libc::gnu_get_libc_version as *const libc::c_void;
    // SAFETY: dladdr only reads the loader's tables and fills `info`, zeroed here; its
    // dli_fname, when set, is a NUL-terminated string the loader owns for the process's life.
    let file = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(f, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(info.dli_fname)
    };
    let name = file.to_bytes().rsplit(|&b| b == b'/').next()?;
    if !name.starts_with(b"libc.so") {
        return None;
    }
    // SAFETY: glibc returns a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    v.to_str().ok().map(str::to_string)
}

#[cfg(not(target_env = "gnu"))]
fn shared_glibc() -> Option<String> {
    None
}

/// `getconf GNU_LIBC_VERSION` ("glibc 2.39"), else the last word of `ldd --version`.
fn glibc(tools: &Tools, timeout: Duration) -> Result<String, ProbeError> {
    let first = tools.stdout_of("getconf", &[], &["GNU_LIBC_VERSION"], timeout);
    if let Ok(s) = &first {
        if let Some(v) = s.trim().strip_prefix("glibc ") {
            return Ok(v.trim().to_string());
        }
    }
    match tools.run_named("ldd", &[], &["--version"], timeout) {
        Ok(o) => o
            .stdout
            .lines()
            .next()
            .filter(|l| l.contains("GLIBC") || l.contains("GNU libc"))
            .and_then(|l| l.split_whitespace().last())
            .map(str::to_string)
            .ok_or(ProbeError::NotGlibc),
        Err(e) => Err(first.err().unwrap_or(e)),
    }
}

fn distro(root: &Path, reasons: &Reasons) -> Distro {
    let text = match read_text(&rooted(root, "/etc/os-release"))
        .or_else(|_| read_text(&rooted(root, "/usr/lib/os-release")))
    {
        Ok(t) => t,
        Err(e) => {
            reasons.add("host.distro", e);
            return Distro::default();
        }
    };
    let kv: BTreeMap<&str, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"').to_string()))
        .collect();
    Distro {
        id: kv.get("ID").cloned(),
        version_id: kv.get("VERSION_ID").cloned(),
        pretty_name: kv.get("PRETTY_NAME").cloned(),
    }
}

fn cpu(root: &Path, reasons: &Reasons) -> Cpu {
    let text = match read_text(&rooted(root, "/proc/cpuinfo")) {
        Ok(t) => t,
        Err(e) => {
            reasons.add("host.cpu", e);
            return Cpu::default();
        }
    };
    let mut logical = 0u32;
    let mut sockets = BTreeSet::new();
    let (mut vendor, mut model, mut cores, mut flags) = (None, None, None, BTreeSet::new());
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "processor" => logical += 1,
            "physical id" => {
                sockets.insert(v.to_string());
            }
            "vendor_id" | "CPU implementer" if vendor.is_none() => vendor = Some(v.to_string()),
            // x86 "model name"; arm64 kernels print neither, POWER prints "cpu".
            "model name" | "Model" | "cpu" if model.is_none() => model = Some(v.to_string()),
            "cpu cores" if cores.is_none() => cores = v.parse().ok(),
            "flags" | "Features" if flags.is_empty() => {
                flags = v.split_whitespace().map(str::to_string).collect()
            }
            _ => {}
        }
    }
    if model.is_none() {
        reasons.add("host.cpu.model", "/proc/cpuinfo names no CPU model");
    }
    Cpu {
        vendor,
        model,
        logical_count: (logical > 0).then_some(logical),
        sockets: (!sockets.is_empty()).then_some(sockets.len() as u32),
        cores_per_socket: cores,
        simd: SIMD_FLAGS
            .iter()
            .filter(|f| flags.contains(**f))
            .map(|f| f.to_string())
            .collect(),
    }
}

fn meminfo(root: &Path, reasons: &Reasons) -> (Option<u64>, Option<u64>) {
    let text = match read_text(&rooted(root, "/proc/meminfo")) {
        Ok(t) => t,
        Err(e) => {
            reasons.add("host.memory_total_bytes", e);
            return (None, None);
        }
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    (field("MemTotal"), field("MemAvailable"))
}

fn numa_nodes(root: &Path) -> Option<u32> {
    let n = list_dir(&rooted(root, "/sys/devices/system/node"))
        .iter()
        .filter(|n| {
            n.strip_prefix("node")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    (n > 0).then_some(n as u32)
}

/// Container detection, AORTA §7.4 order: `/.dockerenv` → docker; `/run/.containerenv` →
/// podman; `$SINGULARITY_NAME`/`$APPTAINER_NAME` → singularity (checked by the caller via env,
/// see [`container_from_env`]); else substrings of `/proc/1/cgroup` in the order singularity,
/// docker, podman; else baremetal. Never partial.
fn runtime(root: &Path, own: &SelfProc, _reasons: &Reasons) -> Runtime {
    let container = if rooted(root, "/.dockerenv").exists() {
        "docker"
    } else if rooted(root, "/run/.containerenv").exists() {
        "podman"
    } else {
        let cg = std::fs::read_to_string(rooted(root, "/proc/1/cgroup")).unwrap_or_default();
        ["singularity", "docker", "podman"]
            .into_iter()
            .find(|k| cg.contains(k))
            .unwrap_or("baremetal")
    };
    let container_id = (container != "baremetal")
        .then(|| container_id(root, &own.cgroup))
        .flatten();
    Runtime {
        container: Some(container.to_string()),
        container_id,
        ..Runtime::default()
    }
}

/// Singularity/Apptainer set their variables in the container environment; they win over the
/// file checks (an Apptainer image built from a Docker image keeps `/.dockerenv`).
fn container_from_env(rt: &mut Runtime, env: &BTreeMap<String, String>) {
    if env.contains_key("SINGULARITY_NAME")
        || env.contains_key("APPTAINER_NAME")
        || env.contains_key("SINGULARITY_CONTAINER")
    {
        rt.container = Some("singularity".to_string());
    }
}

/// The first 64-hex run in `/proc/self/cgroup` (cgroup v1) or `/proc/self/mountinfo` (v2:
/// `/var/lib/docker/containers/<id>/hostname`), else a 12+ hex run in the cgroup file.
fn container_id(root: &Path, cg: &str) -> Option<String> {
    let hex_run = |text: &str, min: usize| {
        text.split(|c: char| !c.is_ascii_hexdigit())
            .find(|w| w.len() >= min && w.len() <= 64 && w.bytes().any(|b| b.is_ascii_alphabetic()))
            .map(str::to_string)
    };
    let mi = std::fs::read_to_string(rooted(root, "/proc/self/mountinfo")).unwrap_or_default();
    let mi_ids: String = mi
        .lines()
        .filter(|l| l.contains("/containers/"))
        .collect::<Vec<_>>()
        .join("\n");
    hex_run(cg, 64)
        .or_else(|| hex_run(&mi_ids, 64))
        .or_else(|| hex_run(cg, 12))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_glibc_is_what_getconf_prints() {
        let tools = Tools::new(&std::env::vars().collect());
        let printed = glibc(&tools, Duration::from_secs(10));
        // Only a build without a shared glibc has none (getconf is asked then).
        if cfg!(any(not(target_env = "gnu"), target_feature = "crt-static")) {
            return;
        }
        let found = shared_glibc().expect("this build runs on a shared glibc");
        assert_eq!(found, printed.expect("getconf prints a glibc version"));
    }
}
