//! The probe against two fake machines (tests/fixtures/README.md): a 2×H200 CUDA box with a
//! venv of nvidia wheels, and an 8×MI300X ROCm box with a conda env. Every tool is a bash
//! script on a PATH built here, every fixed path (`/proc`, `/opt/rocm`, …) lives under the
//! fixture root, so each section is exercised without a GPU.

use aorta_probe::{diff, probe, KeyRules, ProbeCache, ProbeOptions, Snapshot};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn env(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

pub fn cuda_opts() -> ProbeOptions {
    let fx = fixture("cuda");
    let r = fx.join("root");
    let path = format!(
        "{}:{}:{}",
        fx.join("bin").display(),
        r.join("usr/local/cuda/bin").display(),
        r.join("opt/venv/bin").display()
    );
    ProbeOptions {
        env: env(&[
            ("PATH", path),
            ("VIRTUAL_ENV", r.join("opt/venv").display().to_string()),
            ("CUDA_HOME", r.join("usr/local/cuda").display().to_string()),
            ("CUDA_DEVICE_MAX_CONNECTIONS", "1".into()),
            ("NCCL_DEBUG", "WARN".into()),
            ("HOME", "/nonexistent".into()),
        ]),
        root: r,
        ..ProbeOptions::default()
    }
}

pub fn rocm_opts() -> ProbeOptions {
    let fx = fixture("rocm");
    let r = fx.join("root");
    let conda = r.join("opt/conda/envs/py312");
    ProbeOptions {
        env: env(&[
            (
                "PATH",
                format!(
                    "{}:{}",
                    fx.join("bin").display(),
                    conda.join("bin").display()
                ),
            ),
            ("ROCM_PATH", r.join("opt/rocm-6.4.1").display().to_string()),
            ("CONDA_PREFIX", conda.display().to_string()),
            ("CONDA_DEFAULT_ENV", "py312".into()),
            ("HSA_NO_SCRATCH_RECLAIM", "1".into()),
            ("AMP_DTYPE", "bf16".into()),
        ]),
        extra_env_vars: ["AMP_DTYPE".to_string()].into(),
        root: r,
        ..ProbeOptions::default()
    }
}

/// The fixture's absolute location varies by checkout: snapshots show `[FIXTURE]`.
fn scrub(text: &str) -> String {
    text.replace(&fixture("").display().to_string(), "[FIXTURE]/")
}

fn scrubbed(s: &Snapshot) -> Snapshot {
    Snapshot::from_json(&scrub(&s.to_json_pretty())).unwrap()
}

fn reasons(s: &Snapshot) -> Vec<String> {
    s.partial_reasons
        .iter()
        .map(|r| format!("{}: {}", r.field, r.reason))
        .collect()
}

#[test]
fn cuda_fixture_fills_every_section() {
    let s = probe(&cuda_opts());
    assert!(!s.partial, "{:#?}", reasons(&s));
    // host
    assert_eq!(
        s.host.kernel_release.as_deref(),
        Some("6.18.44-fc-v973-gpu")
    );
    assert_eq!(s.host.glibc_version.as_deref(), Some("2.39"));
    assert_eq!(s.host.distro.version_id.as_deref(), Some("24.04"));
    assert_eq!(s.host.cpu.logical_count, Some(2));
    assert!(s.host.cpu.simd.contains(&"amx_bf16".to_string()));
    assert_eq!(s.host.memory_total_gib, Some(126));
    assert_eq!(s.host.numa_nodes, Some(1));
    assert_eq!(s.host.runtime.container.as_deref(), Some("docker"));
    assert_eq!(
        s.host.runtime.container_id.as_deref(),
        Some("6def09f9d5d4cb90cc2dd4a4fcb5cd8c")
    );
    assert_eq!(s.host.runtime.python_env.as_deref(), Some("venv"));
    // gpu
    assert_eq!(s.gpu.vendor.as_deref(), Some("nvidia"));
    assert_eq!(s.gpu.count, Some(2));
    assert_eq!(s.gpu.driver_version.as_deref(), Some("580.159.04"));
    let d = &s.gpu.devices[0];
    assert_eq!(
        (d.name.as_deref(), d.arch.as_deref(), d.memory_total_mib),
        (Some("NVIDIA H200"), Some("sm_90"), Some(143771))
    );
    assert_eq!(
        (
            d.ecc_mode.as_deref(),
            d.mig_mode.as_deref(),
            d.power_limit_w
        ),
        (Some("enabled"), Some("disabled"), Some(700.0))
    );
    assert_eq!(
        (
            d.app_clock_graphics_mhz,
            d.app_clock_memory_mhz,
            d.vbios_version.as_deref()
        ),
        (Some(1980), Some(3201), Some("96.00.A5.00.1A"))
    );
    assert_eq!(
        d.uuid.as_deref(),
        Some("GPU-bc7134ed-f97c-a652-13bd-aab91e232bd2")
    );
    assert_eq!(s.gpu.topology.links.len(), 1);
    assert_eq!(s.gpu.topology.links[0].link, "NV18");
    // cuda
    let c = &s.cuda;
    assert_eq!(c.driver_api_version.as_deref(), Some("13.0"));
    assert_eq!(c.runtime_version.as_deref(), Some("13.0.96"));
    assert_eq!(c.nvcc.version.as_deref(), Some("13.0.88"));
    let lib = |n: &str| &c.libraries[n];
    assert_eq!(lib("cublas").version.as_deref(), Some("13.1.0.3"));
    assert_eq!(lib("cublas").origin.as_deref(), Some("wheel"));
    assert_eq!(
        lib("cublas").version_source.as_deref(),
        Some("dist-info:nvidia-cublas")
    );
    assert_eq!(
        lib("cublas").candidates.len(),
        2,
        "the wheel copy and the toolkit's: {:#?}",
        lib("cublas").candidates
    );
    assert_eq!(
        lib("cublas").candidates[1].version.as_deref(),
        Some("13.1.0.3")
    );
    assert_eq!(lib("cudnn").version.as_deref(), Some("9.19.0.56"));
    let cudnn_files: Vec<&str> = lib("cudnn").files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        cudnn_files,
        [
            "libcudnn.so.9",
            "libcudnn_engines_precompiled.so.9",
            "libcudnn_graph.so.9",
            "libcudnn_ops.so.9"
        ]
    );
    assert_eq!(lib("nccl").version.as_deref(), Some("2.28.9"));
    assert_eq!(lib("nvrtc").version.as_deref(), Some("13.0.88"));
    assert_eq!(lib("nvrtc").files.len(), 2, "NVRTC and its builtins");
    let expected = blake3::hash(b"fake libcublas.so.13 (wheel nvidia-cu13)\n")
        .to_hex()
        .to_string();
    assert_eq!(
        lib("cublas").files[0].blake3.as_deref(),
        Some(expected.as_str())
    );
    // python + pytorch
    assert_eq!(s.python.version.as_deref(), Some("3.12.3"));
    assert_eq!(
        s.python
            .distributions
            .get("nvidia-nccl-cu13")
            .map(String::as_str),
        Some("2.28.9")
    );
    // pytorch, from torch/version.py, the dist-info and the libraries: no import
    let t = &s.pytorch;
    assert_eq!(t.collected.as_deref(), Some(aorta_probe::COLLECTED_FILES));
    assert_eq!(t.version.as_deref(), Some("2.11.0+cu130"));
    assert!(t.git_commit.as_deref().unwrap().starts_with("70d99e9"));
    assert_eq!(t.debug, Some(false));
    assert!(t
        .torch_dir
        .as_deref()
        .unwrap()
        .ends_with("site-packages/torch"));
    assert_eq!(
        (
            t.cuda_version.as_deref(),
            t.cudnn_version.as_deref(),
            t.nccl_version.as_deref()
        ),
        (Some("13.0"), Some("9.19.0"), Some("2.28.9"))
    );
    assert_eq!(t.triton_version.as_deref(), Some("3.6.0"));
    assert_eq!(
        t.record_blake3.as_deref().map(str::len),
        Some(64),
        "torch-2.11.0.dist-info/RECORD"
    );
    // the import-only fields: null, not missing, and not a reason
    assert!(
        t.build.flags.is_empty() && t.build.settings.is_empty() && t.build.arch_list.is_empty()
    );
    assert_eq!(t.cudnn_compiled_version, None);
    assert_eq!((t.sdpa.flash, t.numerics.matmul_allow_tf32), (None, None));
    assert_eq!(
        (t.allocator.backend.as_deref(), t.cuda_initialized),
        (None, None)
    );
    assert!(t.loaded_libraries.is_empty());
    // env vars; ROCm absent without being partial
    assert_eq!(
        s.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"].as_deref(),
        Some("1")
    );
    assert_eq!(s.env_vars["HIP_VISIBLE_DEVICES"], None);
    assert_eq!(s.rocm.root, None);
    assert_eq!(s.rocm.libraries.len(), 6);
}

