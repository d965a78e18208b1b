//! `cuda`: the driver's CUDA version (from `nvidia-smi`), the toolkit and `nvcc`, and the six
//! libraries with versions and hashes, found both on the system library path and in the
//! interpreter's `site-packages/nvidia/*/lib` wheels.

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::libs::{self, Location, VersionHints, CUDA_SPECS};
use crate::schema::{Cuda, Library, Nvcc, Toolkit};
use crate::util::{read_text, rooted};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `Cuda compilation tools, release 13.0, V13.0.88`.
pub(crate) fn parse_nvcc(text: &str) -> (Option<String>, Option<String>) {
    let Some(line) = text.lines().find(|l| l.contains("release")) else {
        return (None, None);
    };
    let release = line
        .split("release")
        .nth(1)
        .and_then(|r| r.trim().split(',').next())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let version = line
        .split(", V")
        .nth(1)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    (version, release)
}

/// `nvcc --version`, from `PATH` or the toolkit's `bin/`.
pub(crate) fn nvcc(
    tools: &Tools,
    bin: &[PathBuf],
    t: Duration,
) -> Option<Result<(PathBuf, String), ProbeError>> {
    tools.which("nvcc", bin).map(|p| {
        tools
            .run(&p, &["--version"], t)
            .and_then(|o| o.check("nvcc --version"))
            .map(|o| (p, o.stdout))
    })
}

/// `$CUDA_HOME`, `$CUDA_PATH`, then `/usr/local/cuda` if it exists.
pub(crate) fn toolkit_root(root: &Path, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|k| env.get(*k))
        .map(PathBuf::from)
        .find(|p| p.is_dir())
        .or_else(|| Some(rooted(root, "/usr/local/cuda")).filter(|p| p.is_dir()))
}

/// `version.json` (CUDA ≥ 11.1: `{"cuda": {"version": "13.0.2"}}`) or `version.txt`.
pub(crate) fn toolkit_version(tk: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(tk.join("version.json")) {
        if let Some(v) = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|j| j.pointer("/cuda/version")?.as_str().map(str::to_string))
        {
            return Some(v);
        }
    }
    read_text(&tk.join("version.txt"))
        .ok()
        .and_then(|t| t.split_whitespace().last().map(str::to_string))
}

/// Inputs to library resolution gathered by the orchestrator.
pub(crate) struct Search<'a> {
    /// The interpreter's `sys.path` directories (site-packages among them).
    pub site_dirs: &'a [PathBuf],
    /// The distributions in `site_dirs` when the python step has read them already (every
    /// `nvidia-*` one among them), so they are not scanned for again.
    pub dists: Option<&'a [crate::installed::Dist]>,
    pub ld_library_path: &'a Location,
    /// The imported torch's package directory (`…/site-packages/torch`), when the python step
    /// found one: its `lib/libtorch_cuda.so` is what asks for the libraries.
    pub torch_dir: Option<&'a Path>,
    pub ldconfig: &'a Location,
    pub toolkit: Option<&'a Path>,
    pub root: &'a Path,
}

/// Whether the `nvidia-*` wheels come before `LD_LIBRARY_PATH` for the libraries torch asks
/// for. glibc searches a requesting object's `DT_RPATH` before `LD_LIBRARY_PATH` but its
/// `DT_RUNPATH` after it, so which copy torch loads depends on how `libtorch_cuda.so` was
/// linked: with `DT_RUNPATH` (today's wheels) a copy on `LD_LIBRARY_PATH` wins, and reporting
/// the wheel's would hash a file the trials never load. Without a torch to ask, the wheels
/// first, as before; with no library on `LD_LIBRARY_PATH` the order does not matter (nothing
/// read).
fn wheels_before_ld_library_path(s: &Search) -> bool {
    let requester = s
        .torch_dir
        .filter(|_| !s.ld_library_path.files.is_empty())
        .map(|t| t.join("lib/libtorch_cuda.so"))
        .filter(|p| p.is_file());
    match requester {
        Some(lib) => crate::linkage::of(&lib).effective.as_deref() == Some("rpath"),
        None => true,
    }
}

