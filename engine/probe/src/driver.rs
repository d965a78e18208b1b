//! `gpu.driver_identity`: the GPU driver's kernel module, which a container shares with its
//! host, against the user-space driver libraries the process would load, which a container
//! brings or has mounted (AORTA 0.3.0's `amdgpu_driver` host/container split, and NVIDIA's
//! counterpart). On NVIDIA the two must be the same release: `libnvidia-ml` refuses a module
//! of another version ("Driver/library version mismatch") and `libcuda` does too, except under
//! CUDA forward compatibility (the `cuda-compat` package of a data-center GPU's container).

use crate::libs::{self, LibSpec, Location, VersionHints};
use crate::schema::{DriverIdentity, DriverLibrary};
use crate::util::{read_text, rooted};
use std::collections::BTreeMap;
use std::path::Path;

/// The user-space half of the NVIDIA driver: the CUDA driver API and NVML.
const NVIDIA_USERSPACE: [LibSpec; 2] = [
    LibSpec::plain("libcuda", "libcuda.so"),
    LibSpec::plain("libnvidia-ml", "libnvidia-ml.so"),
];

/// Where `dlopen("libcuda.so.1")` looks when the caller names no path: `LD_LIBRARY_PATH`, the
/// linker cache, the loader's default directories.
pub(crate) struct Search<'a> {
    pub root: &'a Path,
    pub ld_library_path: &'a Location,
    pub ldconfig: &'a Location,
}

/// The NVIDIA driver's two halves.
pub(crate) fn nvidia(s: &Search) -> DriverIdentity {
    let (module_version, source) = nvidia_module_version(s.root);
    let locations = [
        s.ld_library_path.clone(),
        s.ldconfig.clone(),
        Location::dirs(
            "system",
            [
                "/lib64",
                "/usr/lib64",
                "/lib/x86_64-linux-gnu",
                "/usr/lib/x86_64-linux-gnu",
            ]
            .iter()
            .map(|d| rooted(s.root, d)),
        ),
    ];
    let userspace: BTreeMap<String, DriverLibrary> = NVIDIA_USERSPACE
        .iter()
        .map(|spec| {
            let (lib, _) = libs::resolve(spec, &locations, &VersionHints::default(), &[]);
            // Only a full version from the real file's name identifies a driver release; a
            // soname's major (`1`) says nothing about it.
            let full = lib.version_source.as_deref() == Some("file-name");
            let entry = DriverLibrary {
                version: lib.version.filter(|_| full),
                path: lib.path,
                origin: lib.origin,
            };
            (spec.name.to_string(), entry)
        })
        .collect();
    let mismatch = module_version
        .as_deref()
        .and_then(|m| mismatch(m, &userspace));
    DriverIdentity {
        module: Some("nvidia".into()),
        module_srcversion: read_text(&rooted(s.root, "/sys/module/nvidia/srcversion")).ok(),
        module_version,
        module_version_source: source,
        device_node: Some(rooted(s.root, "/dev/nvidiactl").exists()),
        userspace,
        mismatch,
    }
}

/// The amdgpu module (AORTA's `amdgpu_driver.kmd_version`, `kfd_device_present`). ROCm's
/// user-space runtime is versioned with ROCm and recorded under `rocm`, so nothing is compared.
pub(crate) fn amd(root: &Path) -> DriverIdentity {
    let path = "/sys/module/amdgpu/version";
    let module_version = read_text(&rooted(root, path)).ok();
    DriverIdentity {
        module: Some("amdgpu".into()),
        module_version_source: module_version.as_ref().map(|_| path.to_string()),
        module_version,
        module_srcversion: read_text(&rooted(root, "/sys/module/amdgpu/srcversion")).ok(),
        device_node: Some(rooted(root, "/dev/kfd").exists()),
        userspace: BTreeMap::new(),
        mismatch: None,
    }
}

/// `/sys/module/nvidia/version`, else the version in `/proc/driver/nvidia/version`'s first
/// line, with where it was read.
fn nvidia_module_version(root: &Path) -> (Option<String>, Option<String>) {
    let sys = "/sys/module/nvidia/version";
    if let Ok(v) = read_text(&rooted(root, sys)) {
        return (Some(v), Some(sys.into()));
    }
    let proc = "/proc/driver/nvidia/version";
    match read_text(&rooted(root, proc))
        .ok()
        .and_then(|t| proc_version(&t))
    {
        Some(v) => (Some(v), Some(proc.into())),
        None => (None, None),
    }
}

/// `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build …`: the
/// first all-numeric dotted word of the first line.
pub(crate) fn proc_version(text: &str) -> Option<String> {
    text.lines()
        .next()?
        .split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// What differs between the module and the user-space libraries, and what it usually means.
fn mismatch(module: &str, userspace: &BTreeMap<String, DriverLibrary>) -> Option<String> {
    let differing: Vec<String> = userspace
        .iter()
        .filter_map(|(name, l)| {
            let v = l.version.as_deref()?;
            (v != module).then(|| {
                format!(
                    "{name} {v} ({})",
                    l.path.as_deref().unwrap_or("path unknown")
                )
            })
        })
        .collect();
    if differing.is_empty() {
        return None;
    }
    Some(format!(
        "the nvidia kernel module is {module} but the user-space driver is {}: the container's driver libraries are not the host's (NVML and CUDA then fail to start), or CUDA forward compatibility (cuda-compat) is in use",
        differing.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_version_of_the_open_and_the_proprietary_module() {
        assert_eq!(
            proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Jul 31 00:50:41 UTC 2025\nGCC version:  gcc version 11.4.0\n").as_deref(),
            Some("580.159.04")
        );
        assert_eq!(
            proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n").as_deref(),
            Some("535.104.05")
        );
        assert_eq!(proc_version("garbage"), None);
    }
}
