//! Traced inputs: what a command trial's process tree read, recorded while it ran by
//! `aorta-trace` (ptrace + seccomp, engine/trace), kept with its result as `inputs.json` and
//! verified before the result is reused (a verifying trace, as ccache's direct-mode manifests).
//!
//! The trial key holds what is known before a trial runs; the trace holds what it turned out to
//! read (`bash launch.sh` → `train.py` → the repo's modules and configs). A stored result is
//! reused only if every traced input still has its recorded digest: checked by a stat
//! fingerprint against the persistent digest cache first, hashed only when the fingerprint
//! moved. Scope rules (docs/cache-keys.md): writes, the trial's own directory, system prefixes,
//! Python installations and caches are not inputs; paths inside the workspace are stored
//! relative to its root, so another checkout verifies the same list.

use aorta_store::{Digest, LocalStore};
use aorta_trace::{Trace, TraceStatus, TracedFile};
use aorta_trial::InputsSummary;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The file `aorta-trace` writes into the trial's staging directory (removed once read).
pub(crate) const TRACE_FILE: &str = ".aorta-trace.json";
/// The trial's traced inputs, an output of its store entry.
pub(crate) const INPUTS_FILE: &str = "inputs.json";
const INPUTS_FORMAT: u32 = 1;

/// `inputs.json`: the traced inputs of one trial, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputList {
    pub format: u32,
    pub files: Vec<InputFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFile {
    /// Relative to the workspace root when inside it, else absolute.
    pub path: String,
    pub blake3: String,
    pub size: u64,
}

/// A file's stat fingerprint: equal fingerprints mean the cached digest still holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Fingerprint {
    fn of(m: &std::fs::Metadata) -> Fingerprint {
        Fingerprint {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CachedDigest {
    fp: Fingerprint,
    blake3: String,
}

/// The persistent digest cache (`<store>/digests.json`): path → fingerprint → blake3, so a
/// touched-but-unchanged file costs one hash and an unchanged one none. Loaded once per
/// session, written back (atomically) after a build that learned something.
pub(crate) struct DigestCache {
    file: PathBuf,
    map: Mutex<HashMap<PathBuf, CachedDigest>>,
    dirty: std::sync::atomic::AtomicBool,
    /// Files hashed (not answered from the cache) since the session began: for tests and
    /// `AORTA_TIMING`.
    pub(crate) hashed: std::sync::atomic::AtomicUsize,
}

/// What a file is now: its digest, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Current {
    Digest { blake3: String, size: u64 },
    Missing,
}

impl DigestCache {
    pub(crate) fn open(store_root: &Path) -> DigestCache {
        let file = store_root.join("digests.json");
        let map = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<(PathBuf, CachedDigest)>>(&b).ok())
            .map(|v| v.into_iter().collect())
            .unwrap_or_default();
        DigestCache {
            file,
            map: Mutex::new(map),
            dirty: Default::default(),
            hashed: Default::default(),
        }
    }

    fn known(&self, path: &Path) -> Option<Fingerprint> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(path).map(|c| c.fp)
    }

    /// The file's digest now, from the cache when its fingerprint is unchanged.
    fn current(&self, path: &Path) -> Current {
        let Ok(meta) = std::fs::metadata(path) else {
            return Current::Missing;
        };
        if !meta.is_file() {
            return Current::Missing;
        }
        let fp = Fingerprint::of(&meta);
        {
            let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get(path).filter(|c| c.fp == fp) {
                return Current::Digest {
                    blake3: c.blake3.clone(),
                    size: fp.size,
                };
            }
        }
        let Ok(blake3) = aorta_graph::hash_file(path) else {
            return Current::Missing;
        };
        self.hashed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Stat again: a file written while it was hashed is not cached under either state.
        if std::fs::metadata(path).is_ok_and(|m| Fingerprint::of(&m) == fp) {
            let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            map.insert(
                path.to_path_buf(),
                CachedDigest {
                    fp,
                    blake3: blake3.clone(),
                },
            );
            self.dirty.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Current::Digest {
            blake3,
            size: fp.size,
        }
    }

    /// Writes the cache back if it learned something. A cache: failing to save costs hashes
    /// later, never a result, so errors are ignored.
    pub(crate) fn save(&self) {
        if !self.dirty.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let list: Vec<(PathBuf, CachedDigest)> = {
            let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            map.iter().map(|(p, c)| (p.clone(), c.clone())).collect()
        };
        if let Ok(bytes) = serde_json::to_vec(&list) {
            let _ = crate::dirs::write_atomic(&self.file, &bytes);
        }
    }
}

/// Which traced paths are inputs (docs/cache-keys.md, "Traced inputs").
pub(crate) struct Scope {
    root: PathBuf,
    store_root: PathBuf,
    home: Option<PathBuf>,
    /// The recipe's `ignore_inputs` globs, matched against workspace-relative paths.
    ignore: globset::GlobSet,
}

