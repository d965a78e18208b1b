//! Finding GPU libraries (cuBLAS, cuDNN, NCCL, rocBLAS, …), choosing the copy that would be
//! used, reading its version and hashing its files.
//!
//! A machine often has two or three copies of the same library: the CUDA toolkit's, the
//! distro's, and the `nvidia-*` wheels inside the Python environment, which are what PyTorch
//! actually loads through its RPATH. The probe lists every copy (`candidates`) and picks the
//! effective one in this order: the wheels of the chosen interpreter (`wheel`) and
//! `LD_LIBRARY_PATH` (which first depends on how torch finds the wheels: `cuda.rs`), the
//! `ldconfig` cache, the toolkit or ROCm root (no `import torch` is
//! needed; `--deep` checks the choice against what the imported torch mapped). Only effective
//! files are hashed, and hashes are cached with each file's ELF search paths (`linkage`) by
//! (path, size, mtime, inode), so a warm probe reads no library bytes. A large file is hashed as BLAKE3 subtrees on several threads at once
//! (positioned reads, no mmap), so a cold probe reads cuBLASLt's 540 MB with several requests in
//! flight instead of one.

use crate::cmd::Tools;
use crate::error::HashError;
use crate::linkage;
use crate::schema::{Candidate, LibFile, Library, Linkage};
use crate::util::{header_defines, rooted, soname_version, version_from_defines};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
            let mut names = list_dir(&d);
            names.retain(|n| n.contains(".so"));
            files.extend(names.into_iter().map(|n| d.join(n)));
        }
        Location { origin, files }
    }

    /// `LD_LIBRARY_PATH`'s directories in order (empty entries skipped). Built once per probe
    /// and shared by the driver, CUDA and ROCm searches, so each directory is listed once.
    pub fn ld_library_path(env: &BTreeMap<String, String>) -> Self {
        let dirs: Vec<PathBuf> = env
            .get("LD_LIBRARY_PATH")
            .map(|p| {
                std::env::split_paths(p)
                    .filter(|d| !d.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Self::dirs("ld-library-path", dirs)
    }

    /// The linker cache's libraries ([`ldconfig`]).
    pub fn ldconfig(files: Vec<PathBuf>) -> Self {
        Location {
            origin: "ldconfig",
            files,
        }
    }

    /// The CUDA wheels' library directories: `<dir>/nvidia/*/lib` for every `sys.path`
    /// directory, in order, as torch's own fallback loader searches them (cu12: one dir per
    /// library; cu13: most of them in `nvidia/cu13/lib`).
    pub fn cuda_wheels(site_dirs: &[PathBuf]) -> Self {
        let mut dirs = Vec::new();
        for s in site_dirs {
            for n in list_dir(&s.join("nvidia")) {
                dirs.push(s.join("nvidia").join(n).join("lib"));
            }
        }
        Self::dirs("wheel", dirs.into_iter().filter(|d| d.is_dir()))
    }

    /// A CUDA toolkit's library directories (`lib64`, `lib`, `targets/*/lib`).
    pub fn cuda_toolkit(toolkit: Option<&Path>) -> Self {
        let mut dirs = Vec::new();
        if let Some(tk) = toolkit {
            dirs = vec![tk.join("lib64"), tk.join("lib")];
            for n in list_dir(&tk.join("targets")) {
                dirs.push(tk.join("targets").join(n).join("lib"));
            }
        }
        Self::dirs("toolkit", dirs.into_iter().filter(|d| d.is_dir()))
    }
}

impl LibSpec {
    /// A library known by its file name alone: no companions, distributions or header.
    pub const fn plain(name: &'static str, file: &'static str) -> LibSpec {
        LibSpec {
            name,
            file,
            companions: &[],
            dists: &[],
            header: None,
        }
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
        for n in list_dir(dir) {
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

/// Directory entries' file names, sorted; empty when unreadable: how library directories,
/// site-packages and install prefixes are searched.
pub(crate) fn list_dir(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The linker's library list: `/etc/ld.so.cache` read directly, else `ldconfig -p`.
pub(crate) fn ldconfig(root: &Path, tools: &Tools, timeout: Duration) -> Vec<PathBuf> {
    if let Some(paths) = read_ld_so_cache(&rooted(root, "/etc/ld.so.cache")) {
        return paths;
    }
    tools
        .stdout_of(
            "ldconfig",
            &[rooted(root, "/sbin"), rooted(root, "/usr/sbin")],
            &["-p"],
            timeout,
        )
        .map(|o| parse_ldconfig(&o))
        .unwrap_or_default()
}

/// What `ldconfig -p` lists, read straight from the cache file it prints (`/etc/ld.so.cache`)
/// in glibc's format, `glibc-ld.so.cache1.1` (the only one glibc ≥ 2.32 writes): the library
/// paths in the cache's order, without starting a process (`ldconfig -p` took 2 ms of a 3 ms
/// probe on a 2-core VM). `None` for a missing, truncated or older-format file: the caller then
/// runs `ldconfig -p`.
pub(crate) fn read_ld_so_cache(path: &Path) -> Option<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    // magic+version 20, nlibs 4, len_strings 4, flags 1, padding 3, extension offset 4,
    // unused 12.
    const HEADER: usize = 48;
    // flags 4, key 4, value 4, osversion 4, hwcap 8.
    const ENTRY: usize = 24;
    let bytes = std::fs::read(path).ok()?;
    if !bytes.starts_with(MAGIC) {
        return None;
    }
    let u32_at = |at: usize| -> Option<usize> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_ne_bytes(b) as usize)
    };
    let nlibs = u32_at(20)?;
    let entries = bytes.get(HEADER..HEADER.checked_add(nlibs.checked_mul(ENTRY)?)?)?;
    entries
        .chunks_exact(ENTRY)
        .map(|e| {
            // The value (the library's path) is an offset from the start of the file.
            let at = u32::from_ne_bytes(e[8..12].try_into().ok()?) as usize;
            let tail = bytes.get(at..)?;
            let path = &tail[..tail.iter().position(|&c| c == 0)?];
            Some(PathBuf::from(std::ffi::OsStr::from_bytes(path)))
        })
        .filter(|p| p.as_ref().is_none_or(|p| p.is_absolute()))
        .collect()
}

/// `ldconfig -p`: `\tlibcublas.so.13 (libc6,x86-64) => /usr/local/cuda/lib64/libcublas.so.13`.
pub(crate) fn parse_ldconfig(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| l.split_once("=>"))
        .map(|(_, p)| PathBuf::from(p.trim()))
        .filter(|p| p.is_absolute())
        .collect()
}

/// What is known of one file without reading it again: its blake3 and its ELF search paths,
/// both read on a miss and reused while (size, mtime, inode) hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hashed {
    pub size: u64,
    pub blake3: String,
    pub linkage: Linkage,
}

/// One entry of `file-hashes.json`, keyed by the real path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct CachedHash {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    blake3: String,
    /// Required: an entry without it is of another format, never "no search path".
    linkage: Linkage,
}

