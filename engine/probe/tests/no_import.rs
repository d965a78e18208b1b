//! The default probe against a real interpreter (the `python3` on the test's PATH, skipped
//! without one) and fake torch installs: torch is found the way `import torch` would find it
//! (venv, user site, PYTHONPATH) and described from its files, and its `__init__.py` (which
//! records that it ran, then raises) is never executed unless `deep` asks for it.

use aorta_probe::{probe, KeyRules, ProbeCache, ProbeOptions, Snapshot, COLLECTED_FILES};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The real interpreter behind `python3` (a pyenv shim resolved), if there is one.
fn real_python() -> Option<PathBuf> {
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    (o.status.success() && p.is_absolute()).then_some(p)
}

macro_rules! python_or_skip {
    () => {
        match real_python() {
            Some(p) => p,
            None => {
                eprintln!("skipped: no python3 on PATH");
                return;
            }
        }
    };
}

fn write(p: &Path, body: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

/// A fake torch 2.11.0+cu130 wheel install with its nvidia wheels in `site`.
fn install_torch(site: &Path, version: &str) {
    write(
        &site.join("torch/__init__.py"),
        "import os\nopen(os.environ['AORTA_TEST_IMPORT_MARKER'], 'a').write(__file__ + '\\n')\nraise ImportError('fake torch: the default probe must not import me')\n",
    );
    write(
        &site.join("torch/version.py"),
        &format!("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = '13.0'\ngit_version = '70d99e998b4955e0049d13a98d77ae1b14db1f45'\nhip: Optional[str] = None\n"),
    );
    let base = version.split('+').next().unwrap();
    write(
        &site.join(format!("torch-{version}.dist-info/METADATA")),
        &format!("Metadata-Version: 2.1\nName: torch\nVersion: {version}\n\nlong description\nVersion: 0\n"),
    );
    write(
        &site.join(format!("torch-{version}.dist-info/RECORD")),
        &format!("torch/__init__.py,sha256=AAA,100\ntorch/version.py,sha256=BBB{base},300\n../../../bin/torchrun,sha256=CCC,200\ntorch-{version}.dist-info/RECORD,,\n"),
    );
    write(
        &site.join("triton-3.6.0.dist-info/METADATA"),
        "Name: triton\nVersion: 3.6.0\n",
    );
    write(
        &site.join("nvidia_cudnn_cu13-9.19.0.56.dist-info/METADATA"),
        "Name: nvidia-cudnn-cu13\nVersion: 9.19.0.56\n",
    );
    write(&site.join("nvidia/cudnn/lib/libcudnn.so.9"), "fake cudnn\n");
    write(
        &site.join("nvidia/cudnn/lib/libcudnn_graph.so.9"),
        "fake cudnn graph\n",
    );
    write(
        &site.join("nvidia/nccl/include/nccl.h"),
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n",
    );
    write(&site.join("nvidia/nccl/lib/libnccl.so.2"), "fake nccl\n");
}

struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
    marker: PathBuf,
    home: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    Sandbox {
        marker: dir.path().join("imported.txt"),
        root,
        home,
        _dir: dir,
    }
}

fn opts(b: &Sandbox, python: &Path, extra: &[(&str, &Path)]) -> ProbeOptions {
    let mut env: BTreeMap<String, String> = [
        ("PATH", Path::new("/nonexistent")),
        ("HOME", b.home.as_path()),
        ("AORTA_TEST_IMPORT_MARKER", b.marker.as_path()),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.display().to_string()))
    .collect();
    env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    ProbeOptions {
        python: Some(python.to_path_buf()),
        env,
        root: b.root.clone(),
        ..ProbeOptions::default()
    }
}

fn reasons(s: &Snapshot) -> Vec<String> {
    s.partial_reasons
        .iter()
        .map(|r| format!("{}: {}", r.field, r.reason))
        .collect()
}

fn site_of(python: &Path, env: &[(&str, &Path)], expr: &str) -> PathBuf {
    let mut c = Command::new(python);
    c.args(["-c", &format!("import site; print({expr})")]);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
}