/// `--deep`: the import-only fields come from the (captured) `import torch` report, and every
/// field the default key uses is the same as without it.
#[test]
fn deep_probe_adds_the_import_only_fields_and_keeps_the_key() {
    let plain = probe(&cuda_opts());
    let mut opts = cuda_opts();
    opts.deep = true;
    let s = probe(&opts);
    assert!(!s.partial, "{:#?}", reasons(&s));
    let t = &s.pytorch;
    assert_eq!(t.collected.as_deref(), Some(aorta_probe::COLLECTED_IMPORT));
    assert_eq!(t.build.flags["USE_CUDA"], Value::Bool(true));
    assert_eq!(t.build.settings["CUDNN_VERSION"], "9.19.0");
    assert!(t.build.arch_list.contains(&"sm_90".to_string()));
    assert_eq!(t.cudnn_compiled_version.as_deref(), Some("9.19.0"));
    assert_eq!((t.sdpa.flash, t.sdpa.cudnn), (Some(true), Some(true)));
    assert_eq!(
        (t.numerics.matmul_allow_tf32, t.numerics.cudnn_allow_tf32),
        (Some(false), Some(true))
    );
    assert_eq!(t.numerics.preferred_blas_library.as_deref(), Some("Cublas"));
    assert_eq!(t.allocator.backend.as_deref(), Some("native"));
    assert_eq!(t.cuda_initialized, Some(false));
    assert_eq!(t.import_seconds, Some(3.62));
    assert!(!t.loaded_libraries.is_empty());
    let rules = KeyRules::default();
    assert_eq!(
        s.key(&rules),
        plain.key(&rules),
        "a deep probe changes no default-keyed field"
    );
    let d = diff(&plain, &s, &rules);
    assert!(
        !d.key_changed() && d.key_relevant_len() == 0,
        "{}",
        d.render("plain", "deep")
    );
    // A recipe that keys an import-only field needs the deep probe, and then its key has it.
    let flags = KeyRules::new(vec!["pytorch.build.flags".into()], vec![]);
    assert!(flags.needs_deep());
    assert_eq!(
        s.key(&flags).fields["pytorch.build.flags.USE_CUDA"],
        Value::Bool(true)
    );
}

