//! Finding GPU libraries (cuBLAS, cuDNN, NCCL, rocBLAS, …), choosing the copy that would be
//! used, reading its version and hashing its files.
//!
//! A machine often has two or three copies of the same library: the CUDA toolkit's, the
//! distro's, and the `nvidia-*` wheels inside the Python environment, which are what PyTorch
//! actually loads through its RPATH. The probe lists every copy (`candidates`) and picks the
//! effective one in this order: a file the torch process had mapped (`torch-loaded`, exact),
//! the wheels of the chosen interpreter (`wheel`), `LD_LIBRARY_PATH`, the `ldconfig` cache,
//! the toolkit or ROCm root. Only effective files are hashed, and hashes are cached by (path,
//! size, mtime, inode) so a warm probe reads no library bytes.

use crate::schema::{Candidate, LibFile, Library};
use crate::util::{header_defines, soname_version, version_from_defines};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How to recognise one library.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LibSpec {
    pub name: &'static str,
    /// The unversioned file name: `libcublas.so` matches `libcublas.so`, `libcublas.so.13`, ….
    pub file: &'static str,
    /// Prefixes of companion files hashed with it (same directory).
    pub companions: &'static [&'static str],
    /// Python distributions that ship it (`nvidia-cudnn` matches `nvidia-cudnn-cu13`).
    pub dists: &'static [&'static str],
    /// Header (relative to an `include/` dir) and the three version defines.
    pub header: Option<(&'static str, [&'static str; 3])>,
}