impl CachedHash {
    /// The identity check that invalidates the entry (hash and linkage alike).
    fn same_file(&self, other: &CachedHash) -> bool {
        (self.size, self.mtime_ns, self.ino) == (other.size, other.mtime_ns, other.ino)
    }

    fn hashed(&self) -> Hashed {
        Hashed {
            size: self.size,
            blake3: self.blake3.clone(),
            linkage: self.linkage.clone(),
        }
    }
}

/// `file-hashes.json`'s version. Raised when an entry's meaning or shape changes; a file of
/// another version (or version 1's bare map, before entries carried `linkage`) is ignored, so
/// every file is read once more rather than misread.
const HASHES_VERSION: u32 = 2;

/// `file-hashes.json`.
#[derive(Debug, Serialize, Deserialize)]
struct HashFile {
    version: u32,
    files: BTreeMap<String, CachedHash>,
}

/// blake3 and linkage of library files, remembered by (real path, size, mtime, inode).
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
            .and_then(|b| serde_json::from_slice::<HashFile>(&b).ok())
            .filter(|f| f.version == HASHES_VERSION)
            .map(|f| f.files)
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
            let file = HashFile {
                version: HASHES_VERSION,
                files: std::mem::take(&mut *c),
            };
            if let Ok(bytes) = serde_json::to_vec(&file) {
                let _ = aorta_fsutil::write_atomic(path, &bytes);
            }
            *c = file.files;
        }
    }

    /// Hashes every file on up to `threads` threads and reads its linkage. Result per input
    /// path: what is known of it, or why not.
    pub fn hash_all(
        &self,
        paths: &[PathBuf],
        threads: usize,
    ) -> BTreeMap<PathBuf, Result<Hashed, HashError>> {
        self.hash_all_pieces(paths, threads, PIECE)
    }

    fn hash_all_pieces(
        &self,
        paths: &[PathBuf],
        threads: usize,
        piece: u64,
    ) -> BTreeMap<PathBuf, Result<Hashed, HashError>> {
        let unique: Vec<PathBuf> = paths
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut out = BTreeMap::new();
        // Cache hits and failures first; the rest becomes subtree tasks.
        let mut jobs: Vec<Job> = Vec::new();
        for p in unique {
            match self.lookup(&p) {
                Lookup::Done(r) => {
                    out.insert(p, r);
                }
                Lookup::Hash(job) => jobs.push(Job { input: p, ..job }),
            }
        }
        let mut tasks: Vec<(usize, u64, u64)> = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            let mut leaves = Vec::new();
            if j.size > piece {
                plan_leaves(0, j.size, piece, &mut leaves);
            } else {
                leaves.push((0, j.size));
            }
            tasks.extend(leaves.into_iter().map(|(o, l)| (i, o, l)));
        }
        if jobs.is_empty() {
            // All cached (a warm probe): no thread to start.
            return out;
        }
        // Largest files first, so the long one does not start last.
        tasks.sort_by_key(|&(i, o, _)| (std::cmp::Reverse(jobs[i].size), i, o));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Mutex<BTreeMap<(usize, u64), Result<Leaf, HashError>>> =
            Mutex::new(BTreeMap::new());
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, tasks.len().max(1)) {
                s.spawn(|| loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(i, offset, len)) = tasks.get(n) else {
                        break;
                    };
                    let j = &jobs[i];
                    let r = hash_range(j, offset, len, len == j.size);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((i, offset), r);
                });
            }
        });
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        for (i, j) in jobs.into_iter().enumerate() {
            let leaf = |offset: u64| -> Result<Leaf, HashError> {
                results.get(&(i, offset)).cloned().unwrap_or_else(|| {
                    Err(HashError::NotHashed {
                        path: j.real.clone(),
                    })
                })
            };
            let hex = if j.size > piece {
                merge_root(j.size, piece, &leaf)
            } else {
                leaf(0).and_then(|l| match l {
                    Leaf::Root(h) => Ok(h),
                    Leaf::Cv(_) => Err(HashError::Internal("a whole file hashed as a subtree")),
                })
            }
            .map(|h| h.to_hex().to_string());
            let r = hex.map(|hex| {
                self.hashed_bytes.fetch_add(j.size, Ordering::Relaxed);
                // Read with the hash, so the entry that says the file is unchanged carries it.
                let entry = j.stamp(hex, linkage::of(&j.real));
                let hashed = entry.hashed();
                self.cache
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(j.key.clone(), entry);
                self.dirty.store(true, Ordering::Relaxed);
                hashed
            });
            out.insert(j.input, r);
        }
        out
    }

    /// The cached hash when the file's stat still matches, else an open file to hash.
    fn lookup(&self, p: &Path) -> Lookup {
        let real = match std::fs::canonicalize(p) {
            Ok(r) => r,
            Err(e) => {
                return Lookup::Done(Err(HashError::Resolve {
                    path: p.to_path_buf(),
                    source: Arc::new(e),
                }))
            }
        };
        let md = match std::fs::metadata(&real) {
            Ok(m) => m,
            Err(e) => {
                return Lookup::Done(Err(HashError::Stat {
                    path: real,
                    source: Arc::new(e),
                }))
            }
        };
        let key = real.display().to_string();
        let stamp = CachedHash {
            size: md.len(),
            mtime_ns: md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
            ino: md.ino(),
            blake3: String::new(),
            linkage: Linkage::default(),
        };
        if let Some(c) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            if c.same_file(&stamp) {
                return Lookup::Done(Ok(c.hashed()));
            }
        }
        match std::fs::File::open(&real) {
            Ok(file) => Lookup::Hash(Job {
                input: PathBuf::new(),
                size: md.len(),
                file,
                real,
                key,
                stamp,
            }),
            Err(e) => Lookup::Done(Err(HashError::Open {
                path: real,
                source: Arc::new(e),
            })),
        }
    }
}

