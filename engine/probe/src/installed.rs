//! What is installed for the chosen interpreter, read from files instead of by importing it:
//! the distributions on its `sys.path` (`*.dist-info/METADATA`, `*.egg-info/PKG-INFO`), torch's
//! `version.py`, and a content identity of the installed torch wheel (its `RECORD`).
//!
//! The interpreter only says where it looks (`sys.path`, site-packages) and where `import torch`
//! would load torch from (`importlib.util.find_spec`); everything here is plain parsing, so it is
//! unit-tested in Rust, runs on every probe (a warm one too: a few small files) and never
//! depends on whether the interpreter's answer came from the cache.

use crate::error::ProbeError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One installed distribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dist {
    /// PEP 503-normalised (`nvidia_cudnn_cu13` → `nvidia-cudnn-cu13`).
    pub name: String,
    pub version: String,
    /// The `.dist-info` / `.egg-info` entry.
    pub meta: PathBuf,
    /// The `sys.path` directory holding it.
    pub site: PathBuf,
}

/// Distribution-name prefixes recorded in `python.distributions`.
pub(crate) const TRACKED_DISTS: &[&str] = &[
    "nvidia-",
    "torch",
    "triton",
    "pytorch-triton",
    "rocm",
    "amd-",
    "cuda-",
];

pub(crate) fn tracked(name: &str) -> bool {
    TRACKED_DISTS.iter().any(|p| name.starts_with(p))
}

/// PEP 503: lower case, runs of `-`, `_`, `.` become one `-`.
pub(crate) fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Every distribution in `dirs`, in order (a name can appear twice: a user-site copy shadowing
/// the venv's), whose normalised name passes `keep`. The name is first guessed from the entry's
/// file name (cheap filter), then read with the version from the metadata headers; a metadata
/// file that cannot be read falls back to the file name.
pub(crate) fn scan(dirs: &[PathBuf], keep: &dyn Fn(&str) -> bool) -> Vec<Dist> {
    let mut out = Vec::new();
    for site in dirs {
        for entry in crate::libs::list_dir(site) {
            let (stem, meta_file) = if let Some(s) = entry.strip_suffix(".dist-info") {
                (s, Some("METADATA"))
            } else if let Some(s) = entry.strip_suffix(".egg-info") {
                (s, Some("PKG-INFO"))
            } else {
                continue;
            };
            let (guess_name, guess_version) = match stem.split_once('-') {
                Some((n, rest)) => (n, rest.split('-').next().unwrap_or("")),
                None => (stem, ""),
            };
            if !keep(&normalize(guess_name)) {
                continue;
            }
            let meta = site.join(&entry);
            // An .egg-info may be a file (distutils) or a directory.
            let meta_path = match meta_file {
                Some(f) if meta.is_dir() => meta.join(f),
                _ => meta.clone(),
            };
            let headers = std::fs::read(&meta_path)
                .map(|b| metadata_headers(&String::from_utf8_lossy(&b)))
                .unwrap_or_default();
            let name = headers
                .get("name")
                .map(|n| normalize(n))
                .unwrap_or_else(|| normalize(guess_name));
            let version = headers
                .get("version")
                .cloned()
                .unwrap_or_else(|| guess_version.to_string());
            if name.is_empty() || version.is_empty() || !keep(&name) {
                continue;
            }
            out.push(Dist {
                name,
                version,
                meta,
                site: site.clone(),
            });
        }
    }
    out
}

/// Name → version, the first occurrence on `sys.path` winning (what
/// `importlib.metadata.version(name)` returns), tracked names only.
pub(crate) fn distributions(dists: &[Dist]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for d in dists {
        out.entry(d.name.clone())
            .or_insert_with(|| d.version.clone());
    }
    out
}

/// The `Key: value` header block of a METADATA / PKG-INFO file (up to the first blank line),
/// keys lower-cased; the first occurrence wins.
pub(crate) fn metadata_headers(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue; // a continuation line
        }
        if let Some((k, v)) = line.split_once(':') {
            out.entry(k.trim().to_ascii_lowercase())
                .or_insert_with(|| v.trim().to_string());
        }
    }
    out
}