/// `--deep` checks the files against the imported torch: another torch version or another
/// library copy than the probe chose becomes a reason (the keyed fields stay the files').
#[test]
fn deep_probe_reports_where_the_import_disagrees_with_the_files() {
    let fx = tempfile::tempdir().unwrap();
    copy_tree(&fixture("cuda"), fx.path());
    let data = fx.path().join("data/torch-report.json");
    let text = std::fs::read_to_string(&data)
        .unwrap()
        .replace(
            "\"version\": \"2.11.0+cu130\"",
            "\"version\": \"2.11.1+cu130\"",
        )
        .replace(
            "nvidia/nccl/lib/libnccl.so.2",
            "nvidia/cu13/lib/libcufft.so.12",
        )
        .replace("\"runtime\": 91900", "\"runtime\": 92000");
    std::fs::write(&data, text).unwrap();
    let mut opts = cuda_opts();
    rebase(&mut opts, &fixture("cuda"), fx.path());
    let plain = probe(&opts);
    opts.deep = true;
    let s = probe(&opts);
    let r = reasons(&s);
    assert!(
        r.iter()
            .any(|r| r.starts_with("pytorch.version: import torch loaded 2.11.1+cu130")),
        "{r:#?}"
    );
    assert!(
        r.iter().any(|r| r == "pytorch.cudnn_version: the library files say 9.19.0, the imported torch reports 9.20.0"),
        "{r:#?}"
    );
    assert_eq!(
        s.pytorch.version.as_deref(),
        Some("2.11.0+cu130"),
        "the files' version is kept"
    );
    assert_eq!(s.key(&KeyRules::default()), plain.key(&KeyRules::default()));
}

