//! The probe's on-disk cache: the interpreter's report and library-file hashes.
//!
//! The interpreter's answer (where its packages are; with `--deep`, what `import torch`
//! reports, 3–6 s on the H200 machine) only changes when the interpreter or the installed
//! packages change, so it is cached under a name derived from (interpreter path, mode, the
//! environment variables the report depends on) and validated by a fingerprint: (mtime, size,
//! inode) of the interpreter, every `sys.path` and site-packages directory (an install or
//! uninstall rewrites it), `site-packages/nvidia`, the torch package directory,
//! `torch/version.py` and `torch/lib`. A warm probe stats those few paths and runs no Python at
//! all. The files the snapshot's keyed fields are read from (`version.py`, dist-info metadata,
//! headers) are read on every probe, cold or warm, so the key never depends on the cache.

use crate::cmd::Tools;
use crate::error::ProbeError;
use crate::report::{self, DeepReport, PyReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the probe keeps its cache; the CLI points it at `~/.cache/aorta/probe/` (see
/// `aorta_cli::cmd_cache::probe_cache_dir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCache {
    pub dir: PathBuf,
}

/// Bumped when the report format or the embedded script changes meaning.
const ENTRY_VERSION: u32 = 2;

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    version: u32,
    script_blake3: String,
    deep: bool,
    interpreter: String,
    env: BTreeMap<String, String>,
    fingerprint: Vec<Stamp>,
    report: PyReport,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    path: String,
    /// `None` when the path did not exist (its appearance invalidates too).
    stat: Option<(i64, i64, u64, u64)>,
}

impl ProbeCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ProbeCache { dir: dir.into() }
    }

    /// Removes the cache's files (not the directory).
    pub fn clear(&self) -> std::io::Result<()> {
        for e in std::fs::read_dir(&self.dir)?.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".json") && (n.starts_with("python-") || n == "file-hashes.json") {
                std::fs::remove_file(e.path())?;
            }
        }
        Ok(())
    }

    pub(crate) fn hashes_path(&self) -> PathBuf {
        self.dir.join("file-hashes.json")
    }

    /// `python-<id>.json` (default report) or `python-deep-<id>.json` (`--deep`).
    fn entry_path(&self, interp: &Path, env: &BTreeMap<String, String>, deep: bool) -> PathBuf {
        let mut h = blake3::Hasher::new();
        h.update(interp.as_os_str().as_encoded_bytes());
        h.update(b"\0");
        let env = serde_json::to_string(env).expect("a string map serializes");
        h.update(env.as_bytes());
        let kind = if deep { "python-deep" } else { "python" };
        self.dir
            .join(format!("{kind}-{}.json", &h.finalize().to_hex()[..24]))
    }

    /// The cached report, if its fingerprint still holds.
    pub(crate) fn load_python(
        &self,
        interp: &Path,
        env: &BTreeMap<String, String>,
        deep: bool,
    ) -> Option<PyReport> {
        let bytes = std::fs::read(self.entry_path(interp, env, deep)).ok()?;
        let e: Entry = serde_json::from_slice(&bytes).ok()?;
        let valid = e.version == ENTRY_VERSION
            && e.script_blake3 == script_hash()
            && e.deep == deep
            && e.interpreter == interp.display().to_string()
            && e.env == *env
            && e.fingerprint == fingerprint(interp, &e.report);
        valid.then_some(e.report)
    }

    pub(crate) fn store_python(
        &self,
        interp: &Path,
        env: &BTreeMap<String, String>,
        deep: bool,
        report: &PyReport,
    ) {
        let e = Entry {
            version: ENTRY_VERSION,
            script_blake3: script_hash(),
            deep,
            interpreter: interp.display().to_string(),
            env: env.clone(),
            fingerprint: fingerprint(interp, report),
            report: report.clone(),
        };
        let path = self.entry_path(interp, env, deep);
        if let Ok(bytes) = serde_json::to_vec(&e) {
            let _ = aorta_fsutil::write_atomic(&path, &bytes);
        }
    }
}

/// The report: from the cache when its fingerprint holds, else by running the interpreter
/// (with `import torch` when `deep`). Returns the report (or why there is none) and the cache
/// state (`hit`/`miss`/`off`). A deep run also stores the default report it contains, so a
/// later default probe starts no interpreter.
pub(crate) fn python_report(
    interp: &Path,
    cache: Option<&ProbeCache>,
    tools: &Tools,
    env: &BTreeMap<String, String>,
    timeout: Duration,
    deep: bool,
) -> (Result<PyReport, ProbeError>, &'static str) {
    let sig = env_signature(env, deep);
    if let Some(c) = cache {
        if let Some(r) = c.load_python(interp, &sig, deep) {
            return (Ok(r), "hit");
        }
    }
    let r = report::run_script(tools, interp, timeout, deep);
    let state = if cache.is_some() { "miss" } else { "off" };
    match (r, deep) {
        (Ok(rep), _) => {
            if let Some(c) = cache {
                c.store_python(interp, &sig, deep, &rep);
                if deep {
                    c.store_python(interp, &env_signature(env, false), false, &rep.files_only());
                }
            }
            (Ok(rep), state)
        }
        // `import torch` crashed, hung or printed garbage: the default answer still describes
        // torch from its files, so the keyed fields do not depend on it. Not cached.
        (Err(e), true) => {
            let (files, state) = python_report(interp, cache, tools, env, timeout, false);
            let rep = files.map(|f| PyReport {
                deep: Some(DeepReport {
                    torch_import_error: Some(e.to_string()),
                    ..DeepReport::default()
                }),
                ..f
            });
            (rep, state)
        }
        (Err(e), false) => (Err(e), state),
    }
}