/// A literal of torch's generated `version.py`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PyLit {
    Str(String),
    Bool(bool),
    None,
}

/// `NAME = LITERAL` and `NAME: TYPE = LITERAL` assignments of a generated `version.py`
/// (`tools/generate_torch_version.py` writes exactly that): strings in either quote, `True`,
/// `False`, `None`. Anything else (imports, `__all__`, expressions) is skipped.
pub(crate) fn parse_version_py(text: &str) -> BTreeMap<String, PyLit> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some((lhs, rhs)) = line.split_once('=') else {
            continue;
        };
        if rhs.starts_with('=') {
            continue;
        }
        let name = lhs.split(':').next().unwrap_or("").trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rhs = rhs.split(" #").next().unwrap_or("").trim();
        let lit = match rhs {
            "None" => PyLit::None,
            "True" => PyLit::Bool(true),
            "False" => PyLit::Bool(false),
            _ => {
                let q = rhs.chars().next();
                match q {
                    Some(q @ ('\'' | '"')) if rhs.len() >= 2 && rhs.ends_with(q) => {
                        PyLit::Str(rhs[1..rhs.len() - 1].to_string())
                    }
                    _ => continue,
                }
            }
        };
        out.insert(name.to_string(), lit);
    }
    out
}

/// torch's `version.py`, as the snapshot uses it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TorchVersion {
    pub version: Option<String>,
    pub git_version: Option<String>,
    pub cuda: Option<String>,
    pub hip: Option<String>,
    pub debug: Option<bool>,
}

pub(crate) fn torch_version(text: &str) -> TorchVersion {
    let v = parse_version_py(text);
    let s = |k: &str| match v.get(k) {
        Some(PyLit::Str(s)) => Some(s.clone()),
        _ => None,
    };
    TorchVersion {
        version: s("__version__"),
        git_version: s("git_version"),
        cuda: s("cuda"),
        hip: s("hip"),
        debug: match v.get("debug") {
            Some(PyLit::Bool(b)) => Some(*b),
            _ => None,
        },
    }
}

/// blake3 hex over the hashed entries of an installed distribution's `RECORD`: one `path,hash`
/// line per file inside the site directory, sorted. Dropped: entries without a hash (`RECORD`
/// itself, byte code pip compiled), entries outside the site directory (`../../bin/torchrun`,
/// whose shebang names the venv), and the `.dist-info` directory's own files (`INSTALLER` says
/// pip or uv). What is left are the wheel's own hashes, the same for every installation of the
/// same wheel. `None` without a `RECORD` or without hashed entries (an editable or source
/// install).
pub(crate) fn record_blake3(dist_info: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dist_info.join("RECORD")).ok()?;
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let (path, rest) = split_csv_first(l.trim_end_matches('\r'))?;
            let hash = rest.split(',').next().unwrap_or("").trim();
            let first = path.split('/').next().unwrap_or("");
            let keep = !hash.is_empty()
                && !path.is_empty()
                && !path.starts_with('/')
                && !path.starts_with("..")
                && !first.ends_with(".dist-info");
            keep.then(|| format!("{path},{hash}"))
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    lines.sort();
    lines.dedup();
    Some(
        blake3::hash(lines.join("\n").as_bytes())
            .to_hex()
            .to_string(),
    )
}

/// First CSV field (quoted with `"` when it holds a comma) and the rest of the line.
fn split_csv_first(line: &str) -> Option<(String, &str)> {
    if let Some(q) = line.strip_prefix('"') {
        let mut field = String::new();
        let mut chars = q.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if chars.peek().map(|(_, n)| *n) == Some('"') {
                    field.push('"');
                    chars.next();
                } else {
                    let rest = &q[i + 1..];
                    return Some((field, rest.strip_prefix(',').unwrap_or(rest)));
                }
            } else {
                field.push(c);
            }
        }
        None
    } else {
        let (f, rest) = line.split_once(',').unwrap_or((line, ""));
        Some((f.to_string(), rest))
    }
}