/// Absolute prefixes the environment snapshot already identifies, or that hold no content a
/// trial's result depends on as a file (kernel interfaces, devices, run-time state).
const SYSTEM_PREFIXES: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    "/etc",
    "/var",
    "/opt",
    "/nix/store",
    "/snap",
];

impl Scope {
    pub(crate) fn new(
        root: &Path,
        store_root: &Path,
        ignore: &[String],
    ) -> Result<Scope, globset::Error> {
        let mut set = globset::GlobSetBuilder::new();
        for g in ignore {
            set.add(globset::Glob::new(g)?);
        }
        Ok(Scope {
            root: absolute(root),
            store_root: absolute(store_root),
            home: std::env::var_os("HOME").map(PathBuf::from),
            ignore: set.build()?,
        })
    }

    /// The path, if it is an input of a trial run in `trial_dir`.
    fn input(&self, f: &TracedFile, trial_dir: &Path) -> Option<PathBuf> {
        if f.write {
            return None;
        }
        let path = lexical(&f.os_path());
        // A valid byte-code cache is read instead of its source (which Python only stats):
        // the source is the input.
        let path = pyc_source(&path).unwrap_or(path);
        if path.starts_with(trial_dir) || path.starts_with(&self.store_root) {
            return None;
        }
        if SYSTEM_PREFIXES.iter().any(|p| path.starts_with(p)) {
            return None;
        }
        if let Some(home) = &self.home {
            if path.starts_with(home.join(".cache")) || path.starts_with(home.join(".triton")) {
                return None;
            }
        }
        if python_installed(&path) {
            return None;
        }
        if let Ok(rel) = path.strip_prefix(&self.root) {
            if self.ignore.is_match(rel) {
                return None;
            }
        }
        Some(path)
    }