/// Files larger than this are hashed as BLAKE3 subtrees of at most this size, in parallel.
/// A power of two (subtree boundaries), large enough that merging costs nothing.
const PIECE: u64 = 16 << 20;

enum Lookup {
    Done(Result<Hashed, HashError>),
    Hash(Job),
}

/// One file to hash.
struct Job {
    input: PathBuf,
    real: PathBuf,
    key: String,
    size: u64,
    file: std::fs::File,
    stamp: CachedHash,
}

impl Job {
    fn stamp(&self, hex: String, linkage: Linkage) -> CachedHash {
        CachedHash {
            blake3: hex,
            linkage,
            ..self.stamp.clone()
        }
    }
}

#[derive(Debug, Clone)]
enum Leaf {
    /// A whole file's hash.
    Root(blake3::Hash),
    /// A subtree's chaining value.
    Cv(blake3::hazmat::ChainingValue),
}

/// The leaves of BLAKE3's tree over `len` bytes at `offset`, split the way the tree is
/// (`left_subtree_len`) until each is at most `piece` bytes.
fn plan_leaves(offset: u64, len: u64, piece: u64, out: &mut Vec<(u64, u64)>) {
    if len <= piece {
        out.push((offset, len));
    } else {
        let left = blake3::hazmat::left_subtree_len(len);
        plan_leaves(offset, left, piece, out);
        plan_leaves(offset + left, len - left, piece, out);
    }
}