/// Variables the report depends on: they name the cache entry. The default report (where
/// packages are) depends on how the interpreter builds `sys.path`; the deep one also on every
/// variable torch reads at import.
fn env_signature(env: &BTreeMap<String, String>, deep: bool) -> BTreeMap<String, String> {
    const FILES: &[&str] = &[
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONNOUSERSITE",
        "PYTHONUSERBASE",
        "PYTHONSAFEPATH",
        "PYTHONPLATLIBDIR",
        "HOME",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
    ];
    const DEEP: &[&str] = &[
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "CONDA_DEFAULT_ENV",
        "NVIDIA_TF32_OVERRIDE",
    ];
    const DEEP_PREFIXES: &[&str] = &[
        "TORCH_", "PYTORCH_", "CUDNN_", "CUBLAS", "TRITON_", "HIP_", "ROCM_", "HSA_",
    ];
    env.iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            FILES.contains(&k)
                || (deep
                    && (DEEP.contains(&k) || DEEP_PREFIXES.iter().any(|p| k.starts_with(p)))
                    && !k.ends_with("_VISIBLE_DEVICES"))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn script_hash() -> String {
    blake3::hash(report::SCRIPT.as_bytes()).to_hex().to_string()
}

fn stamp(p: &Path) -> Stamp {
    let stat = std::fs::metadata(p)
        .ok()
        .map(|m| (m.mtime(), m.mtime_nsec(), m.size(), m.ino()));
    Stamp {
        path: p.display().to_string(),
        stat,
    }
}

/// The paths whose change invalidates a cached report.
fn fingerprint(interp: &Path, report: &PyReport) -> Vec<Stamp> {
    let mut paths = vec![interp.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(interp) {
        paths.push(real);
    }
    let mut dirs: Vec<PathBuf> = report.sys_path.iter().map(PathBuf::from).collect();
    for s in &report.site_packages {
        let s = PathBuf::from(s);
        if !dirs.contains(&s) {
            dirs.push(s);
        }
    }
    for s in dirs {
        paths.push(s.join("nvidia"));
        paths.push(s);
    }
    let torch = report.torch_dir().or_else(|| {
        report
            .deep
            .as_ref()
            .and_then(|d| d.torch.as_ref()?.file.as_ref())
            .map(PathBuf::from)
    });
    if let Some(t) = torch {
        paths.extend([t.join("version.py"), t.join("lib"), t]);
    }
    paths.iter().map(|p| stamp(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{PyReport, TorchSpec};

    #[test]
    fn fingerprint_follows_the_torch_package() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("site-packages");
        let torch = site.join("torch");
        std::fs::create_dir_all(torch.join("lib")).unwrap();
        std::fs::write(torch.join("version.py"), "__version__ = '2.11.0'\n").unwrap();
        let interp = d.path().join("python3");
        std::fs::write(&interp, "").unwrap();
        let report = PyReport {
            site_packages: vec![site.display().to_string()],
            torch_spec: Some(TorchSpec {
                origin: Some(torch.join("__init__.py").display().to_string()),
                locations: vec![torch.display().to_string()],
            }),
            ..PyReport::default()
        };
        let cache = ProbeCache::new(d.path().join("cache"));
        let env = BTreeMap::new();
        assert!(cache.load_python(&interp, &env, false).is_none());
        cache.store_python(&interp, &env, false, &report);
        assert!(
            cache.load_python(&interp, &env, false).is_some(),
            "unchanged tree: hit"
        );
        assert!(
            cache.load_python(&interp, &env, true).is_none(),
            "a deep report is another entry"
        );
        let other_env: BTreeMap<String, String> =
            [("PYTHONPATH".to_string(), "/x".to_string())].into();
        assert!(
            cache.load_python(&interp, &other_env, false).is_none(),
            "a different environment is another entry"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(torch.join("version.py"), "__version__ = '2.12.0'\n").unwrap();
        assert!(
            cache.load_python(&interp, &env, false).is_none(),
            "torch changed: miss"
        );
        cache.store_python(&interp, &env, false, &report);
        std::fs::create_dir(site.join("nvidia")).unwrap();
        assert!(
            cache.load_python(&interp, &env, false).is_none(),
            "an nvidia wheel appeared: miss"
        );
        cache.clear().unwrap();
        assert!(std::fs::read_dir(d.path().join("cache"))
            .unwrap()
            .next()
            .is_none());
    }
}