pub(crate) const CUDA_SPECS: [LibSpec; 6] = [
    LibSpec {
        name: "cudart",
        file: "libcudart.so",
        companions: &[],
        dists: &["nvidia-cuda-runtime"],
        header: None,
    },
    LibSpec {
        name: "cublas",
        file: "libcublas.so",
        companions: &[],
        dists: &["nvidia-cublas"],
        header: Some((
            "cublas_api.h",
            ["CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"],
        )),
    },
    LibSpec {
        name: "cublasLt",
        file: "libcublasLt.so",
        companions: &[],
        dists: &["nvidia-cublas"],
        header: Some((
            "cublas_api.h",
            ["CUBLAS_VER_MAJOR", "CUBLAS_VER_MINOR", "CUBLAS_VER_PATCH"],
        )),
    },
    LibSpec {
        name: "cudnn",
        file: "libcudnn.so",
        companions: &["libcudnn_"],
        dists: &["nvidia-cudnn"],
        header: Some((
            "cudnn_version.h",
            ["CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"],
        )),
    },
    LibSpec {
        name: "nccl",
        file: "libnccl.so",
        companions: &[],
        dists: &["nvidia-nccl"],
        header: Some(("nccl.h", ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"])),
    },
    LibSpec {
        name: "nvrtc",
        file: "libnvrtc.so",
        companions: &["libnvrtc-builtins.so"],
        dists: &["nvidia-cuda-nvrtc"],
        header: None,
    },
];

/// One place to look, with the origin label its matches get.
#[derive(Debug, Clone)]
pub(crate) struct Location {
    pub origin: &'static str,
    pub files: Vec<PathBuf>,
}

impl Location {
    /// Every entry of the given directories.
    pub fn dirs(origin: &'static str, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut files = Vec::new();
        for d in dirs {
            let mut names = crate::util::list_dir(&d);
            names.retain(|n| n.contains(".so"));
            files.extend(names.into_iter().map(|n| d.join(n)));
        }
        Location { origin, files }
    }
}

/// What resolution knows besides file names.
#[derive(Debug, Default)]
pub(crate) struct VersionHints {
    /// Normalised dist name → (version, site-packages dir).
    pub dists: Vec<(String, String, PathBuf)>,
}

fn matches_file(spec_file: &str, name: &str) -> bool {
    name == spec_file
        || name
            .strip_prefix(spec_file)
            .is_some_and(|r| r.starts_with('.'))
}

/// The library entry for `spec`: candidates in location order, the first one effective.
pub(crate) fn resolve(
    spec: &LibSpec,
    locations: &[Location],
    hints: &VersionHints,
    include_dirs: &[PathBuf],
) -> (Library, Vec<PathBuf>) {
    let mut lib = Library::default();
    let mut seen = BTreeSet::new();
    let mut chosen: Option<PathBuf> = None;
    for loc in locations {
        // Per location, one candidate per real file; prefer the soname (`libx.so.13`) spelling.
        let mut by_real: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
        for f in &loc.files {
            let Some(name) = f.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !matches_file(spec.file, name) {
                continue;
            }
            let Ok(real) = std::fs::canonicalize(f) else {
                continue;
            };
            let better = |old: &PathBuf| rank(old) > rank(f);
            match by_real.get(&real) {
                Some(old) if !better(old) => {}
                _ => {
                    by_real.insert(real, f.clone());
                }
            }
        }
        let mut found: Vec<(PathBuf, PathBuf)> = by_real.into_iter().map(|(r, f)| (f, r)).collect();
        found.sort();
        for (f, real) in found {
            if !seen.insert(real.clone()) {
                continue;
            }
            let (version, _) = version_of(spec, &f, &real, hints, include_dirs);
            lib.candidates.push(Candidate {
                path: f.display().to_string(),
                origin: loc.origin.to_string(),
                version,
            });
            if chosen.is_none() {
                chosen = Some(f.clone());
                lib.origin = Some(loc.origin.to_string());
            }
        }
    }
    let Some(main) = chosen else {
        return (lib, Vec::new());
    };
    let real = std::fs::canonicalize(&main).unwrap_or_else(|_| main.clone());
    let (version, source) = version_of(spec, &main, &real, hints, include_dirs);
    lib.version = version;
    lib.version_source = source;
    lib.path = Some(main.display().to_string());
    let mut files = vec![main.clone()];
    if let Some(dir) = main.parent() {
        let mut seen_real: BTreeSet<PathBuf> = [real].into();
        for n in crate::util::list_dir(dir) {
            if spec.companions.iter().any(|c| n.starts_with(c)) && n.contains(".so") {
                let p = dir.join(&n);
                if let Ok(r) = std::fs::canonicalize(&p) {
                    if seen_real.insert(r) {
                        files.push(p);
                    }
                }
            }
        }
    }
    lib.files = files
        .iter()
        .map(|p| LibFile {
            name: file_name(p),
            path: Some(p.display().to_string()),
            size_bytes: None,
            blake3: None,
        })
        .collect();
    (lib, files)
}

/// Shorter names rank better: `libx.so.13` (soname) over `libx.so.13.1.0` over `libx.so`.
fn rank(p: &Path) -> (u8, usize) {
    let n = file_name(p);
    let dots = n
        .split(".so")
        .nth(1)
        .map(|r| r.matches('.').count())
        .unwrap_or(0);
    (
        if dots == 1 {
            0
        } else if dots == 0 {
            2
        } else {
            1
        },
        n.len(),
    )
}

pub(crate) fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Version of one copy: full version in the real file name, else the wheel's dist-info, else
/// the header next to it, else the soname's major.
fn version_of(
    spec: &LibSpec,
    path: &Path,
    real: &Path,
    hints: &VersionHints,
    include_dirs: &[PathBuf],
) -> (Option<String>, Option<String>) {
    let real_v = soname_version(&file_name(real));
    if let Some(v) = real_v.as_ref().filter(|v| v.split('.').count() >= 3) {
        return (Some(v.clone()), Some("file-name".into()));
    }
    for (dist, ver, site) in &hints.dists {
        if path.starts_with(site)
            && spec
                .dists
                .iter()
                .any(|d| dist == d || dist.strip_prefix(d).is_some_and(|r| r.starts_with("-cu")))
        {
            return (Some(ver.clone()), Some(format!("dist-info:{dist}")));
        }
    }
    if let Some((h, names)) = spec.header {
        let mut dirs: Vec<PathBuf> = path
            .parent()
            .and_then(Path::parent)
            .map(|d| vec![d.join("include")])
            .unwrap_or_default();
        dirs.extend(include_dirs.iter().cloned());
        for d in dirs {
            if let Ok(text) = std::fs::read_to_string(d.join(h)) {
                if let Some(v) = version_from_defines(&header_defines(&text), names) {
                    return (Some(v), Some(format!("header:{h}")));
                }
            }
        }
    }
    let so = soname_version(&file_name(path)).or(real_v);
    (so.clone(), so.map(|_| "soname".to_string()))
}

/// `name-1.2.3.dist-info` directories of each site-packages dir, names normalised (`_` → `-`,
/// lower case).
pub(crate) fn dist_infos(site_dirs: &[PathBuf]) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    for s in site_dirs {
        for n in crate::util::list_dir(s) {
            let Some(stem) = n.strip_suffix(".dist-info") else {
                continue;
            };
            let Some((name, ver)) = stem.split_once('-') else {
                continue;
            };
            out.push((
                name.replace('_', "-").to_ascii_lowercase(),
                ver.to_string(),
                s.clone(),
            ));
        }
    }
    out
}

/// `ldconfig -p`: `\tlibcublas.so.13 (libc6,x86-64) => /usr/local/cuda/lib64/libcublas.so.13`.
pub(crate) fn parse_ldconfig(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| l.split_once("=>"))
        .map(|(_, p)| PathBuf::from(p.trim()))
        .filter(|p| p.is_absolute())
        .collect()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct CachedHash {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    blake3: String,
}

/// blake3 of library files, remembered by (real path, size, mtime, inode).
#[derive(Debug, Default)]
pub(crate) struct FileHasher {
    cache: Mutex<BTreeMap<String, CachedHash>>,
    dirty: std::sync::atomic::AtomicBool,
    pub hashed_bytes: AtomicU64,
}

impl FileHasher {
    pub fn load(path: Option<&Path>) -> Self {
        let cache = path
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        FileHasher {
            cache: Mutex::new(cache),
            ..Default::default()
        }
    }

    pub fn save(&self, path: &Path) {
        if self.dirty.load(Ordering::Relaxed) {
            let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            // Forget files that are gone (an upgraded wheel), so the cache does not only grow.
            c.retain(|p, _| Path::new(p).exists());
            if let Ok(bytes) = serde_json::to_vec(&*c) {
                let _ = crate::cache::write_atomic(path, &bytes);
            }
        }
    }

    /// Hashes every file on up to `threads` threads. Result per input path: (size, hex) or why not.
    pub fn hash_all(
        &self,
        paths: &[PathBuf],
        threads: usize,
    ) -> BTreeMap<PathBuf, Result<(u64, String), String>> {
        let unique: Vec<PathBuf> = paths
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let out = Mutex::new(BTreeMap::new());
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, unique.len().max(1)) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = unique.get(i) else { break };
                    let r = self.hash(p);
                    out.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(p.clone(), r);
                });
            }
        });
        out.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    fn hash(&self, p: &Path) -> Result<(u64, String), String> {
        let real = std::fs::canonicalize(p).map_err(|e| {
            format!(
                "cannot resolve {}: {}",
                p.display(),
                crate::util::io_reason(&e)
            )
        })?;
        let md =
            std::fs::metadata(&real).map_err(|e| format!("cannot stat {}: {e}", real.display()))?;
        let stamp = |h: String| CachedHash {
            size: md.len(),
            mtime_ns: md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
            ino: md.ino(),
            blake3: h,
        };
        let key = real.display().to_string();
        if let Some(c) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            if *c == stamp(c.blake3.clone()) {
                return Ok((c.size, c.blake3.clone()));
            }
        }
        let mut f = std::fs::File::open(&real).map_err(|e| {
            format!(
                "cannot read {}: {}",
                real.display(),
                crate::util::io_reason(&e)
            )
        })?;
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| format!("reading {}: {e}", real.display()))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        let hex = h.finalize().to_hex().to_string();
        self.hashed_bytes.fetch_add(md.len(), Ordering::Relaxed);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, stamp(hex.clone()));
        self.dirty.store(true, Ordering::Relaxed);
        Ok((md.len(), hex))
    }
}

