//! The probe's orchestration: phase one runs every slow step at once (the interpreter, the GPU
//! tools, `nvcc`, `ldconfig`, host files, hashing the guessed wheel libraries); phase two
//! reads what the interpreter pointed at (torch's `version.py`, dist-info), assembles the
//! sections and hashes what is left. A cold probe therefore takes about as long as its slowest
//! step (hashing the wheel libraries, or `import torch` with `--deep`), not their sum.

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::schema::*;
use crate::util::{rooted, Reasons};
use crate::{cache, cuda, envvars, gpu, host, libs, python, rocm, util, ProbeCache, ProbeOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

fn timed<T>(steps: &Mutex<BTreeMap<String, u64>>, name: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let v = f();
    steps
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.to_string(), t.elapsed().as_millis() as u64);
    v
}

/// Raw answers of the phase that runs in parallel.
#[derive(Default)]
struct Gathered {
    report: Option<(Result<python::PyReport, ProbeError>, &'static str)>,
    /// What the report pointed at, read in the interpreter's thread.
    files: python::Files,
    nvidia: Option<gpu::NvidiaRaw>,
    agents: Option<Result<String, ProbeError>>,
    amd_static: Option<Result<String, ProbeError>>,
    nvcc: Option<Result<(PathBuf, String), ProbeError>>,
    ldconfig: Vec<PathBuf>,
    rocm_sdk: Option<String>,
    host: Host,
}

pub(crate) fn collect(
    opts: &ProbeOptions,
    reasons: &Reasons,
    steps: &Mutex<BTreeMap<String, u64>>,
) -> Snapshot {
    let tools = Tools::new(&opts.env);
    let (root, env, t) = (opts.root.as_path(), &opts.env, opts.timeouts.tool);
    let interp = python::choose_interpreter(opts.python.as_deref(), env, &tools);
    let hasher =
        libs::FileHasher::load(opts.cache.as_ref().map(ProbeCache::hashes_path).as_deref());
    let toolkit = cuda::toolkit_root(root, env);
    let rocm_fallback: Vec<PathBuf> = env
        .get("ROCM_PATH")
        .map(|p| Path::new(p).join("bin"))
        .into_iter()
        .chain([rooted(root, "/opt/rocm/bin")])
        .collect();

    // Phase 1: every slow thing at once. Hashing the guessed wheel libraries dominates a cold
    // probe (`import torch` with --deep); the interpreter and the GPU tools overlap with it.
    let mut g = Gathered::default();
    std::thread::scope(|s| {
        let py = interp.as_ref().map(|i| {
            s.spawn(|| {
                let r = timed(steps, "python", || {
                    cache::python_report(
                        i,
                        opts.cache.as_ref(),
                        &tools,
                        env,
                        opts.timeouts.python,
                        opts.deep,
                    )
                });
                // version.py, dist-info, RECORD: read here, alongside nvidia-smi and hashing.
                let files = timed(steps, "torch-files", || match &r.0 {
                    Ok(rep) => python::read_files(i, rep, reasons),
                    Err(_) => python::Files::default(),
                });
                (r, files)
            })
        });
        let smi = gpu::nvidia_smi_path(&tools, root);
        let nv = smi.map(|smi| {
            let (tools, smi) = (&tools, smi.clone());
            s.spawn(move || {
                timed(steps, "nvidia-smi", || {
                    std::thread::scope(|s2| {
                        let q = s2.spawn(|| gpu::nvidia_query(tools, &smi, t));
                        let v = s2.spawn(|| {
                            tools
                                .run(&smi, &["--version"], t)
                                .and_then(|o| o.check("nvidia-smi --version"))
                                .map(|o| o.stdout)
                        });
                        let topo = s2.spawn(|| {
                            tools
                                .run(&smi, &["topo", "-m"], t)
                                .and_then(|o| o.check("nvidia-smi topo -m"))
                                .map(|o| o.stdout)
                        });
                        gpu::NvidiaRaw {
                            query: q.join().ok(),
                            version: v.join().ok(),
                            topo: topo.join().ok(),
                        }
                    })
                })
            })
        });
        let amd = s.spawn(|| {
            timed(steps, "amd", || {
                let agents = tools
                    .which("rocm_agent_enumerator", &rocm_fallback)
                    .map(|p| {
                        tools
                            .run(&p, &[], t)
                            .and_then(|o| o.check("rocm_agent_enumerator"))
                            .map(|o| o.stdout)
                    });
                let st = tools
                    .which("amd-smi", &rocm_fallback)
                    .map(|_| tools.stdout_of("amd-smi", &rocm_fallback, &["static", "--json"], t));
                (agents, st)
            })
        });
        let nvcc = s.spawn(|| {
            let fallback: Vec<PathBuf> = toolkit.iter().map(|tk| tk.join("bin")).collect();
            tools.which("nvcc", &fallback).map(|p| {
                tools
                    .run(&p, &["--version"], t)
                    .and_then(|o| o.check("nvcc --version"))
                    .map(|o| (p, o.stdout))
            })
        });
        let ldc = s.spawn(|| {
            timed(steps, "ldconfig", || {
                if let Some(paths) = libs::read_ld_so_cache(&rooted(root, "/etc/ld.so.cache")) {
                    return paths;
                }
                tools
                    .stdout_of(
                        "ldconfig",
                        &[rooted(root, "/sbin"), rooted(root, "/usr/sbin")],
                        &["-p"],
                        t,
                    )
                    .map(|o| libs::parse_ldconfig(&o))
                    .unwrap_or_default()
            })
        });
        let sdk = s.spawn(|| {
            let beside = interp
                .as_ref()
                .and_then(|i| i.parent())
                .map(Path::to_path_buf)
                .into_iter()
                .collect::<Vec<_>>();
            tools
                .which("rocm-sdk", &beside)
                .and_then(|p| tools.run(&p, &["path", "--root"], t).ok())
                .filter(|o| o.success())
                .map(|o| o.stdout.trim().to_string())
                .filter(|s| !s.is_empty())
        });
        let host = s.spawn(|| timed(steps, "host", || host::collect(root, &tools, t, reasons)));
        if let Some(i) = &interp {
            let guessed = python::guess_site_packages(i);
            let search = cuda::Search {
                site_dirs: &guessed,
                dists: None,
                ld_library_path: Vec::new(),
                ldconfig: &[],
                toolkit: None,
                root,
            };
            let (_, files) = cuda::libraries(&search);
            timed(steps, "prehash", || hasher.hash_all(&files, threads()));
        }
        if let Some((r, files)) = py.and_then(|h| h.join().ok()) {
            (g.report, g.files) = (Some(r), files);
        }
        g.nvidia = nv.and_then(|h| h.join().ok());
        (g.agents, g.amd_static) = amd.join().unwrap_or_default();
        g.nvcc = nvcc.join().ok().flatten();
        g.ldconfig = ldc.join().unwrap_or_default();
        g.rocm_sdk = sdk.join().ok().flatten();
        g.host = host.join().unwrap_or_default();
    });

    let mut snap = Snapshot {
        env_vars: envvars::collect(env, &opts.extra_env_vars),
        host: std::mem::take(&mut g.host),
        ..Snapshot::default()
    };
    host::container_from_env(&mut snap.host.runtime, env);

    // Python and torch.
    let report = match (&interp, g.report.take()) {
        (None, _) => {
            reasons.add(
                "python",
                "no interpreter: python3 is not on PATH (pass --python)",
            );
            snap.probe.python_cache = Some("none".into());
            None
        }
        (Some(_), None) => {
            reasons.add("python", "the interpreter step failed unexpectedly");
            None
        }
        (Some(_), Some((r, state))) => {
            snap.probe.python_cache = Some(state.into());
            reasons.ok("python", r)
        }
    };
    let files = std::mem::take(&mut g.files);
    if let Some(i) = &interp {
        python::python_env(&mut snap.host.runtime, i, report.as_ref(), env);
        match &report {
            Some(rep) => {
                (snap.python, snap.pytorch) = python::sections(i, rep, &files, env, reasons)
            }
            None => snap.python.executable = Some(i.display().to_string()),
        }
    }
    let site_dirs: Vec<PathBuf> = match &report {
        Some(r) => r.search_dirs(),
        None => interp
            .as_deref()
            .map(python::guess_site_packages)
            .unwrap_or_default(),
    };

    // GPU: NVIDIA if its tools or driver are there, else AMD, else a CPU machine.
    let nvidia_present = g.nvidia.is_some()
        || rooted(root, "/proc/driver/nvidia/version").exists()
        || rooted(root, "/dev/nvidiactl").exists();
    let amd_present = rooted(root, "/dev/kfd").exists()
        || rooted(root, "/sys/module/amdgpu").exists()
        || g.agents.as_ref().is_some_and(|a| {
            a.as_ref()
                .is_ok_and(|o| !gpu::parse_agents(o).gfx_targets.is_empty())
        });
    let mut driver_api = None;
    if nvidia_present {
        (snap.gpu, driver_api) =
            gpu::from_nvidia(g.nvidia.take().unwrap_or_default(), root, reasons);
    } else if amd_present {
        snap.gpu = amd_gpu(&g, root, reasons);
    } else {
        snap.gpu.count = Some(0);
    }
    if let Some(Ok(a)) = &g.agents {
        snap.rocm.gpu_arch = gpu::parse_agents(a);
    } else if let (Some(Err(e)), true) = (&g.agents, amd_present) {
        reasons.add("rocm.gpu_arch", e);
    }

    // CUDA.
    let cuda_expected = nvidia_present || snap.pytorch.cuda_version.is_some();
    let nvcc = match g.nvcc {
        Some(Ok((p, text))) => {
            let (version, release) = cuda::parse_nvcc(&text);
            Nvcc {
                path: Some(p.display().to_string()),
                version,
                release,
            }
        }
        Some(Err(e)) => {
            reasons.add("cuda.nvcc", e);
            Nvcc::default()
        }
        None => Nvcc::default(),
    };
    let ld_path: Vec<PathBuf> = env
        .get("LD_LIBRARY_PATH")
        .map(|p| {
            std::env::split_paths(p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let search = cuda::Search {
        site_dirs: &site_dirs,
        // `files` holds what the python step scanned in the report's directories, site_dirs.
        dists: report.as_ref().map(|_| files.dists.as_slice()),
        ld_library_path: ld_path,
        ldconfig: &g.ldconfig,
        toolkit: toolkit.as_deref(),
        root,
    };
    let (mut cuda_libs, mut to_hash) = cuda::libraries(&search);

    // ROCm.
    let torch_dir = snap.pytorch.torch_dir.as_deref().map(PathBuf::from);
    let rocm_expected = (amd_present && !nvidia_present) || snap.pytorch.hip_version.is_some();
    let cands = rocm::candidates(root, env, g.rocm_sdk.as_deref(), &site_dirs);
    let inputs = rocm::Inputs {
        root,
        env,
        candidates: cands,
        site_dirs: &site_dirs,
        torch_dir: torch_dir.as_deref(),
        dists: &snap.python.distributions,
        expected: rocm_expected,
    };
    let (mut rocm_sec, rocm_files) = rocm::section(inputs, reasons);
    rocm_sec.gpu_arch = std::mem::take(&mut snap.rocm.gpu_arch);
    rocm_sec.hip_platform = if rocm_expected {
        Some("amd".into())
    } else if rocm_sec.root.is_some() && nvidia_present {
        Some("nvidia".into())
    } else {
        None
    };
    to_hash.extend(rocm_files);

    let hashes = timed(steps, "hash", || hasher.hash_all(&to_hash, threads()));
    for (name, lib) in cuda_libs.iter_mut() {
        libs::apply_hashes(lib, &hashes, &format!("cuda.libraries.{name}"), reasons);
        if cuda_expected && snap.pytorch.cuda_version.is_some() && lib.path.is_none() {
            reasons.add(
                &format!("cuda.libraries.{name}"),
                "not found in <sys.path>/nvidia/*/lib, LD_LIBRARY_PATH, ldconfig or the toolkit",
            );
        }
    }
    for (name, lib) in rocm_sec.libraries.iter_mut() {
        libs::apply_hashes(lib, &hashes, &format!("rocm.libraries.{name}"), reasons);
    }
    python::library_versions(
        &mut snap.pytorch,
        &cuda_libs,
        &rocm_sec.libraries,
        report.as_ref().and_then(|r| r.deep.as_ref()),
        reasons,
    );
    snap.cuda = cuda::section(driver_api, nvcc, toolkit.as_deref(), cuda_libs);
    snap.rocm = rocm_sec;
    snap.probe.hashed_bytes = Some(
        hasher
            .hashed_bytes
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    if let Some(c) = &opts.cache {
        hasher.save(&c.hashes_path());
    }
    snap
}

fn amd_gpu(g: &Gathered, root: &Path, reasons: &Reasons) -> Gpu {
    let mut gpu = Gpu {
        vendor: Some("amd".into()),
        ..Gpu::default()
    };
    match &g.amd_static {
        Some(Ok(text)) => match gpu::parse_amd_static(text) {
            Ok(d) => {
                gpu.devices = d;
                gpu.source = Some("amd-smi".into());
                gpu.driver_version = gpu::amd_driver_version(text);
            }
            Err(e) => reasons.add("gpu.devices", e),
        },
        Some(Err(e)) => reasons.add("gpu.devices", e),
        None => {}
    }
    if gpu.devices.is_empty() {
        if let Some(Ok(a)) = &g.agents {
            let arch = gpu::parse_agents(a);
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
        } else if g.amd_static.is_none() {
            reasons.add("gpu.devices", "an AMD GPU driver is loaded but neither amd-smi nor rocm_agent_enumerator is on PATH or in $ROCM_PATH/bin, /opt/rocm/bin");
        }
    }
    gpu.count = (!gpu.devices.is_empty()).then_some(gpu.devices.len() as u32);
    if gpu.driver_version.is_none() {
        gpu.driver_version = util::read_text(&rooted(root, "/sys/module/amdgpu/version")).ok();
    }
    gpu
}

/// Hashing threads: reading libraries is mostly waiting for the disk on a cold page cache, so
/// more requests in flight help; 16 at most.
fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(16)
}