    /// How the path is written in `inputs.json`.
    fn stored(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    fn resolve(&self, stored: &str) -> PathBuf {
        let p = Path::new(stored);
        match p.is_absolute() {
            true => p.to_path_buf(),
            false => self.root.join(p),
        }
    }
}

/// Python's installed packages, its standard library and its byte-code caches: identified by
/// the environment snapshot (the interpreter and wheel versions), or derived from sources that
/// are inputs themselves.
fn python_installed(path: &Path) -> bool {
    let mut prev_lib = false;
    for c in path.components() {
        let Component::Normal(name) = c else { continue };
        let name = name.to_string_lossy();
        if name == "site-packages" || name == "dist-packages" || name == "__pycache__" {
            return true;
        }
        if prev_lib && name.starts_with("python3") {
            return true;
        }
        prev_lib = name == "lib" || name == "lib64";
    }
    path.extension().is_some_and(|e| e == "pyc")
}

/// `p` made absolute against the current directory (traced paths are absolute; `--store
/// store` is not), lexically normalised.
fn absolute(p: &Path) -> PathBuf {
    lexical(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// `pkg/__pycache__/mod.cpython-311.pyc` → `pkg/mod.py`.
fn pyc_source(path: &Path) -> Option<PathBuf> {
    if path.extension()? != "pyc" {
        return None;
    }
    let cache = path.parent()?;
    if cache.file_name()? != "__pycache__" {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    let module = name.split('.').next()?;
    Some(cache.parent()?.join(format!("{module}.py")))
}

/// `/a/./b/../c` → `/a/c` without touching the disk (the trace's paths are joined, not
/// resolved).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Why a stored trial's traced inputs no longer hold: the first input found changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputChange {
    #[error("its {INPUTS_FILE} cannot be read")]
    Unreadable,
    #[error("{0} changed")]
    Changed(String),
    #[error("{0} was removed")]
    Removed(String),
}

/// What the build knows for traced inputs: the scope, the digest cache and, per build, what
/// each path and each stored trace verified to (a 10,000-trial rerun whose trials share one
/// trace reads it once and stats each file once).
pub struct Inputs {
    scope: Scope,
    pub(crate) digests: Arc<DigestCache>,
    /// Trace blobs already verified in this build: `None` holds, `Some(path)` changed.
    verified: Mutex<HashMap<String, Result<(), InputChange>>>,
    current: Mutex<HashMap<PathBuf, Current>>,
    /// Records reused without a trace, with why, to say so once.
    pub(crate) untraced: Mutex<HashMap<String, usize>>,
}

/// How a finished trial's inputs settled.
pub(crate) enum Settled {
    /// The summary for its record; `inputs.json` is in its directory when traced.
    Ok(InputsSummary),
    /// An input known before the trial changed while it ran: its result must not be stored.
    ChangedDuring(PathBuf),
}

impl Inputs {
    pub(crate) fn new(scope: Scope, digests: Arc<DigestCache>) -> Inputs {
        Inputs {
            scope,
            digests,
            verified: Mutex::default(),
            current: Mutex::default(),
            untraced: Mutex::default(),
        }
    }

    fn current(&self, path: &Path) -> Current {
        if let Some(c) = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(path)
        {
            return c.clone();
        }
        let c = self.digests.current(path);
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(path.to_path_buf(), c.clone());
        c
    }

    /// Whether a stored record's traced inputs still hold (`Err`: which changed, and how). A
    /// record without a trace is reused by the rule before tracing (the command's named files
    /// are in its key) and counted, so the build can say so.
    pub(crate) fn verify(
        &self,
        store: &LocalStore,
        summary: Option<&InputsSummary>,
    ) -> Result<(), InputChange> {
        let Some(s) = summary else { return Ok(()) };
        let Some(digest) = s.digest.as_deref().filter(|_| s.traced) else {
            let why = s.reason.clone().unwrap_or_else(|| "not traced".into());
            *self
                .untraced
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(why)
                .or_default() += 1;
            return Ok(());
        };
        if let Some(r) = self
            .verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(digest)
        {
            return r.clone();
        }
        let r = self.verify_list(store, digest);
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(digest.to_owned(), r.clone());
        r
    }

    fn verify_list(&self, store: &LocalStore, digest: &str) -> Result<(), InputChange> {
        let Some(list) = read_list(store, digest) else {
            return Err(InputChange::Unreadable);
        };
        let changed = |f: &InputFile| match self.current(&self.scope.resolve(&f.path)) {
            Current::Digest { blake3, .. } if blake3 == f.blake3 => None,
            Current::Digest { .. } => Some(InputChange::Changed(f.path.clone())),
            Current::Missing => Some(InputChange::Removed(f.path.clone())),
        };
        let first = if list.files.len() >= 64 {
            list.files.par_iter().find_map_first(changed)
        } else {
            list.files.iter().find_map(changed)
        };
        first.map_or(Ok(()), Err)
    }

    /// After a traced trial: reads `aorta-trace`'s file, keeps the inputs in scope, hashes
    /// them (through the digest cache) and writes `inputs.json` into the trial's directory.
    /// `started`: when the trial's process started, to catch an edit made while it ran.
    pub(crate) fn settle(&self, dir: &Path, started: SystemTime) -> Settled {
        let trace_path = dir.join(TRACE_FILE);
        let trace = aorta_trace::read_trace(&trace_path);
        let _ = std::fs::remove_file(&trace_path);
        let trace: Trace = match trace {
            Ok(t) => t,
            Err(e) => {
                return Settled::Ok(untraced(format!("the trace could not be read: {e}")));
            }
        };
        if trace.status != TraceStatus::Complete {
            let why = trace
                .reason
                .unwrap_or_else(|| "the tracer could not trace it".into());
            return Settled::Ok(untraced(why));
        }
        let dir = absolute(dir);
        let candidates: Vec<PathBuf> = trace
            .files
            .iter()
            .filter_map(|f| self.scope.input(f, &dir))
            .collect();
        let started_ns = started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let settled: Vec<Option<Result<InputFile, PathBuf>>> = candidates
            .par_iter()
            .map(|p| {
                let meta = std::fs::metadata(p).ok().filter(|m| m.is_file())?;
                let fp = Fingerprint::of(&meta);
                if fp.ctime_ns >= started_ns {
                    // Known before the trial and changed since: an edit during the run.
                    // Unknown: the trial (or its tools) made it, so it is not an input.
                    return match self.digests.known(p) {
                        Some(old) if old != fp => Some(Err(p.clone())),
                        _ => None,
                    };
                }
                match self.digests.current(p) {
                    Current::Digest { blake3, size } => Some(Ok(InputFile {
                        path: self.scope.stored(p),
                        blake3,
                        size,
                    })),
                    Current::Missing => None,
                }
            })
            .collect();
        let mut files = Vec::with_capacity(settled.len());
        for s in settled.into_iter().flatten() {
            match s {
                Ok(f) => files.push(f),
                Err(p) => return Settled::ChangedDuring(p),
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files.dedup_by(|a, b| a.path == b.path);
        let list = InputList {
            format: INPUTS_FORMAT,
            files,
        };
        let Ok(bytes) = serde_json::to_vec_pretty(&list) else {
            return Settled::Ok(untraced("the input list could not be encoded".into()));
        };
        if let Err(e) = std::fs::write(dir.join(INPUTS_FILE), &bytes) {
            return Settled::Ok(untraced(format!("cannot write {INPUTS_FILE}: {e}")));
        }
        Settled::Ok(InputsSummary {
            traced: true,
            reason: None,
            count: list.files.len(),
            digest: Some(Digest::of_bytes(&bytes).as_str().to_owned()),
        })
    }

    /// `explain`'s lines for a stored record's traced inputs: how many, and each one, marked
    /// where it changed or was removed since the trial read it.
    pub(crate) fn describe(
        &self,
        store: &LocalStore,
        summary: Option<&InputsSummary>,
    ) -> Vec<String> {
        let Some(s) = summary else {
            return vec![
                "traced inputs: none recorded (a workload trial, or a record from before tracing)"
                    .into(),
            ];
        };
        let Some(digest) = s.digest.as_deref().filter(|_| s.traced) else {
            return vec![format!(
                "traced inputs: not traced ({}); reuse checks only the files the command names",
                s.reason.as_deref().unwrap_or("no reason recorded")
            )];
        };
        let Some(list) = read_list(store, digest) else {
            return vec![format!(
                "traced inputs: {} (its {INPUTS_FILE} cannot be read)",
                s.count
            )];
        };
        let mut out = vec![format!("traced inputs: {} file(s)", list.files.len())];
        for f in &list.files {
            let mark = match self.current(&self.scope.resolve(&f.path)) {
                Current::Digest { blake3, .. } if blake3 == f.blake3 => "",
                Current::Digest { .. } => "  (changed: the next build runs this trial)",
                Current::Missing => "  (removed: the next build runs this trial)",
            };
            out.push(format!("  input {}{mark}", f.path));
        }
        out
    }

    /// Why reused records had no trace, with their counts (said once per build).
    pub(crate) fn take_untraced(&self) -> Vec<(String, usize)> {
        let mut m = self.untraced.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, usize)> = m.drain().collect();
        v.sort();
        v
    }
}

/// The `inputs.json` a record names, from the store.
fn read_list(store: &LocalStore, digest: &str) -> Option<InputList> {
    let blob = store.read_blob(&Digest::parse(digest).ok()?).ok()?;
    serde_json::from_slice(&blob).ok()
}

/// The summary of a trial that ran untraced.
pub(crate) fn untraced(reason: String) -> InputsSummary {
    InputsSummary {
        traced: false,
        reason: Some(reason),
        count: 0,
        digest: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_leaves_out_system_python_writes_and_ignored_paths() {
        let ws = Path::new("/w");
        let scope = Scope::new(ws, Path::new("/w/.aorta"), &["data/scratch/**".into()]).unwrap();
        let f = |p: &str, write: bool| TracedFile {
            path: p.into(),
            read: !write,
            write,
            exec: false,
            lossy: None,
        };
        let dir = Path::new("/w/out/trial_0");
        let is_input = |p: &str| scope.input(&f(p, false), dir).is_some();
        assert!(is_input("/w/train.py"));
        assert!(is_input("/w/./pkg/../pkg/mod.py"));
        assert!(is_input("/home/me/data.bin"));
        assert!(!is_input("/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(!is_input("/proc/self/status"));
        assert!(!is_input(
            "/w/.venv/lib/python3.11/site-packages/torch/__init__.py"
        ));
        assert!(!is_input(
            "/root/.pyenv/versions/3.11.7/lib/python3.11/os.py"
        ));
        assert_eq!(
            scope.input(&f("/w/pkg/__pycache__/mod.cpython-311.pyc", false), dir),
            Some(PathBuf::from("/w/pkg/mod.py")),
        );
        assert!(!is_input(
            "/w/.venv/lib/python3.11/site-packages/x/__pycache__/y.cpython-311.pyc"
        ));
        assert!(!is_input("/w/stray.pyc"));
        assert!(!is_input("/w/out/trial_0/stdout.log"));
        assert!(!is_input("/w/.aorta/ac/ab/cd"));
        assert!(!is_input("/w/data/scratch/tmp.bin"));
        assert!(scope.input(&f("/w/out.txt", true), dir).is_none());
        assert_eq!(scope.stored(Path::new("/w/pkg/mod.py")), "pkg/mod.py");
        assert_eq!(scope.stored(Path::new("/elsewhere/x")), "/elsewhere/x");
        assert_eq!(scope.resolve("pkg/mod.py"), Path::new("/w/pkg/mod.py"));
    }

    #[test]
    fn the_digest_cache_hashes_only_what_moved() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "one").unwrap();
        let cache = DigestCache::open(dir.path());
        let first = cache.current(&file);
        assert_eq!(cache.current(&file), first);
        assert_eq!(cache.hashed.load(std::sync::atomic::Ordering::Relaxed), 1);
        cache.save();
        let reopened = DigestCache::open(dir.path());
        assert_eq!(reopened.current(&file), first);
        assert_eq!(
            reopened.hashed.load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        std::fs::write(&file, "two").unwrap();
        assert_ne!(reopened.current(&file), first);
        std::fs::remove_file(&file).unwrap();
        assert_eq!(reopened.current(&file), Current::Missing);
    }
}