/// Hashes `len` bytes at `offset` with positioned reads: the file's hash when `whole`, else the
/// subtree's chaining value.
fn hash_range(j: &Job, offset: u64, len: u64, whole: bool) -> Result<Leaf, HashError> {
    use blake3::hazmat::HasherExt;
    use std::os::unix::fs::FileExt;
    let mut h = blake3::Hasher::new();
    if !whole {
        h.set_input_offset(offset);
    }
    let mut buf = vec![0u8; (1 << 20).min(len.max(1) as usize)];
    let mut at = offset;
    let end = offset + len;
    while at < end {
        let n = ((end - at) as usize).min(buf.len());
        j.file
            .read_exact_at(&mut buf[..n], at)
            .map_err(|e| HashError::Read {
                path: j.real.clone(),
                source: Arc::new(e),
            })?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(if whole {
        Leaf::Root(h.finalize())
    } else {
        Leaf::Cv(h.finalize_non_root())
    })
}

/// The root hash of a file of `len` (> `piece`) bytes from its leaves' chaining values.
fn merge_root(
    len: u64,
    piece: u64,
    leaf: &dyn Fn(u64) -> Result<Leaf, HashError>,
) -> Result<blake3::Hash, HashError> {
    use blake3::hazmat::{merge_subtrees_root, Mode};
    let left = blake3::hazmat::left_subtree_len(len);
    let l = merge_cv(0, left, piece, leaf)?;
    let r = merge_cv(left, len - left, piece, leaf)?;
    Ok(merge_subtrees_root(&l, &r, Mode::Hash))
}

fn merge_cv(
    offset: u64,
    len: u64,
    piece: u64,
    leaf: &dyn Fn(u64) -> Result<Leaf, HashError>,
) -> Result<blake3::hazmat::ChainingValue, HashError> {
    use blake3::hazmat::{merge_subtrees_non_root, Mode};
    if len <= piece {
        return match leaf(offset)? {
            Leaf::Cv(cv) => Ok(cv),
            Leaf::Root(_) => Err(HashError::Internal("a subtree hashed as a whole file")),
        };
    }
    let left = blake3::hazmat::left_subtree_len(len);
    let l = merge_cv(offset, left, piece, leaf)?;
    let r = merge_cv(offset + left, len - left, piece, leaf)?;
    Ok(merge_subtrees_non_root(&l, &r, Mode::Hash))
}

/// Fills `files[*].{size_bytes,blake3}` and the effective file's `linkage` from hash results;
/// failures become reasons. A main file that was not hashed has its linkage read here (so its
/// `linkage.error` says why, as for any unreadable file).
pub(crate) fn apply_hashes(
    lib: &mut Library,
    results: &BTreeMap<PathBuf, Result<Hashed, HashError>>,
    field: &str,
    reasons: &crate::util::Reasons,
) {
    for f in &mut lib.files {
        let Some(p) = f.path.as_ref().map(PathBuf::from) else {
            continue;
        };
        match results.get(&p) {
            Some(Ok(h)) => {
                f.size_bytes = Some(h.size);
                f.blake3 = Some(h.blake3.clone());
            }
            Some(Err(e)) => reasons.add(field, e),
            None => {}
        }
    }
    if let Some(p) = lib.path.as_ref().map(PathBuf::from) {
        lib.linkage = match results.get(&p) {
            Some(Ok(h)) => h.linkage.clone(),
            _ => linkage::of(&p),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache file read in-process names what `ldconfig -p` prints, in its order.
    #[test]
    fn the_ld_so_cache_reads_as_ldconfig_prints_it() {
        let cache = Path::new("/etc/ld.so.cache");
        let Some(read) = read_ld_so_cache(cache) else {
            eprintln!(
                "no glibc 1.1 cache at {}: nothing to compare",
                cache.display()
            );
            return;
        };
        let out = std::process::Command::new("/sbin/ldconfig")
            .arg("-p")
            .output()
            .expect("ldconfig -p runs where the cache is glibc's");
        let printed = parse_ldconfig(&String::from_utf8_lossy(&out.stdout));
        assert!(read.len() > 10, "{} libraries", read.len());
        assert_eq!(read, printed);
    }

    /// A cache in glibc's format built by hand, then cut short: whole, it reads; truncated or
    /// in another format, it is `None` (the probe then runs `ldconfig -p`).
    #[test]
    fn a_truncated_or_foreign_ld_so_cache_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let strings = b"libfoo.so.1\0/usr/lib/libfoo.so.1\0";
        let mut b = b"glibc-ld.so.cache1.1".to_vec();
        b.extend(1u32.to_ne_bytes()); // nlibs
        b.extend((strings.len() as u32).to_ne_bytes());
        b.extend([0u8; 4 + 4 + 12]); // flags, padding, extension offset, unused
        let strings_at = (48 + 24) as u32;
        b.extend(1i32.to_ne_bytes()); // flags
        b.extend(strings_at.to_ne_bytes()); // key
        b.extend((strings_at + 12).to_ne_bytes()); // value
        b.extend([0u8; 4 + 8]); // osversion, hwcap
        b.extend(strings);
        let f = dir.path().join("ld.so.cache");
        std::fs::write(&f, &b).unwrap();
        assert_eq!(
            read_ld_so_cache(&f),
            Some(vec![PathBuf::from("/usr/lib/libfoo.so.1")])
        );
        for cut in [10, 40, 60, b.len() - 1] {
            std::fs::write(&f, &b[..cut]).unwrap();
            assert_eq!(read_ld_so_cache(&f), None, "cut at {cut}");
        }
        std::fs::write(&f, b"ld.so-1.7.0\0\0\0\0\0").unwrap();
        assert_eq!(read_ld_so_cache(&f), None);
        assert_eq!(read_ld_so_cache(&dir.path().join("missing")), None);
    }

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
    fn subtree_hashing_matches_blake3() {
        let d = tempfile::tempdir().unwrap();
        let piece = 4096;
        let sizes = [
            0u64,
            1,
            1024,
            1025,
            3 * 1024 + 1,
            4096,
            4097,
            8192,
            5 * 4096 + 777,
            70_000,
        ];
        let mut paths = Vec::new();
        for n in sizes {
            let p = d.path().join(format!("f{n}"));
            let bytes: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            std::fs::write(&p, &bytes).unwrap();
            paths.push((p, blake3::hash(&bytes).to_hex().to_string()));
        }
        let h = FileHasher::default();
        let all: Vec<PathBuf> = paths.iter().map(|(p, _)| p.clone()).collect();
        let got = h.hash_all_pieces(&all, 3, piece);
        for (p, want) in &paths {
            assert_eq!(&got[p].as_ref().unwrap().blake3, want, "{}", p.display());
        }
        assert_eq!(
            h.hashed_bytes.load(Ordering::Relaxed),
            sizes.iter().sum::<u64>()
        );
        let mut leaves = Vec::new();
        plan_leaves(0, 5 * 4096 + 777, piece, &mut leaves);
        assert_eq!(
            leaves,
            [
                (0, 4096),
                (4096, 4096),
                (8192, 4096),
                (12288, 4096),
                (16384, 4096),
                (20480, 777)
            ]
        );
    }

    /// A warm probe takes the linkage from the entry that says the file is unchanged, so it
    /// reads no ELF bytes; a changed file is read again, linkage and all.
    #[test]
    fn linkage_is_cached_with_the_hash_and_invalidated_with_it() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("libx.so.1");
        std::fs::write(&f, b"not ELF").unwrap();
        let saved = d.path().join("file-hashes.json");
        let h = FileHasher::default();
        let cold = h.hash_all(std::slice::from_ref(&f), 2);
        let linkage = &cold[&f].as_ref().unwrap().linkage;
        assert!(linkage
            .error
            .as_deref()
            .unwrap()
            .ends_with("is not an ELF file"));
        h.save(&saved);
        // What only the cache can say: were the file read, this would be its error again.
        let marker = Linkage {
            effective: Some("rpath".into()),
            tags: vec!["rpath".into()],
            rpath: Some("/from-the-cache".into()),
            ..Linkage::default()
        };
        let mut file: HashFile = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
        assert_eq!(file.version, HASHES_VERSION);
        for e in file.files.values_mut() {
            e.linkage = marker.clone();
        }
        std::fs::write(&saved, serde_json::to_vec(&file).unwrap()).unwrap();
        let warm = FileHasher::load(Some(&saved));
        let got = warm.hash_all(std::slice::from_ref(&f), 2);
        assert_eq!(got[&f].as_ref().unwrap().linkage, marker);
        assert_eq!(warm.hashed_bytes.load(Ordering::Relaxed), 0);
        std::fs::write(&f, b"still not ELF").unwrap();
        let got = warm.hash_all(std::slice::from_ref(&f), 2);
        assert_ne!(
            got[&f].as_ref().unwrap().linkage,
            marker,
            "a changed file is read again"
        );
    }

    /// Version 1's bare map (no linkage) and another version are ignored, never misread.
    #[test]
    fn a_hash_file_of_another_format_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("libx.so.1");
        std::fs::write(&f, b"abc").unwrap();
        let real = std::fs::canonicalize(&f).unwrap();
        let md = std::fs::metadata(&real).unwrap();
        let entry = serde_json::json!({
            "size": md.len(),
            "mtime_ns": md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
            "ino": md.ino(),
            "blake3": "stale",
        });
        let key = real.display().to_string();
        let saved = d.path().join("file-hashes.json");
        let mut with_linkage = entry.clone();
        with_linkage["linkage"] = serde_json::json!({});
        for doc in [
            serde_json::json!({ key.clone(): entry }),
            serde_json::json!({ "version": HASHES_VERSION + 1, "files": { key.clone(): with_linkage.clone() } }),
            serde_json::json!({ "version": HASHES_VERSION, "files": { key.clone(): entry } }),
        ] {
            std::fs::write(&saved, doc.to_string()).unwrap();
            let h = FileHasher::load(Some(&saved));
            let got = h.hash_all(std::slice::from_ref(&f), 2);
            assert_eq!(
                got[&f].as_ref().unwrap().blake3,
                blake3::hash(b"abc").to_hex().to_string(),
                "{doc}"
            );
        }
        // The current format is read: the stale entry is believed (its stat holds).
        std::fs::write(
            &saved,
            serde_json::json!({ "version": HASHES_VERSION, "files": { key: with_linkage } })
                .to_string(),
        )
        .unwrap();
        let h = FileHasher::load(Some(&saved));
        assert_eq!(
            h.hash_all(std::slice::from_ref(&f), 2)[&f]
                .as_ref()
                .unwrap()
                .blake3,
            "stale"
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
            a[&f].as_ref().unwrap().blake3,
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
            b[&f].as_ref().unwrap().size,
            4,
            "a changed file is hashed again"
        );
    }
}