/// A deep probe whose `import torch` crashes (no report at all) still describes torch from its
/// files: same key as without `--deep`, and a reason instead of a missing `python` section.
#[test]
fn a_crashing_deep_import_falls_back_to_the_files() {
    let fx = tempfile::tempdir().unwrap();
    copy_tree(&fixture("cuda"), fx.path());
    std::fs::write(
        fx.path().join("data/torch-report.json"),
        "Segmentation fault (core dumped)\n",
    )
    .unwrap();
    let mut opts = cuda_opts();
    rebase(&mut opts, &fixture("cuda"), fx.path());
    let cache = tempfile::tempdir().unwrap();
    opts.cache = Some(ProbeCache::new(cache.path()));
    let plain = probe(&opts);
    opts.deep = true;
    let s = probe(&opts);
    let r = reasons(&s);
    assert_eq!(r.len(), 1, "{r:#?}");
    assert!(
        r[0].starts_with("pytorch.collected: --deep: import torch failed (")
            && r[0].contains("printed no probe report"),
        "{r:#?}"
    );
    assert_eq!(
        s.pytorch.collected.as_deref(),
        Some(aorta_probe::COLLECTED_FILES)
    );
    assert_eq!(s.pytorch.version.as_deref(), Some("2.11.0+cu130"));
    assert_eq!(s.key(&KeyRules::default()), plain.key(&KeyRules::default()));
    let again = probe(&opts);
    assert_eq!(
        again.probe.python_cache.as_deref(),
        Some("hit"),
        "the default answer came from the cache; the failed deep run was not cached"
    );
    assert_eq!(reasons(&again), r, "and the deep run was tried again");
}

fn copy_tree(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let md = std::fs::symlink_metadata(&src).unwrap();
        if md.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if md.is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
            std::fs::set_permissions(
                &dst,
                std::fs::Permissions::from_mode(md.permissions().mode()),
            )
            .unwrap();
        }
    }
}

/// Points options built for the fixture at `from` at a copy of it in `to`.
fn rebase(opts: &mut ProbeOptions, from: &Path, to: &Path) {
    let (a, b) = (from.display().to_string(), to.display().to_string());
    for v in opts.env.values_mut() {
        *v = v.replace(&a, &b);
    }
    opts.root = PathBuf::from(opts.root.display().to_string().replace(&a, &b));
}

