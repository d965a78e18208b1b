//! The probe never fails: no tools, no files, hanging or lying tools all give a fully shaped
//! snapshot whose `partial_reasons` say what is missing and why.

use aorta_probe::{probe, ProbeOptions, Snapshot, Timeouts};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every object key of `shape` is present in `v` (recursively; arrays are not compared).
fn assert_shaped(shape: &Value, v: &Value, at: &str) {
    if let (Value::Object(s), Value::Object(o)) = (shape, v) {
        for (k, sv) in s {
            let Some(ov) = o.get(k) else {
                panic!("missing key {at}.{k}")
            };
            assert_shaped(sv, ov, &format!("{at}.{k}"));
        }
    }
}

fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn disaster_snapshot_is_fully_shaped() {
    let root = tempfile::tempdir().unwrap();
    let s = probe(&ProbeOptions {
        root: root.path().to_path_buf(),
        ..ProbeOptions::default()
    });
    let shape = serde_json::to_value(Snapshot::default()).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    assert_shaped(&shape, &v, "<root>");
    assert!(s.partial);
    let fields: Vec<&str> = s.partial_reasons.iter().map(|r| r.field.as_str()).collect();
    assert!(fields.contains(&"python"), "{fields:?}");
    assert!(fields.contains(&"host.kernel_release"), "{fields:?}");
    assert_eq!(s.gpu.vendor, None);
    assert_eq!(
        s.gpu.count,
        Some(0),
        "no GPU tool and no device node: a CPU machine, not a failure"
    );
    assert!(
        !fields
            .iter()
            .any(|f| f.starts_with("gpu") || f.starts_with("cuda") || f.starts_with("rocm")),
        "{fields:?}"
    );
    assert_eq!(
        s.env_vars.len(),
        aorta_probe::canonical_names(&Default::default()).len()
    );
    assert!(s.env_vars.values().all(Option::is_none));
    assert_eq!(s.cuda.libraries.len(), 6);
    assert!(s.captured_at.as_deref().unwrap().ends_with('Z'));
}

#[test]
fn a_gpu_without_its_tools_is_partial() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("dev")).unwrap();
    std::fs::write(root.path().join("dev/nvidiactl"), "").unwrap();
    std::fs::create_dir_all(root.path().join("proc/driver/nvidia")).unwrap();
    std::fs::write(
        root.path().join("proc/driver/nvidia/version"),
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n",
    )
    .unwrap();
    let s = probe(&ProbeOptions {
        root: root.path().to_path_buf(),
        ..ProbeOptions::default()
    });
    assert_eq!(s.gpu.vendor.as_deref(), Some("nvidia"));
    assert_eq!(
        s.gpu.driver_version.as_deref(),
        Some("580.159.04"),
        "read from /proc when nvidia-smi is missing"
    );
    let r = s
        .partial_reasons
        .iter()
        .find(|r| r.field == "gpu.devices")
        .expect("a gpu.devices reason");
    assert!(r.reason.contains("nvidia-smi not on PATH"), "{}", r.reason);
}

#[test]
fn hanging_and_broken_tools_become_reasons() {
    let bin = tempfile::tempdir().unwrap();
    script(bin.path(), "nvidia-smi", "while :; do :; done");
    script(bin.path(), "python3", "echo 'Traceback: boom' >&2; exit 3");
    script(bin.path(), "nvcc", "echo 'not nvcc'");
    let root = tempfile::tempdir().unwrap();
    let env: BTreeMap<String, String> =
        [("PATH".to_string(), bin.path().display().to_string())].into();
    let opts = ProbeOptions {
        env,
        root: root.path().to_path_buf(),
        timeouts: Timeouts {
            tool: Duration::from_millis(300),
            python: Duration::from_secs(5),
        },
        ..ProbeOptions::default()
    };
    let t = Instant::now();
    let s = probe(&opts);
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "the hung tool was killed at its deadline"
    );
    let reason = |f: &str| {
        s.partial_reasons
            .iter()
            .find(|r| r.field == f)
            .map(|r| r.reason.clone())
            .unwrap_or_else(|| panic!("no reason for {f}: {:#?}", s.partial_reasons))
    };
    assert!(reason("gpu.devices").contains("timed out after 300 ms"));
    assert!(reason("python").contains("exited with status 3: Traceback: boom"));
    assert_eq!(s.cuda.nvcc.version, None);
    assert_eq!(
        s.python.executable.as_deref(),
        Some(bin.path().join("python3").to_str().unwrap())
    );
}
