//! `rocm`: AORTA §7's ROCm fields without its hard-coded `/opt/rocm` (AORTA issue #381:
//! wheel-based images have none).
//!
//! The root is the first that exists of `$ROCM_PATH`, `$ROCM_HOME`, `$HIP_PATH`, `rocm-sdk path
//! --root` (TheRock wheels), the wheel packages `_rocm_sdk_devel`/`_rocm_sdk_core` in the
//! interpreter's site-packages, `/opt/rocm`, and the newest `/opt/rocm-*` or `/opt/rocm/core-*`.
//! Versions come from headers (as AORTA), read directly instead of five `hipconfig` runs.

use crate::cmd::Tools;
use crate::libs::{self, LibSpec, Location, VersionHints};
use crate::schema::{Candidate, Library, Rocm};
use crate::util::{
    header_defines, nccl_version_from_code, read_text, rooted, version_cmp, version_from_defines,
    Reasons,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct RocmSpec {
    lib: LibSpec,
    /// `(header, [MAJOR, MINOR, PATCH], build define)` relative to `include/`.
    header: Option<(&'static str, [&'static str; 3], Option<&'static str>)>,
    /// Kernel database directory (relative to the root) and the file suffixes that count.
    kernel_db: Option<(&'static str, &'static [&'static str])>,
}

const SPECS: [RocmSpec; 6] = [
    RocmSpec {
        lib: LibSpec::plain("hip", "libamdhip64.so"),
        header: Some((
            "hip/hip_version.h",
            [
                "HIP_VERSION_MAJOR",
                "HIP_VERSION_MINOR",
                "HIP_VERSION_PATCH",
            ],
            Some("HIP_VERSION_GITHASH"),
        )),
        kernel_db: None,
    },
    RocmSpec {
        lib: LibSpec::plain("hipblaslt", "libhipblaslt.so"),
        header: Some((
            "hipblaslt/hipblaslt-version.h",
            [
                "HIPBLASLT_VERSION_MAJOR",
                "HIPBLASLT_VERSION_MINOR",
                "HIPBLASLT_VERSION_PATCH",
            ],
            Some("HIPBLASLT_VERSION_TWEAK"),
        )),
        kernel_db: Some(("lib/hipblaslt/library", &[".yaml", ".dat", ".co"])),
    },
    RocmSpec {
        lib: LibSpec::plain("rocblas", "librocblas.so"),
        header: Some((
            "rocblas/internal/rocblas-version.h",
            [
                "ROCBLAS_VERSION_MAJOR",
                "ROCBLAS_VERSION_MINOR",
                "ROCBLAS_VERSION_PATCH",
            ],
            Some("ROCBLAS_VERSION_TWEAK"),
        )),
        kernel_db: Some(("lib/rocblas/library", &[".yaml", ".dat", ".co"])),
    },
    RocmSpec {
        lib: LibSpec::plain("miopen", "libMIOpen.so"),
        header: Some((
            "miopen/version.h",
            [
                "MIOPEN_VERSION_MAJOR",
                "MIOPEN_VERSION_MINOR",
                "MIOPEN_VERSION_PATCH",
            ],
            Some("MIOPEN_VERSION_TWEAK"),
        )),
        kernel_db: Some(("share/miopen/db", &[".txt", ".kdb"])),
    },
    RocmSpec {
        lib: LibSpec::plain("rccl", "librccl.so"),
        header: None,
        kernel_db: None,
    },
    RocmSpec {
        lib: LibSpec::plain("composable_kernel", "\0none"),
        header: Some((
            "ck/version.h",
            ["CK_VERSION_MAJOR", "CK_VERSION_MINOR", "CK_VERSION_PATCH"],
            Some("CK_COMMIT_ID"),
        )),
        kernel_db: None,
    },
];

/// `rocm-sdk path --root` (the ROCm wheels' own tool), from `PATH` or beside the interpreter.
pub(crate) fn sdk_root(tools: &Tools, interp: Option<&Path>, t: Duration) -> Option<String> {
    let beside: Vec<PathBuf> = interp
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    tools
        .which("rocm-sdk", &beside)
        .and_then(|p| tools.run(&p, &["path", "--root"], t).ok())
        .filter(|o| o.success())
        .map(|o| o.stdout.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Every existing ROCm root in precedence order.
pub(crate) fn candidates(
    root: &Path,
    env: &BTreeMap<String, String>,
    rocm_sdk_root: Option<&str>,
    site_dirs: &[PathBuf],
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |p: PathBuf, origin: &str| {
        if p.is_dir() && !out.iter().any(|c| Path::new(&c.path) == p) {
            let version = read_text(&p.join(".info/version")).ok();
            out.push(Candidate {
                path: p.display().to_string(),
                origin: origin.to_string(),
                version,
            });
        }
    };
    for var in ["ROCM_PATH", "ROCM_HOME", "HIP_PATH"] {
        if let Some(v) = env.get(var).filter(|v| !v.trim().is_empty()) {
            push(PathBuf::from(v.trim()), var);
        }
    }
    if let Some(r) = rocm_sdk_root {
        push(PathBuf::from(r), "rocm-sdk");
    }
    for s in site_dirs {
        for pkg in ["_rocm_sdk_devel", "_rocm_sdk_core"] {
            push(s.join(pkg), "wheel");
        }
    }
    push(rooted(root, "/opt/rocm"), "/opt/rocm");
    let mut versioned: Vec<(String, PathBuf)> = Vec::new();
    for n in crate::libs::list_dir(&rooted(root, "/opt")) {
        if let Some(v) = n.strip_prefix("rocm-") {
            versioned.push((v.to_string(), rooted(root, "/opt").join(&n)));
        }
    }
    for n in crate::libs::list_dir(&rooted(root, "/opt/rocm")) {
        if let Some(v) = n.strip_prefix("core-") {
            versioned.push((v.to_string(), rooted(root, "/opt/rocm").join(&n)));
        }
    }
    versioned.sort_by(|a, b| version_cmp(&b.0, &a.0));
    for (_, p) in versioned {
        push(p, "/opt/rocm-*");
    }
    out
}

/// Wheel-layout library dirs that hold the math libraries next to a `_rocm_sdk_core` root.
fn wheel_lib_dirs(site_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for s in site_dirs {
        for n in crate::libs::list_dir(s) {
            if n.starts_with("_rocm_sdk_libraries") || n == "_rocm_sdk_core" {
                out.push(s.join(n).join("lib"));
            }
        }
    }
    out.into_iter().filter(|d| d.is_dir()).collect()
}

/// What the ROCm section is built from.
pub(crate) struct Inputs<'a> {
    pub root: &'a Path,
    /// `LD_LIBRARY_PATH`'s libraries, listed once for the whole probe.
    pub ld_library_path: &'a Location,
    /// From [`candidates`]; the first is used.
    pub candidates: Vec<Candidate>,
    pub site_dirs: &'a [PathBuf],
    pub torch_dir: Option<&'a Path>,
    pub dists: &'a BTreeMap<String, String>,
    /// A ROCm GPU or a HIP build of torch: missing pieces are partial.
    pub expected: bool,
}

/// The section minus hashes; returns every file to hash.
pub(crate) fn section(inp: Inputs, reasons: &Reasons) -> (Rocm, Vec<PathBuf>) {
    let Inputs {
        root,
        ld_library_path,
        candidates: cands,
        site_dirs,
        torch_dir,
        dists,
        expected,
    } = inp;
    let mut r = Rocm {
        kmd_version: read_text(&rooted(root, "/sys/module/amdgpu/version")).ok(),
        ..Rocm::default()
    };
    let chosen = cands.first().cloned();
    r.candidates = cands;
    let Some(c) = chosen else {
        if expected {
            reasons.add("rocm.root", "no ROCm found (checked ROCM_PATH, ROCM_HOME, HIP_PATH, rocm-sdk, site-packages/_rocm_sdk_*, /opt/rocm, /opt/rocm-*)");
        }
        return (r, Vec::new());
    };
    let rr = PathBuf::from(&c.path);
    r.root = Some(c.path.clone());
    r.root_source = Some(c.origin.clone());
    r.version = read_text(&rr.join(".info/version")).ok().or_else(|| {
        dists
            .iter()
            .find(|(k, _)| k.starts_with("rocm-sdk-core") || *k == "rocm")
            .map(|(_, v)| v.clone())
    });
    r.version_dev = read_text(&rr.join(".info/version-dev")).ok();
    if r.version.is_none() && expected {
        reasons.add(
            "rocm.version",
            format!(
                "no {}/.info/version and no rocm-sdk-core distribution",
                rr.display()
            ),
        );
    }
    let mut lib_dirs = vec![rr.join("lib")];
    lib_dirs.extend(wheel_lib_dirs(site_dirs));
    let locations = vec![
        Location::dirs("rocm-root", lib_dirs),
        Location::dirs(
            "torch-bundled",
            torch_dir.map(|t| vec![t.join("lib")]).unwrap_or_default(),
        ),
        ld_library_path.clone(),
    ];
    let mut files = Vec::new();
    let include = rr.join("include");
    for s in &SPECS {
        let (mut lib, f) = libs::resolve(&s.lib, &locations, &VersionHints::default(), &[]);
        files.extend(f);
        // Headers describe the root's copy: trust them when the effective file lives there.
        let real_root = std::fs::canonicalize(&rr).unwrap_or_else(|_| rr.clone());
        let from_root = lib
            .path
            .as_ref()
            .is_none_or(|p| std::fs::canonicalize(p).is_ok_and(|p| p.starts_with(&real_root)));
        if let (Some((h, names, build)), true) = (s.header, from_root) {
            if let Ok(text) = std::fs::read_to_string(include.join(h)) {
                let d = header_defines(&text);
                if let Some(v) = version_from_defines(&d, names) {
                    lib.version = Some(v);
                    lib.version_source = Some(format!("header:{h}"));
                }
                lib.build = build
                    .and_then(|b| d.get(b).cloned())
                    .filter(|v| !v.is_empty());
            }
        }
        if s.lib.name == "rccl" {
            rccl_version(&mut lib, &include);
        }
        if let Some((dir, suffixes)) = s.kernel_db {
            lib.kernel_db_revision = kernel_db_revision(&rr.join(dir), suffixes);
        }
        r.libraries.insert(s.lib.name.to_string(), lib);
    }
    (r, files)
}

/// `NCCL_VERSION_CODE` of `include/rccl/rccl.h`, legacy and modern encodings.
fn rccl_version(lib: &mut Library, include: &Path) {
    let Ok(text) = std::fs::read_to_string(include.join("rccl/rccl.h")) else {
        return;
    };
    let d = header_defines(&text);
    if let Some(code) = d
        .get("NCCL_VERSION_CODE")
        .and_then(|c| c.parse::<u64>().ok())
    {
        lib.version = Some(nccl_version_from_code(code));
        lib.version_source = Some("header:rccl/rccl.h".into());
    }
}

/// `filenames-blake3:<hex>` over the newline-joined sorted names (non-recursive) with one of
/// `suffixes`: the kernel set changes exactly when this does (AORTA's sha256 recipe, blake3).
pub(crate) fn kernel_db_revision(dir: &Path, suffixes: &[&str]) -> Option<String> {
    if !dir.is_dir() {
        return None;
    }
    let names: Vec<String> = crate::libs::list_dir(dir)
        .into_iter()
        .filter(|n| suffixes.iter().any(|s| n.ends_with(s)))
        .collect();
    Some(format!(
        "filenames-blake3:{}",
        blake3::hash(names.join("\n").as_bytes()).to_hex()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_db_changes_with_names() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.co"), "").unwrap();
        std::fs::write(d.path().join("notes.md"), "").unwrap();
        let a = kernel_db_revision(d.path(), &[".co"]).unwrap();
        std::fs::write(d.path().join("b.co"), "").unwrap();
        assert_ne!(a, kernel_db_revision(d.path(), &[".co"]).unwrap());
        assert_eq!(
            kernel_db_revision(&d.path().join("missing"), &[".co"]),
            None
        );
    }

    #[test]
    fn root_precedence() {
        let d = tempfile::tempdir().unwrap();
        for p in ["opt/rocm-6.9.0", "opt/rocm-6.10.1", "env"] {
            std::fs::create_dir_all(d.path().join(p)).unwrap();
        }
        let env: BTreeMap<String, String> = [(
            "ROCM_HOME".to_string(),
            d.path().join("env").display().to_string(),
        )]
        .into();
        let c = candidates(d.path(), &env, None, &[]);
        assert_eq!(
            c.iter().map(|c| c.origin.as_str()).collect::<Vec<_>>(),
            ["ROCM_HOME", "/opt/rocm-*", "/opt/rocm-*"]
        );
        assert!(
            c[1].path.ends_with("rocm-6.10.1"),
            "numeric order: 6.10 > 6.9"
        );
        // AORTA issue #381: a wheel-based image has no /opt/rocm, only TheRock's packages.
        let site = d.path().join("site-packages");
        std::fs::create_dir_all(site.join("_rocm_sdk_core")).unwrap();
        let c = candidates(
            d.path(),
            &BTreeMap::new(),
            None,
            std::slice::from_ref(&site),
        );
        assert_eq!(c[0].origin, "wheel");
        let c = candidates(
            d.path(),
            &BTreeMap::new(),
            Some(d.path().join("env").to_str().unwrap()),
            &[site],
        );
        assert_eq!(
            c[0].origin, "rocm-sdk",
            "rocm-sdk path --root wins over the wheel scan"
        );
    }
}