#[test]
fn rocm_fixture_fills_every_section() {
    let s = probe(&rocm_opts());
    assert!(!s.partial, "{:#?}", reasons(&s));
    assert_eq!(s.host.runtime.container.as_deref(), Some("podman"));
    assert_eq!(
        s.host.runtime.container_id.as_deref(),
        Some("4f3c2b1a0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a")
    );
    assert_eq!(
        (
            s.host.runtime.python_env.as_deref(),
            s.host.runtime.conda_env.as_deref()
        ),
        (Some("conda"), Some("py312"))
    );
    assert_eq!((s.host.cpu.sockets, s.host.numa_nodes), (Some(2), Some(2)));
    assert_eq!(s.gpu.vendor.as_deref(), Some("amd"));
    assert_eq!(s.gpu.count, Some(8));
    assert_eq!(s.gpu.driver_version.as_deref(), Some("6.12.12"));
    assert_eq!(
        (
            s.gpu.devices[7].name.as_deref(),
            s.gpu.devices[7].arch.as_deref(),
            s.gpu.devices[7].memory_total_mib
        ),
        (Some("AMD Instinct MI300X"), Some("gfx942"), Some(196592))
    );
    let r = &s.rocm;
    assert_eq!(
        (
            r.version.as_deref(),
            r.root_source.as_deref(),
            r.kmd_version.as_deref()
        ),
        (Some("6.4.1-120"), Some("ROCM_PATH"), Some("6.12.12"))
    );
    assert_eq!(r.gpu_arch.agent_arch_counts.get("gfx942"), Some(&8));
    let lib = |n: &str| &r.libraries[n];
    assert_eq!(
        (
            lib("hipblaslt").version.as_deref(),
            lib("hipblaslt").build.as_deref()
        ),
        (Some("0.12.1"), Some("6f0a0a1e"))
    );
    assert_eq!(lib("rocblas").version.as_deref(), Some("4.4.1"));
    assert_eq!(lib("miopen").version.as_deref(), Some("3.4.0"));
    assert_eq!(lib("rccl").version.as_deref(), Some("2.22.3"));
    assert_eq!(
        (
            lib("composable_kernel").version.as_deref(),
            lib("composable_kernel").build.as_deref()
        ),
        (Some("1.1.0"), Some("7c1a0a2b9"))
    );
    assert_eq!(lib("hip").version.as_deref(), Some("6.4.43484"));
    assert_eq!(lib("rocblas").origin.as_deref(), Some("rocm-root"));
    assert!(lib("rocblas").files[0].blake3.is_some());
    assert!(lib("hipblaslt")
        .kernel_db_revision
        .as_deref()
        .unwrap()
        .starts_with("filenames-blake3:"));
    assert_eq!(r.hip_platform.as_deref(), Some("amd"));
    let t = &s.pytorch;
    assert_eq!(
        (t.hip_version.as_deref(), t.cuda_version.as_deref()),
        (Some("6.4.43484-123eb5128"), None)
    );
    assert_eq!(
        (t.nccl_version.as_deref(), t.cudnn_version.as_deref()),
        (Some("2.22.3"), None),
        "RCCL for a HIP torch"
    );
    assert_eq!(t.triton_version.as_deref(), Some("3.4.0"));
    assert_eq!(t.record_blake3, None, "no RECORD in this env");
    let mut deep = rocm_opts();
    deep.deep = true;
    let d = probe(&deep);
    assert!(!d.partial, "{:#?}", reasons(&d));
    assert_eq!(d.pytorch.build.flags["USE_ROCM_CK_SDPA"], Value::Bool(true));
    assert!(d.pytorch.build.arch_list.contains(&"gfx942".to_string()));
    assert_eq!(d.key(&KeyRules::default()), s.key(&KeyRules::default()));
    assert_eq!(
        s.env_vars["AMP_DTYPE"].as_deref(),
        Some("bf16"),
        "a mitigation variable passed by the CLI"
    );
    assert_eq!(s.cuda.driver_api_version, None);
    assert_eq!(s.cuda.libraries.len(), 6);
}

#[test]
fn two_probes_give_the_same_key_and_warm_runs_no_python() {
    let cache = tempfile::tempdir().unwrap();
    let log = cache.path().join("python-runs.log");
    let mut opts = cuda_opts();
    opts.env
        .insert("AORTA_FAKE_PY_LOG".into(), log.display().to_string());
    opts.cache = Some(ProbeCache::new(cache.path().join("probe-cache")));
    let runs = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
            .collect()
    };
    let cold = probe(&opts);
    let warm = probe(&opts);
    assert_eq!(cold.probe.python_cache.as_deref(), Some("miss"));
    assert_eq!(warm.probe.python_cache.as_deref(), Some("hit"));
    assert_eq!(runs(), ["files"], "the warm probe started no interpreter");
    assert!(cold.probe.hashed_bytes.unwrap() > 0);
    assert_eq!(
        warm.probe.hashed_bytes,
        Some(0),
        "library hashes came from the cache"
    );
    let rules = KeyRules::default();
    assert_eq!(
        cold.key(&rules),
        warm.key(&rules),
        "same hash and keyed fields"
    );
    let uncached = probe(&cuda_opts());
    assert_eq!(uncached.probe.python_cache.as_deref(), Some("off"));
    assert_eq!(
        cold.key(&rules),
        uncached.key(&rules),
        "with or without a cache"
    );
    // --deep: paid once per install, and never a different key.
    opts.deep = true;
    let deep_cold = probe(&opts);
    let deep_warm = probe(&opts);
    assert_eq!(runs(), ["files", "deep"]);
    assert_eq!(
        (
            deep_cold.probe.python_cache.as_deref(),
            deep_warm.probe.python_cache.as_deref()
        ),
        (Some("miss"), Some("hit"))
    );
    assert_eq!(deep_cold.pytorch, deep_warm.pytorch);
    assert_eq!(deep_cold.key(&rules), cold.key(&rules));
    // A deep run also refreshes the default entry: wipe it, deep-probe, then a default probe
    // is a hit.
    opts.deep = false;
    for e in std::fs::read_dir(cache.path().join("probe-cache")).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("python-")
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    opts.deep = true;
    probe(&opts);
    opts.deep = false;
    let after = probe(&opts);
    assert_eq!(after.probe.python_cache.as_deref(), Some("hit"));
    assert_eq!(runs(), ["files", "deep", "deep"]);
    assert_eq!(after.key(&rules), cold.key(&rules));
    assert_eq!(after.pytorch, cold.pytorch);
}