/// Fills `files[*].{size_bytes,blake3}` from hash results; failures become reasons.
pub(crate) fn apply_hashes(
    lib: &mut Library,
    results: &BTreeMap<PathBuf, Result<(u64, String), String>>,
    field: &str,
    reasons: &crate::util::Reasons,
) {
    for f in &mut lib.files {
        let Some(p) = f.path.as_ref().map(PathBuf::from) else {
            continue;
        };
        match results.get(&p) {
            Some(Ok((size, hex))) => {
                f.size_bytes = Some(*size);
                f.blake3 = Some(hex.clone());
            }
            Some(Err(e)) => reasons.add(field, e.clone()),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_matching_and_ranking() {
        assert!(matches_file("libcublas.so", "libcublas.so.13"));
        assert!(!matches_file("libcublas.so", "libcublasLt.so.13"));
        assert!(!matches_file("libnvrtc.so", "libnvrtc.alt.so.13"));
        assert!(rank(Path::new("libx.so.13")) < rank(Path::new("libx.so.13.1.0")));
        assert!(rank(Path::new("libx.so.13.1.0")) < rank(Path::new("libx.so")));
        let l = parse_ldconfig("523 libs found\n\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n");
        assert_eq!(
            l,
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libnccl.so.2")]
        );
    }

    #[test]
    fn hashes_are_cached_by_stat() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("libx.so.1");
        std::fs::write(&f, b"abc").unwrap();
        let h = FileHasher::default();
        let a = h.hash_all(std::slice::from_ref(&f), 2);
        assert_eq!(
            a[&f].as_ref().unwrap().1,
            blake3::hash(b"abc").to_hex().to_string()
        );
        assert_eq!(h.hashed_bytes.load(Ordering::Relaxed), 3);
        h.hash_all(std::slice::from_ref(&f), 2);
        assert_eq!(
            h.hashed_bytes.load(Ordering::Relaxed),
            3,
            "second hash comes from the cache"
        );
        std::fs::write(&f, b"abcd").unwrap();
        let b = h.hash_all(std::slice::from_ref(&f), 2);
        assert_eq!(
            b[&f].as_ref().unwrap().0,
            4,
            "a changed file is hashed again"
        );
    }
}