#[test]
fn a_venv_torch_is_described_without_importing_it() {
    let py = python_or_skip!();
    let b = sandbox();
    let venv = b.home.join("venv");
    let ok = Command::new(&py)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: {} -m venv failed", py.display());
        return;
    }
    let vpy = venv.join("bin/python3");
    let site = site_of(&vpy, &[], "site.getsitepackages()[0]");
    assert!(site.starts_with(&venv), "{}", site.display());
    install_torch(&site, "2.11.0+cu130");

    let cache = b.home.join("cache");
    let mut o = opts(&b, &vpy, &[]);
    o.cache = Some(ProbeCache::new(&cache));
    let cold = probe(&o);
    assert!(!b.marker.exists(), "torch/__init__.py ran");
    let r = reasons(&cold);
    assert!(!r.iter().any(|r| r.starts_with("pytorch")), "{r:#?}");
    assert_eq!(cold.probe.python_cache.as_deref(), Some("miss"));
    assert_eq!(cold.host.runtime.python_env.as_deref(), Some("venv"));
    assert_eq!(cold.python.site_packages, [site.display().to_string()]);
    let t = &cold.pytorch;
    assert_eq!(t.collected.as_deref(), Some(COLLECTED_FILES));
    assert_eq!(t.version.as_deref(), Some("2.11.0+cu130"));
    assert_eq!(t.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(t.debug, Some(false));
    assert_eq!(
        t.torch_dir.as_deref(),
        Some(site.join("torch").to_str().unwrap())
    );
    assert_eq!(t.triton_version.as_deref(), Some("3.6.0"));
    assert_eq!(
        t.cudnn_version.as_deref(),
        Some("9.19.0"),
        "from nvidia-cudnn-cu13's dist-info"
    );
    assert_eq!(t.nccl_version.as_deref(), Some("2.28.9"), "from nccl.h");
    assert!(t.record_blake3.is_some());
    assert_eq!(
        cold.python.distributions.get("torch").map(String::as_str),
        Some("2.11.0+cu130")
    );
    let cudnn = &cold.cuda.libraries["cudnn"];
    assert_eq!(cudnn.origin.as_deref(), Some("wheel"));
    assert_eq!(cudnn.files.len(), 2, "libcudnn and its sub-library");

    // Warm: no interpreter, same key, same keyed fields; and the same without any cache.
    let warm = probe(&o);
    assert_eq!(warm.probe.python_cache.as_deref(), Some("hit"));
    let rules = KeyRules::default();
    assert_eq!(cold.key(&rules), warm.key(&rules));
    let fresh = probe(&opts(&b, &vpy, &[]));
    assert_eq!(fresh.key(&rules), cold.key(&rules));
    assert!(!b.marker.exists());

    // A torch upgrade in place (new version.py and dist-info) invalidates the cached answer.
    std::fs::remove_dir_all(site.join("torch-2.11.0+cu130.dist-info")).unwrap();
    install_torch(&site, "2.11.1+cu130");
    let upgraded = probe(&o);
    assert_eq!(upgraded.pytorch.version.as_deref(), Some("2.11.1+cu130"));
    assert_ne!(upgraded.pytorch.record_blake3, cold.pytorch.record_blake3);
    assert_ne!(upgraded.key(&rules).hash, cold.key(&rules).hash);

    // --deep imports it (and reports that it failed), without touching the default key.
    o.deep = true;
    let deep = probe(&o);
    assert!(b.marker.exists(), "deep imported torch");
    let r = reasons(&deep);
    assert!(
        r.iter().any(|r| r.starts_with(
            "pytorch.collected: --deep: import torch failed (ImportError: fake torch"
        )),
        "{r:#?}"
    );
    assert_eq!(deep.key(&rules), upgraded.key(&rules));
}

#[test]
fn user_site_and_pythonpath_are_honoured() {
    let py = python_or_skip!();
    let b = sandbox();
    let ub = b.home.join("userbase");
    let user_site = site_of(
        &py,
        &[("PYTHONUSERBASE", &ub)],
        "site.getusersitepackages()",
    );
    assert!(user_site.starts_with(&ub), "{}", user_site.display());
    install_torch(&user_site, "2.12.0+cu130");
    let s = probe(&opts(&b, &py, &[("PYTHONUSERBASE", &ub)]));
    assert_eq!(
        s.pytorch.version.as_deref(),
        Some("2.12.0+cu130"),
        "{:#?}",
        reasons(&s)
    );
    assert!(s
        .python
        .site_packages
        .contains(&user_site.display().to_string()));
    assert!(s.cuda.libraries["cudnn"]
        .path
        .as_deref()
        .unwrap()
        .starts_with(ub.to_str().unwrap()));

    let pp = b.home.join("pythonpath");
    install_torch(&pp, "2.13.0+cu130");
    let s = probe(&opts(
        &b,
        &py,
        &[("PYTHONUSERBASE", &ub), ("PYTHONPATH", &pp)],
    ));
    assert_eq!(
        s.pytorch.version.as_deref(),
        Some("2.13.0+cu130"),
        "PYTHONPATH comes first"
    );
    assert_eq!(
        s.python.distributions.get("torch").map(String::as_str),
        Some("2.13.0+cu130"),
        "the first copy on sys.path"
    );

    let nouser = probe(&opts(
        &b,
        &py,
        &[
            ("PYTHONUSERBASE", &ub),
            ("PYTHONNOUSERSITE", Path::new("1")),
        ],
    ));
    assert!(!nouser
        .python
        .site_packages
        .contains(&user_site.display().to_string()));
    assert_ne!(nouser.pytorch.version.as_deref(), Some("2.12.0+cu130"));
    assert!(!b.marker.exists());
}

/// `python -c` puts the working directory first on `sys.path`; the script drops it, so a
/// `torch/` directory where aorta runs (a PyTorch checkout) is not taken for the installed one.
#[test]
fn the_working_directory_is_not_on_the_probe_path() {
    let py = python_or_skip!();
    let b = sandbox();
    install_torch(&b.home, "0.0.0+cwd");
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/torch_probe.py"))
            .unwrap();
    let o = Command::new(&py)
        .args(["-c", &script])
        .current_dir(&b.home)
        .env("AORTA_TEST_IMPORT_MARKER", &b.marker)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("AORTA_PROBE_JSON:"))
        .expect("a report");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let locations = v["torch_spec"]["locations"].to_string();
    assert!(!locations.contains(b.home.to_str().unwrap()), "{v}");
    assert!(
        !v["sys_path"].to_string().contains(b.home.to_str().unwrap()),
        "{v}"
    );
    assert!(!b.marker.exists());
}