/// The torch the interpreter would import, read from its files.
#[derive(Debug, Clone, Default)]
pub(crate) struct Torch {
    pub dir: PathBuf,
    pub version: TorchVersion,
    /// [`record_blake3`] of the distribution that installed this package (a `torch` dist-info
    /// in the same directory).
    pub record_blake3: Option<String>,
}

/// Reads torch from its package directory; `Err` says why `version.py` could not be used.
pub(crate) fn torch(dir: &Path, dists: &[Dist]) -> Result<Torch, ProbeError> {
    let vp = dir.join("version.py");
    let text = match std::fs::read_to_string(&vp) {
        Ok(t) => t,
        Err(source) => return Err(ProbeError::Read { path: vp, source }),
    };
    let version = torch_version(&text);
    if version.version.is_none() {
        return Err(ProbeError::NoTorchVersion { path: vp });
    }
    let parent = dir.parent().unwrap_or(dir);
    let dist = dists.iter().find(|d| d.name == "torch" && d.site == parent);
    let record_blake3 = dist
        .filter(|d| d.meta.extension().is_some_and(|e| e == "dist-info"))
        .and_then(|d| record_blake3(&d.meta));
    Ok(Torch {
        dir: dir.to_path_buf(),
        version,
        record_blake3,
    })
}

/// Every `nvidia-*` distribution in the given directories (all copies, in order): (normalised
/// name, version, directory), for [`version_of`]'s `dist-info:` source.
pub(crate) fn dist_infos(site_dirs: &[PathBuf]) -> Vec<(String, String, PathBuf)> {
    nvidia_dists(scan(site_dirs, &|n: &str| n.starts_with("nvidia-")))
}

