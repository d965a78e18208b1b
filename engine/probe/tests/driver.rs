//! The driver's two halves (`gpu.driver_identity`) and the libraries' search paths
//! (`*.libraries.*.linkage`) on machines built under a fixture root: the kernel module's files
//! under `/proc` and `/sys`, the user-space driver libraries where the NVIDIA container toolkit
//! puts them, a `cuda-compat` directory on `LD_LIBRARY_PATH`.

use aorta_probe::{probe, ProbeOptions, Snapshot};
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `/proc/driver/nvidia/version` as the project's H200 machine printed it (tests/fixtures/cuda).
const PROC_VERSION: &str = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n";

/// A GPU machine without GPU tools: the module's files, the control node, and the driver's
/// user-space libraries in the distro's library directory, as `libx.so.1 -> libx.so.<version>`.
fn nvidia_machine(dir: &Path, module: Option<&str>, userspace: &str) -> PathBuf {
    let root = dir.join("root");
    let w = |p: &str, body: &str| {
        let f = root.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, body).unwrap();
    };
    w("/proc/driver/nvidia/version", PROC_VERSION);
    w("/dev/nvidiactl", "");
    if let Some(v) = module {
        w("/sys/module/nvidia/version", &format!("{v}\n"));
        w("/sys/module/nvidia/srcversion", "7A1B5C0F6D2E3A4B5C6D7E8\n");
    }
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    for name in ["libcuda", "libnvidia-ml"] {
        w(
            &format!("/usr/lib/x86_64-linux-gnu/{name}.so.{userspace}"),
            "stand-in",
        );
        symlink(
            format!("{name}.so.{userspace}"),
            lib.join(format!("{name}.so.1")),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    root
}

fn opts(dir: &Path, root: PathBuf, ld_library_path: Option<&Path>) -> ProbeOptions {
    let mut env: BTreeMap<String, String> = [
        ("PATH", dir.join("bin").display().to_string()),
        ("HOME", "/nonexistent".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(p) = ld_library_path {
        env.insert("LD_LIBRARY_PATH".into(), p.display().to_string());
    }
    ProbeOptions {
        env,
        root,
        ..ProbeOptions::default()
    }
}

#[test]
fn module_and_userspace_of_one_release_agree() {
    let d = tempfile::tempdir().unwrap();
    let root = nvidia_machine(d.path(), Some("580.159.04"), "580.159.04");
    let s = probe(&opts(d.path(), root.clone(), None));
    let id = &s.gpu.driver_identity;
    assert_eq!(id.module.as_deref(), Some("nvidia"));
    assert_eq!(id.module_version.as_deref(), Some("580.159.04"));
    assert_eq!(
        id.module_version_source.as_deref(),
        Some("/sys/module/nvidia/version")
    );
    assert_eq!(
        id.module_srcversion.as_deref(),
        Some("7A1B5C0F6D2E3A4B5C6D7E8")
    );
    assert_eq!(id.device_node, Some(true));
    for name in ["libcuda", "libnvidia-ml"] {
        let l = &id.userspace[name];
        assert_eq!(l.version.as_deref(), Some("580.159.04"), "{name}");
        assert_eq!(l.origin.as_deref(), Some("system"), "{name}");
        assert_eq!(
            l.path.as_deref(),
            Some(
                root.join(format!("usr/lib/x86_64-linux-gnu/{name}.so.1"))
                    .to_str()
                    .unwrap()
            )
        );
    }
    assert_eq!(id.mismatch, None);
    // Without /sys/module/nvidia the module's version comes from /proc.
    std::fs::remove_dir_all(root.join("sys")).unwrap();
    let id = probe(&opts(d.path(), root, None)).gpu.driver_identity;
    assert_eq!(
        (
            id.module_version.as_deref(),
            id.module_version_source.as_deref()
        ),
        (Some("580.159.04"), Some("/proc/driver/nvidia/version"))
    );
    assert_eq!(id.module_srcversion, None);
}

/// A container whose `cuda-compat` libcuda is on `LD_LIBRARY_PATH` (what NVIDIA's images do on
/// an older host driver): the loader takes it, and the snapshot says it is not the module's.
#[test]
fn a_forward_compat_libcuda_is_a_mismatch_named_with_its_path() {
    let d = tempfile::tempdir().unwrap();
    let root = nvidia_machine(d.path(), Some("570.124.06"), "570.124.06");
    let compat = root.join("usr/local/cuda-12.9/compat");
    std::fs::create_dir_all(&compat).unwrap();
    std::fs::write(compat.join("libcuda.so.575.57.08"), "stand-in").unwrap();
    symlink("libcuda.so.575.57.08", compat.join("libcuda.so.1")).unwrap();
    let s = probe(&opts(d.path(), root, Some(&compat)));
    let id = &s.gpu.driver_identity;
    assert_eq!(
        id.userspace["libcuda"].version.as_deref(),
        Some("575.57.08")
    );
    assert_eq!(
        id.userspace["libcuda"].origin.as_deref(),
        Some("ld-library-path")
    );
    assert_eq!(
        id.userspace["libnvidia-ml"].version.as_deref(),
        Some("570.124.06")
    );
    let m = id.mismatch.as_deref().expect("a mismatch");
    assert!(
        m.starts_with("the nvidia kernel module is 570.124.06 but the user-space driver is libcuda 575.57.08 ("),
        "{m}"
    );
    assert!(m.contains("compat/libcuda.so.1"), "{m}");
    assert!(!m.contains("libnvidia-ml"), "{m}");
    // Never keyed: the same machine with the mismatch keys as without it.
    let mut same = s.clone();
    same.gpu.driver_identity.mismatch = None;
    same.gpu.driver_identity.userspace.clear();
    let rules = aorta_probe::KeyRules::default();
    assert_eq!(s.key(&rules).hash, same.key(&rules).hash);
    // The brief says so.
    assert!(s
        .summary()
        .contains("driver mismatch: the nvidia kernel module is 570.124.06"));
}

/// A library whose file name carries no release (a copy named `libcuda.so.1`) is no evidence
/// of a mismatch.
#[test]
fn a_userspace_library_without_a_release_in_its_name_is_not_a_mismatch() {
    let d = tempfile::tempdir().unwrap();
    let root = nvidia_machine(d.path(), Some("580.159.04"), "580.159.04");
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    std::fs::remove_file(lib.join("libcuda.so.1")).unwrap();
    std::fs::remove_file(lib.join("libcuda.so.580.159.04")).unwrap();
    std::fs::write(lib.join("libcuda.so.1"), "a copy").unwrap();
    let id = probe(&opts(d.path(), root, None)).gpu.driver_identity;
    assert_eq!(id.userspace["libcuda"].version, None);
    assert!(id.userspace["libcuda"].path.is_some());
    assert_eq!(id.mismatch, None);
}

#[test]
fn an_amd_machine_records_the_amdgpu_module_and_no_userspace() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    for (p, body) in [
        ("sys/module/amdgpu/version", "6.12.12\n"),
        ("sys/module/amdgpu/srcversion", "A1B2C3D4E5F60718293A4B5\n"),
        ("dev/kfd", ""),
    ] {
        std::fs::create_dir_all(root.join(p).parent().unwrap()).unwrap();
        std::fs::write(root.join(p), body).unwrap();
    }
    std::fs::create_dir_all(d.path().join("bin")).unwrap();
    let s = probe(&opts(d.path(), root, None));
    let id = &s.gpu.driver_identity;
    assert_eq!(s.gpu.vendor.as_deref(), Some("amd"));
    assert_eq!(
        (id.module.as_deref(), id.module_version.as_deref()),
        (Some("amdgpu"), Some("6.12.12"))
    );
    assert_eq!(id.device_node, Some(true));
    assert!(id.userspace.is_empty() && id.mismatch.is_none());
    // A CPU machine has no driver at all.
    let e = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(e.path().join("bin")).unwrap();
    let cpu = probe(&opts(e.path(), e.path().join("root"), None));
    assert_eq!(cpu.gpu.driver_identity, Default::default());
}

/// The effective copy of a library is read for its search paths: a real shared object built
/// here and found on `LD_LIBRARY_PATH`; a stand-in text file says why it has none.
#[test]
fn the_effective_library_carries_its_rpath_and_runpath() {
    let d = tempfile::tempdir().unwrap();
    let root = nvidia_machine(d.path(), Some("580.159.04"), "580.159.04");
    let libdir = d.path().join("lib");
    std::fs::create_dir_all(&libdir).unwrap();
    let src = d.path().join("x.c");
    std::fs::write(&src, "int cudart_stand_in(void) { return 13; }\n").unwrap();
    let built = |name: &str, flags: &[&str]| {
        let out = libdir.join(name);
        match Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .args(flags)
            .status()
        {
            Ok(s) => assert!(s.success(), "cc: {s}"),
            Err(e) => {
                eprintln!("no cc ({e}): skipped");
                return false;
            }
        }
        true
    };
    if !built(
        "libcudart.so.13.0.96",
        &[
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN:$ORIGIN/../lib64",
        ],
    ) || !built(
        "libnccl.so.2.28.9",
        &["-Wl,--disable-new-dtags", "-Wl,-rpath,/opt/nccl/lib"],
    ) {
        return;
    }
    symlink("libcudart.so.13.0.96", libdir.join("libcudart.so.13")).unwrap();
    symlink("libnccl.so.2.28.9", libdir.join("libnccl.so.2")).unwrap();
    std::fs::write(libdir.join("libcublas.so.13"), "stand-in").unwrap();
    let s: Snapshot = probe(&opts(d.path(), root, Some(&libdir)));
    let libs = &s.cuda.libraries;
    let cudart = &libs["cudart"].linkage;
    assert_eq!(cudart.runpath.as_deref(), Some("$ORIGIN:$ORIGIN/../lib64"));
    assert_eq!(
        (cudart.rpath.as_deref(), cudart.effective.as_deref()),
        (None, Some("runpath"))
    );
    let nccl = &libs["nccl"].linkage;
    assert_eq!(
        (nccl.rpath.as_deref(), nccl.effective.as_deref()),
        (Some("/opt/nccl/lib"), Some("rpath"))
    );
    assert_eq!(nccl.tags, ["rpath"]);
    let cublas = &libs["cublas"].linkage;
    assert_eq!(cublas.effective, None);
    assert!(
        cublas
            .error
            .as_deref()
            .unwrap()
            .ends_with("is not an ELF file"),
        "{cublas:?}"
    );
    // A library not found has nothing to read.
    assert_eq!(libs["cudnn"].linkage, Default::default());
    // Not partial: the library's identity is whole without its search paths.
    assert!(
        !s.partial_reasons.iter().any(|r| r.field.contains("cublas")),
        "{:?}",
        s.partial_reasons
    );
}
