//! The `cuda` and `rocm` sections: the GPU software stack. They start beside the interpreter and
//! the GPU tools (`nvcc`, the linker cache and `rocm-sdk` each on a thread; the wheel libraries
//! guessed from the interpreter's layout hashed on the caller's) and finish once the python and
//! GPU sections are known: every library resolved, what is left hashed, and the versions torch
//! links against filled in.

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::gpu::Gpus;
use crate::libs::{self, FileHasher, Location};
use crate::python::{self, PySection};
use crate::schema::{Cuda, DriverIdentity, Nvcc, Rocm};
use crate::util::{Reasons, Steps};
use crate::{cuda, driver, rocm, ProbeCache};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

/// Where the stack is looked for, with what, and where library hashes are kept.
pub(crate) struct Machine<'a> {
    pub root: &'a Path,
    pub env: &'a BTreeMap<String, String>,
    pub tools: &'a Tools,
    pub timeout: Duration,
    pub cache: Option<&'a ProbeCache>,
}

/// The two sections, finished.
pub(crate) struct Stack {
    pub cuda: Cuda,
    pub rocm: Rocm,
    /// `gpu.driver_identity`: it needs the loader's search path, known here.
    pub driver: DriverIdentity,
    /// `probe.hashed_bytes`: what hashing read this time (not what the cache answered).
    pub hashed_bytes: u64,
}

/// The first phase, under way.
pub(crate) struct Started<'s> {
    nvcc: ScopedJoinHandle<'s, Option<Result<(PathBuf, String), ProbeError>>>,
    ldconfig: ScopedJoinHandle<'s, Vec<PathBuf>>,
    rocm_sdk: ScopedJoinHandle<'s, Option<String>>,
    toolkit: Option<PathBuf>,
    hasher: FileHasher,
}

/// Starts the tools on threads of `s`, then hashes the guessed wheel libraries here (step
/// `prehash`): a cold probe's slowest step, so the others overlap with it.
pub(crate) fn start<'s>(
    s: &'s Scope<'s, '_>,
    m: &'s Machine<'s>,
    interp: Option<&'s Path>,
    steps: &'s Steps,
) -> Started<'s> {
    let hasher = FileHasher::load(m.cache.map(ProbeCache::hashes_path).as_deref());
    let ldconfig = s.spawn(move || {
        let _clock = steps.clock("ldconfig");
        libs::ldconfig(m.root, m.tools, m.timeout)
    });
    let rocm_sdk = s.spawn(move || rocm::sdk_root(m.tools, interp, m.timeout));
    let toolkit = cuda::toolkit_root(m.root, m.env);
    let bin: Vec<PathBuf> = toolkit.iter().map(|tk| tk.join("bin")).collect();
    let nvcc = s.spawn(move || cuda::nvcc(m.tools, &bin, m.timeout));
    if let Some(i) = interp {
        let guessed = python::guess_site_packages(i);
        // The guess looks in the wheels only: no loader paths yet.
        let (no_ld, no_ldconfig) = (
            Location::dirs("ld-library-path", []),
            Location::ldconfig(Vec::new()),
        );
        let search = cuda::Search {
            site_dirs: &guessed,
            dists: None,
            ld_library_path: &no_ld,
            torch_dir: None,
            ldconfig: &no_ldconfig,
            toolkit: None,
            root: m.root,
        };
        let (_, files) = cuda::libraries(&search);
        let _clock = steps.clock("prehash");
        hasher.hash_all(&files, threads());
    }
    Started {
        nvcc,
        ldconfig,
        rocm_sdk,
        toolkit,
        hasher,
    }
}

impl Started<'_> {
    /// Resolves, hashes (step `hash`) and versions every library, now that `py` says where
    /// packages are and `gpus` which vendor is there; fills `py.pytorch`'s library versions.
    pub(crate) fn finish(
        self,
        m: &Machine,
        py: &mut PySection,
        gpus: &Gpus,
        reasons: &Reasons,
        steps: &Steps,
    ) -> Stack {
        let (root, env) = (m.root, m.env);
        let nvcc = match self.nvcc.join().ok().flatten() {
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
        // The loader's two lists, built once for the driver, CUDA and ROCm.
        let ldconfig = Location::ldconfig(self.ldconfig.join().unwrap_or_default());
        let ld_library_path = Location::ld_library_path(env);
        let rocm_sdk = self.rocm_sdk.join().ok().flatten();

        // CUDA.
        let cuda_expected = gpus.nvidia || py.pytorch.cuda_version.is_some();
        let driver = if gpus.nvidia {
            driver::nvidia(&driver::Search {
                root,
                ld_library_path: &ld_library_path,
                ldconfig: &ldconfig,
            })
        } else if gpus.amd {
            driver::amd(root)
        } else {
            DriverIdentity::default()
        };
        let torch_dir = py.pytorch.torch_dir.as_deref().map(PathBuf::from);
        let search = cuda::Search {
            site_dirs: &py.site_dirs,
            // What the python section scanned in the report's directories, site_dirs.
            dists: py.dists.as_deref(),
            ld_library_path: &ld_library_path,
            torch_dir: torch_dir.as_deref(),
            ldconfig: &ldconfig,
            toolkit: self.toolkit.as_deref(),
            root,
        };
        let (mut cuda_libs, mut to_hash) = cuda::libraries(&search);

        // ROCm.
        let rocm_expected = (gpus.amd && !gpus.nvidia) || py.pytorch.hip_version.is_some();
        let inputs = rocm::Inputs {
            root,
            ld_library_path: &ld_library_path,
            candidates: rocm::candidates(root, env, rocm_sdk.as_deref(), &py.site_dirs),
            site_dirs: &py.site_dirs,
            torch_dir: torch_dir.as_deref(),
            dists: &py.python.distributions,
            expected: rocm_expected,
        };
        let (mut rocm_sec, rocm_files) = rocm::section(inputs, reasons);
        rocm_sec.gpu_arch = gpus.arch.clone();
        rocm_sec.hip_platform = if rocm_expected {
            Some("amd".into())
        } else if rocm_sec.root.is_some() && gpus.nvidia {
            Some("nvidia".into())
        } else {
            None
        };
        to_hash.extend(rocm_files);

        let hashes = {
            let _clock = steps.clock("hash");
            self.hasher.hash_all(&to_hash, threads())
        };
        for (name, lib) in cuda_libs.iter_mut() {
            libs::apply_hashes(lib, &hashes, &format!("cuda.libraries.{name}"), reasons);
            if cuda_expected && py.pytorch.cuda_version.is_some() && lib.path.is_none() {
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
            &mut py.pytorch,
            &cuda_libs,
            &rocm_sec.libraries,
            py.deep.as_ref(),
            reasons,
        );
        let hashed_bytes = self
            .hasher
            .hashed_bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        if let Some(c) = m.cache {
            self.hasher.save(&c.hashes_path());
        }
        Stack {
            cuda: cuda::section(
                gpus.driver_api.clone(),
                nvcc,
                self.toolkit.as_deref(),
                cuda_libs,
            ),
            rocm: rocm_sec,
            driver,
            hashed_bytes,
        }
    }
}

/// Hashing threads: reading libraries is mostly waiting for the disk on a cold page cache, so
/// more requests in flight help; 16 at most.
fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(16)
}