/// [`dist_infos`]' answer from distributions scanned already (with a wider filter).
pub(crate) fn nvidia_dists(
    dists: impl IntoIterator<Item = Dist>,
) -> Vec<(String, String, PathBuf)> {
    dists
        .into_iter()
        .filter(|d| d.name.starts_with("nvidia-"))
        .map(|d| (d.name, d.version, d.site))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_py_of_torch_2_11_and_older() {
        let v = torch_version("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\ngit_version = '70d99e998b4955e0049d13a98d77ae1b14db1f45'\nhip: Optional[str] = None\nrocm: Optional[str] = None\nxpu: Optional[str] = None\n");
        assert_eq!(
            v,
            TorchVersion {
                version: Some("2.11.0+cu130".into()),
                git_version: Some("70d99e998b4955e0049d13a98d77ae1b14db1f45".into()),
                cuda: Some("13.0".into()),
                hip: None,
                debug: Some(false),
            }
        );
        let old = torch_version("__version__ = \"1.13.1+rocm5.2\"\ndebug = True\ncuda = None\ngit_version = \"49444c3e546bf240bed24a101e747422d1f8a0ee\"\nhip = '5.2.21151-afdc89f8'  # generated\n");
        assert_eq!(old.version.as_deref(), Some("1.13.1+rocm5.2"));
        assert_eq!(old.hip.as_deref(), Some("5.2.21151-afdc89f8"));
        assert_eq!((old.cuda, old.debug), (None, Some(true)));
        assert_eq!(
            torch_version("x == 1\n__version__ = f(1)\n"),
            TorchVersion::default()
        );
    }

    #[test]
    fn names_and_metadata() {
        assert_eq!(normalize("nvidia_cudnn_cu13"), "nvidia-cudnn-cu13");
        assert_eq!(normalize("Pytorch.Triton--ROCm"), "pytorch-triton-rocm");
        let h = metadata_headers("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.28.9\nSummary: x\n  continued\n\nVersion: 9\n");
        assert_eq!(h["name"], "nvidia-nccl-cu13");
        assert_eq!(h["version"], "2.28.9");
    }

    #[test]
    fn scan_reads_metadata_and_the_first_copy_wins() {
        let d = tempfile::tempdir().unwrap();
        let (user, venv) = (d.path().join("user"), d.path().join("venv"));
        for (site, ver) in [(&user, "2.12.0"), (&venv, "2.11.0")] {
            let m = site.join(format!("torch-{ver}.dist-info"));
            std::fs::create_dir_all(&m).unwrap();
            std::fs::write(
                m.join("METADATA"),
                format!("Name: torch\nVersion: {ver}+cu130\n"),
            )
            .unwrap();
        }
        std::fs::create_dir_all(venv.join("numpy-2.0.0.dist-info")).unwrap();
        std::fs::create_dir_all(venv.join("nvidia_nccl_cu13-2.28.9.dist-info")).unwrap();
        std::fs::write(
            venv.join("triton.egg-info"),
            "Metadata-Version: 1.0\nName: triton\nVersion: 3.6.0\n",
        )
        .unwrap();
        let all = scan(&[user.clone(), venv.clone()], &tracked);
        let names: Vec<(&str, &str)> = all
            .iter()
            .map(|d| (d.name.as_str(), d.version.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("torch", "2.12.0+cu130"),
                ("nvidia-nccl-cu13", "2.28.9"),
                ("torch", "2.11.0+cu130"),
                ("triton", "3.6.0")
            ],
            "metadata versions; no METADATA: the file name's; numpy untracked"
        );
        let m = distributions(&all);
        assert_eq!(
            m["torch"], "2.12.0+cu130",
            "the user site comes first on sys.path"
        );
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn record_identity_ignores_installer_and_location() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, body: &str| {
            let m = d.path().join(name);
            std::fs::create_dir_all(&m).unwrap();
            std::fs::write(m.join("RECORD"), body).unwrap();
            m
        };
        let pip = write("a.dist-info", "torch/__init__.py,sha256=AAA,10\ntorch/lib/libtorch_cuda.so,sha256=BBB,20\n../../../bin/torchrun,sha256=CCC,30\ntorch-2.11.0.dist-info/INSTALLER,sha256=pip,4\ntorch-2.11.0.dist-info/RECORD,,\ntorch/__pycache__/__init__.cpython-312.pyc,,\n\"torch/odd,name.py\",sha256=DDD,5\n");
        let uv = write("b.dist-info", "torch/lib/libtorch_cuda.so,sha256=BBB,20\n\"torch/odd,name.py\",sha256=DDD,5\r\ntorch/__init__.py,sha256=AAA,10\n../../bin/torchrun,sha256=EEE,31\ntorch-2.11.0.dist-info/INSTALLER,sha256=uv,3\n");
        let other = write(
            "c.dist-info",
            "torch/__init__.py,sha256=AAA,10\ntorch/lib/libtorch_cuda.so,sha256=XXX,20\n",
        );
        let editable = write("d.dist-info", "__editable__.torch.pth,,\n");
        assert!(record_blake3(&pip).is_some());
        assert_eq!(
            record_blake3(&pip),
            record_blake3(&uv),
            "pip and uv installs of one wheel"
        );
        assert_ne!(record_blake3(&pip), record_blake3(&other), "another build");
        assert_eq!(record_blake3(&editable), None);
        assert_eq!(record_blake3(d.path()), None, "no RECORD");
    }

    #[test]
    fn torch_is_read_from_its_directory() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("site-packages");
        let t = site.join("torch");
        std::fs::create_dir_all(&t).unwrap();
        let e = torch(&t, &[]).unwrap_err();
        assert!(matches!(&e, ProbeError::Read { path, .. } if path == &t.join("version.py")));
        assert!(e.to_string().contains("version.py: no such file"));
        std::fs::write(t.join("version.py"), "__version__ = '2.11.0'\n").unwrap();
        let m = site.join("torch-2.11.0.dist-info");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(m.join("RECORD"), "torch/version.py,sha256=AAA,20\n").unwrap();
        let dists = scan(std::slice::from_ref(&site), &tracked);
        let got = torch(&t, &dists).unwrap();
        assert_eq!(got.version.version.as_deref(), Some("2.11.0"));
        assert!(got.record_blake3.is_some());
        let elsewhere = torch(
            &t,
            &[Dist {
                site: d.path().into(),
                ..dists[0].clone()
            }],
        )
        .unwrap();
        assert_eq!(
            elsewhere.record_blake3, None,
            "a dist-info of another directory is not this torch's"
        );
    }
}