#[test]
fn a_driver_knob_changes_the_key() {
    let a = probe(&cuda_opts());
    let mut opts = cuda_opts();
    opts.env
        .insert("CUDA_DEVICE_MAX_CONNECTIONS".into(), "8".into());
    let b = probe(&opts);
    let rules = KeyRules::default();
    assert_ne!(a.key(&rules).hash, b.key(&rules).hash);
    assert_eq!(
        b.key(&rules).fields["env_vars.CUDA_DEVICE_MAX_CONNECTIONS"],
        Value::String("8".into())
    );
    let d = diff(&a, &b, &rules);
    assert!(d.key_changed());
    assert_eq!(d.len(), 1, "{}", d.render("a", "b"));
    let e = &d.sections[0].entries[0];
    assert_eq!(
        (e.path.as_str(), e.key_relevant),
        ("env_vars.CUDA_DEVICE_MAX_CONNECTIONS", true)
    );
}

#[test]
fn machine_unique_fields_do_not_change_the_key() {
    let a = probe(&cuda_opts());
    let mut b = a.clone();
    b.host.hostname = Some("h200-node-b".into());
    b.captured_at = Some("2030-01-01T00:00:00Z".into());
    b.host.runtime.container_id = Some("0123456789abcdef".into());
    b.host.memory_available_bytes = Some(1);
    b.gpu.devices[0].uuid = Some("GPU-00000000-0000-0000-0000-000000000000".into());
    b.gpu.devices[0].serial = Some("1".into());
    b.gpu.devices[0].volatile.temperature_c = Some(80);
    b.python.executable = Some("/home/bob/.venv/bin/python3".into());
    b.cuda.libraries.get_mut("cublas").unwrap().path = Some("/elsewhere/libcublas.so.13".into());
    b.probe.duration_ms = Some(1);
    let rules = KeyRules::default();
    assert_eq!(a.key(&rules), b.key(&rules));
    let d = diff(&a, &b, &rules);
    assert!(
        !d.key_changed() && d.len() == 8 && d.key_relevant_len() == 0,
        "{}",
        d.render("a", "b")
    );
    // A recipe may pin results to one host, or drop a keyed field.
    let pinned = KeyRules::new(vec!["host.hostname".into()], vec![]);
    assert_ne!(a.key(&pinned).hash, b.key(&pinned).hash);
    let mut c = a.clone();
    c.env_vars.insert("NCCL_DEBUG".into(), Some("INFO".into()));
    assert_ne!(a.key(&rules).hash, c.key(&rules).hash);
    let loose = KeyRules::new(vec![], vec!["env_vars.NCCL_DEBUG".into()]);
    assert_eq!(a.key(&loose).hash, c.key(&loose).hash);
}

#[test]
fn diff_of_cuda_and_rocm_reads_clearly() {
    let (a, b) = (
        scrubbed(&probe(&cuda_opts())),
        scrubbed(&probe(&rocm_opts())),
    );
    let d = diff(&a, &b, &KeyRules::default());
    assert!(d.key_changed());
    insta::assert_snapshot!("diff_cuda_rocm", d.render("cuda.json", "rocm.json"));
    insta::assert_snapshot!(
        "diff_cuda_rocm_key_only",
        d.key_only().render("cuda.json", "rocm.json")
    );
}

#[test]
fn summaries() {
    insta::assert_snapshot!("summary_cuda", scrub(&probe(&cuda_opts()).summary()));
    insta::assert_snapshot!("summary_rocm", scrub(&probe(&rocm_opts()).summary()));
    let mut deep = cuda_opts();
    deep.deep = true;
    insta::assert_snapshot!("summary_cuda_deep", scrub(&probe(&deep).summary()));
}