/// Resolves the six libraries; returns the section's map and every file to hash.
pub(crate) fn libraries(s: &Search) -> (BTreeMap<String, Library>, Vec<PathBuf>) {
    let wheels = Location::cuda_wheels(s.site_dirs);
    let ld = s.ld_library_path.clone();
    let (first, second) = match wheels_before_ld_library_path(s) {
        true => (wheels, ld),
        false => (ld, wheels),
    };
    let locations = vec![
        first,
        second,
        s.ldconfig.clone(),
        Location::cuda_toolkit(s.toolkit),
    ];
    let hints = VersionHints {
        dists: match s.dists {
            Some(known) => crate::installed::nvidia_dists(known.iter().cloned()),
            None => crate::installed::dist_infos(s.site_dirs),
        },
    };
    let mut include = Vec::new();
    if let Some(tk) = s.toolkit {
        include.push(tk.join("include"));
    }
    include.push(rooted(s.root, "/usr/include"));
    let mut out = BTreeMap::new();
    let mut files = Vec::new();
    for spec in &CUDA_SPECS {
        let (lib, f) = libs::resolve(spec, &locations, &hints, &include);
        files.extend(f);
        out.insert(spec.name.to_string(), lib);
    }
    (out, files)
}

/// Assembles the section (libraries already resolved and hashed).
pub(crate) fn section(
    driver_api: Option<String>,
    nvcc: Nvcc,
    toolkit: Option<&Path>,
    libraries: BTreeMap<String, Library>,
) -> Cuda {
    let tk_version = toolkit
        .and_then(toolkit_version)
        .or_else(|| nvcc.version.clone());
    let runtime_version = libraries.get("cudart").and_then(|l| l.version.clone());
    let mut cuda = Cuda {
        driver_api_version: driver_api,
        runtime_version,
        toolkit: Toolkit {
            root: toolkit.map(|p| p.display().to_string()),
            version: tk_version,
        },
        nvcc,
        libraries: Cuda::default().libraries,
    };
    cuda.libraries.extend(libraries);
    cuda
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// torch's `libtorch_cuda.so` built with `cc` and the given linker flags (and a NEEDED-free
    /// body: only its dynamic tags matter), a cuBLAS in its wheel and another on
    /// `LD_LIBRARY_PATH`; the effective copy's origin, or `None` without a compiler.
    fn effective_cublas(linker: &[&str]) -> Option<String> {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("site-packages");
        let torch_lib = site.join("torch/lib");
        let wheel = site.join("nvidia/cublas/lib");
        let ld = d.path().join("ld");
        for dir in [&torch_lib, &wheel, &ld] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let src = d.path().join("t.c");
        std::fs::write(&src, "int torch_stand_in(void) { return 0; }\n").unwrap();
        let ok = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(torch_lib.join("libtorch_cuda.so"))
            .arg(&src)
            .args(linker)
            .status()
            .ok()?;
        assert!(ok.success());
        std::fs::write(wheel.join("libcublas.so.13"), "wheel copy").unwrap();
        std::fs::write(ld.join("libcublas.so.13"), "LD_LIBRARY_PATH copy").unwrap();
        let torch = site.join("torch");
        let sites = [site];
        let s = Search {
            site_dirs: &sites,
            dists: Some(&[]),
            ld_library_path: &Location::dirs("ld-library-path", [ld]),
            torch_dir: Some(&torch),
            ldconfig: &Location::ldconfig(Vec::new()),
            toolkit: None,
            root: Path::new("/"),
        };
        let (libs, _) = libraries(&s);
        libs["cublas"].origin.clone()
    }

    #[test]
    fn ld_library_path_wins_over_a_runpath_and_loses_to_an_rpath() {
        let runpath = [
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../../nvidia/cublas/lib",
        ];
        let Some(origin) = effective_cublas(&runpath) else {
            return; // no compiler
        };
        assert_eq!(origin, "ld-library-path");
        let rpath = [
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../../nvidia/cublas/lib",
        ];
        assert_eq!(effective_cublas(&rpath).as_deref(), Some("wheel"));
    }

    #[test]
    fn nvcc_13() {
        let t = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\nBuilt on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";
        assert_eq!(parse_nvcc(t), (Some("13.0.88".into()), Some("13.0".into())));
        assert_eq!(parse_nvcc("garbage"), (None, None));
    }
}