#[test]
fn snapshot_json_round_trips_and_reads_leniently() {
    let s = probe(&cuda_opts());
    let text = s.to_json_pretty();
    assert_eq!(Snapshot::from_json(&text).unwrap(), s);
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["future_section"] = serde_json::json!({"x": 1});
    v.as_object_mut().unwrap().remove("rocm");
    let back = Snapshot::from_json(&v.to_string()).unwrap();
    assert_eq!(
        back.rocm.libraries.len(),
        6,
        "a missing section is back-filled"
    );
    // AORTA's env.json is named, and refused: it cannot key trials (tests/import.rs reads it).
    let e = Snapshot::from_json(r#"{"schema_version": "1.7"}"#).unwrap_err();
    assert!(matches!(&e, aorta_probe::SnapshotError::Aorta { schema, .. } if schema == "1.7"));
    assert!(e.to_string().contains("AORTA 0.2.1"));
    let e = Snapshot::from_json(r#"{"schema_version": "2.0"}"#).unwrap_err();
    assert!(matches!(&e, aorta_probe::SnapshotError::OtherSchema(s) if s == "2.0"));
    assert!(matches!(
        Snapshot::from_json("[]"),
        Err(aorta_probe::SnapshotError::NotObject)
    ));
}

#[test]
fn field_lookup() {
    let s = probe(&cuda_opts());
    assert_eq!(
        s.field("gpu.devices.0.arch").unwrap(),
        Value::String("sm_90".into())
    );
    assert_eq!(
        s.field("cuda.libraries.cudnn.version").unwrap(),
        Value::String("9.19.0.56".into())
    );
    assert_eq!(
        s.field("rocm.root.x").unwrap_err().to_string(),
        "Cannot descend into 'x' at 'rocm.root': value is null"
    );
    assert!(s.field("gpu.nope").unwrap_err().to_string().starts_with(
        "Key 'nope' not found at 'gpu'. Available keys: count, devices, driver_identity, driver_version"
    ));
}

/// The real probe of the project's H200 machine (2026-12-02, `envprobe probe`), kept as the
/// issue's acceptance record: it must stay readable and name what the issue requires.
#[test]
fn real_h200_snapshot() {
    let text = std::fs::read_to_string(fixture("h200-env.json")).unwrap();
    let s = Snapshot::from_json(&text).unwrap();
    assert!(!s.partial, "{:#?}", reasons(&s));
    let d = &s.gpu.devices[0];
    assert_eq!(
        (d.name.as_deref(), d.arch.as_deref()),
        (Some("NVIDIA H200"), Some("sm_90"))
    );
    assert!(s.gpu.driver_version.as_deref().unwrap().starts_with("580."));
    assert_eq!(s.cuda.driver_api_version.as_deref(), Some("13.0"));
    let t = &s.pytorch;
    assert!(
        t.version.as_deref().unwrap().starts_with("2.11.0")
            && t.git_commit.as_deref().unwrap().starts_with("70d99e9")
    );
    assert_eq!(
        (t.cudnn_version.as_deref(), t.nccl_version.as_deref()),
        (Some("9.19.0"), Some("2.28.9"))
    );
    assert_eq!(
        t.cuda_initialized,
        Some(false),
        "the probe's torch process created no CUDA context"
    );
    assert_eq!(
        s.cuda.libraries["cublasLt"].files[0].size_bytes,
        Some(541_595_600)
    );
    let rules = KeyRules::default();
    assert_eq!(
        Snapshot::from_json(&s.to_json_pretty())
            .unwrap()
            .key(&rules),
        s.key(&rules)
    );
}

/// AORTA 0.3.0's fields (search paths, the driver's two halves, isolation and namespace) are
/// recorded, yet no stored key changed: a snapshot keys the same with or without them.
#[test]
fn the_0_3_0_fields_change_no_key() {
    let s = probe(&cuda_opts());
    assert_eq!(s.gpu.driver_identity.module.as_deref(), Some("nvidia"));
    assert!(s.host.runtime.container_detected.is_some());
    // The fixture's libraries are one-line stand-ins: read, and said not to be ELF.
    let cublas = &s.cuda.libraries["cublas"].linkage;
    assert!(cublas
        .error
        .as_deref()
        .unwrap()
        .ends_with("is not an ELF file"));
    let mut without = s.clone();
    without.gpu.driver_identity = Default::default();
    without.host.runtime.container_detected = None;
    without.host.runtime.namespace = Some("mnt:0000000000000000".into());
    for lib in without.cuda.libraries.values_mut() {
        lib.linkage = Default::default();
    }
    let rules = KeyRules::default();
    assert_eq!(s.key(&rules), without.key(&rules));
}
