//! Tiers 1–3 through `classify`, with real trial directories (AORTA §11.8 Tier 1 and Tier 3).

mod common;

use aorta_classify::{
    classify, ClassifierConfig, GpuSnapshot, Observation, Verdict, MAX_DMESG_BYTES,
    TIER3_LOG_PATTERNS,
};
use common::*;

#[test]
fn tier1_exit_codes() {
    let t = Trial::new();
    let cases: [(i32, &[&str]); 6] = [
        (0, &[]),
        (1, &["tier1:exit_nonzero"]),
        (-11, &["tier1:sigsegv"]),
        (-6, &["tier1:sigabrt"]),
        (-7, &["tier1:sigbus"]),
        (-9, &["tier1:exit_nonzero"]),
    ];
    for (code, want) in cases {
        let c = run(&Observation {
            exit_code: code,
            ..t.obs()
        });
        assert_eq!(c.failure_detectors_fired, want, "exit {code}");
        assert!(c.error_detectors_fired.is_empty());
    }
}

#[test]
fn tier1_timeout_alone_with_any_code() {
    let t = Trial::new();
    for code in [-1, 0, 1, -9] {
        let c = run(&Observation {
            exit_code: code,
            timed_out: true,
            ..t.obs()
        });
        assert_eq!(c.error_detectors_fired, ["tier1:timeout"]);
        assert!(c.failure_detectors_fired.is_empty());
        assert_eq!(c.verdict, Verdict::Error);
    }
}

#[test]
fn tier1_exec_failed_suppresses_timeout_and_core() {
    let t = Trial::new();
    std::fs::write(t.path("core"), b"").unwrap();
    let c = run(&Observation {
        exit_code: 127,
        exec_failed: true,
        timed_out: true,
        ..t.obs()
    });
    assert_eq!(c.error_detectors_fired, ["tier1:exec_failed"]);
    assert!(c.failure_detectors_fired.is_empty());
    assert_eq!(c.verdict, Verdict::Error);
}

#[test]
fn tier1_core_files() {
    for name in ["core", "core.123"] {
        let t = Trial::new();
        std::fs::write(t.path(name), b"\x7fELF").unwrap();
        let c = run(&t.obs());
        assert_eq!(c.failure_detectors_fired, ["tier1:coredump"], "{name}");
        let c = run(&Observation {
            exit_code: -11,
            ..t.obs()
        });
        assert_eq!(
            c.failure_detectors_fired,
            ["tier1:sigsegv", "tier1:coredump"]
        );
    }
    // Not a core: a look-alike name, a nested file, a directory named core.
    let t = Trial::new();
    std::fs::write(t.path("corefile"), b"").unwrap();
    std::fs::create_dir_all(t.path("sub")).unwrap();
    std::fs::write(t.path("sub/core"), b"").unwrap();
    std::fs::create_dir(t.path("core.d")).unwrap();
    assert!(run(&t.obs()).failure_detectors_fired.is_empty());
}

#[test]
fn tier1_core_in_the_childs_working_dir() {
    let t = Trial::new();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("core.4121"), b"").unwrap();
    let c = run(&Observation {
        exit_code: -6,
        core_dirs: vec![cwd.path().to_path_buf()],
        ..t.obs()
    });
    assert_eq!(
        c.failure_detectors_fired,
        ["tier1:sigabrt", "tier1:coredump"]
    );
}

#[test]
fn tier1_missing_trial_dir_is_no_error() {
    let obs = Observation {
        trial_dir: "/nonexistent/aorta/t0".into(),
        core_dirs: vec!["/nonexistent/cwd".into()],
        ..Default::default()
    };
    let c = run(&obs);
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c.capture.is_empty());
}

#[test]
fn tier2_hang_kept_or_reconciled() {
    let t = Trial::new();
    let c = run(&Observation {
        hang_detected: true,
        ..t.obs()
    });
    assert_eq!(c.verdict, Verdict::Pass);
    assert!(c.capture.tier2_hang_latched_but_reconciled);
    let c = run(&Observation {
        hang_detected: true,
        exit_code: 1,
        ..t.obs()
    });
    assert_eq!(
        c.failure_detectors_fired,
        ["tier1:exit_nonzero", "tier2:hang"]
    );
    assert!(!c.capture.tier2_hang_latched_but_reconciled);
}

fn dmesg(text: &str) -> Observation {
    Observation {
        dmesg_text: Some(text.to_string()),
        ..Default::default()
    }
}

#[test]
fn tier3_each_dmesg_fixture_line_fires_its_id() {
    let rows = tsv("dmesg_events.tsv");
    for p in TIER3_LOG_PATTERNS {
        assert!(
            rows.iter().any(|(id, _)| id == p.id),
            "no fixture for {}",
            p.id
        );
    }
    for (id, line) in rows {
        let c = run(&dmesg(&format!("[    1.0] unrelated boot line\n{line}\n")));
        assert!(
            c.failure_detectors_fired.contains(&id),
            "{id} did not fire on {line:?}: {:?}",
            c.failure_detectors_fired
        );
        assert_eq!(c.verdict, Verdict::Fail);
    }
}

#[test]
fn tier3_xid_number_and_pci_are_captured() {
    let line = "[  812.441912] NVRM: Xid (PCI:0000:18:00): 79, pid=4121, name=python, GPU has fallen off the bus.";
    let c = run(&dmesg(line));
    assert_eq!(c.failure_detectors_fired, ["tier3:nvidia_xid"]);
    assert_eq!(c.capture.group("xid").unwrap(), "79");
    assert_eq!(c.capture.group("xid_pci").unwrap(), "PCI:0000:18:00");
}

#[test]
fn tier3_benign_kernel_lines_fire_nothing() {
    let c = run(&dmesg(&fixture("dmesg_benign.txt")));
    assert_eq!(c.verdict, Verdict::Pass, "{:?}", c.failure_detectors_fired);
    assert!(c.failure_detectors_fired.is_empty());
    let c = run(&dmesg(
        "[    4.1] amdgpu 0000:c1:00.0: amdgpu: XGMI initialized",
    ));
    assert!(c.failure_detectors_fired.is_empty());
}

/// Issue 36: the kernel's and the drivers' own wordings, one fixture per source and version
/// (`tests/fixtures/kernel/*.log`, each naming its source and the detectors it must fire, and
/// no other), judged as a trial's dmesg and by `aorta classify --dmesg` alike.
#[test]
fn tier3_kernel_wordings_fire_exactly_what_their_fixture_expects() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(text.starts_with("# source: "), "{name} names no source");
        let expect: std::collections::BTreeSet<String> = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect:"))
            .unwrap_or_else(|| panic!("{name} has no `# expect:` line"))
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let log: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let trial: std::collections::BTreeSet<String> = run(&dmesg(&log))
            .failure_detectors_fired
            .into_iter()
            .collect();
        assert_eq!(trial, expect, "{name} as a trial's dmesg");
        let post = aorta_classify::classify_logs(
            [aorta_classify::LogInput {
                name: name.clone(),
                kind: aorta_classify::LogKind::Kernel,
                reader: Box::new(std::io::Cursor::new(log.into_bytes())),
            }],
            &Default::default(),
        )
        .unwrap();
        let post: std::collections::BTreeSet<String> =
            post.findings.into_iter().map(|f| f.detector).collect();
        assert_eq!(post, expect, "{name} through classify_logs");
    }
}

#[test]
fn tier3_huge_dmesg_keeps_the_tail() {
    let head = "[    1.0] amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!\n";
    let tail = "[ 9999.0] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=python, GPU has fallen off the bus.\n";
    let mut text = String::from(head);
    text.push_str(&filler(MAX_DMESG_BYTES + MIB));
    text.push_str(tail);
    let c = run(&dmesg(&text));
    assert_eq!(
        c.failure_detectors_fired,
        ["tier3:nvidia_xid"],
        "the head fell outside the kept tail"
    );
}

#[test]
fn tier3_missing_dmesg_means_no_dmesg_detectors() {
    let c = run(&Observation {
        dmesg_text: None,
        ..Default::default()
    });
    assert_eq!(c.verdict, Verdict::Pass);
}

fn snap(vram: i64, throttle: i64) -> Option<GpuSnapshot> {
    Some(GpuSnapshot {
        vram_used_mib: Some(vram),
        throttle: Some(throttle),
    })
}

#[test]
fn tier3_vram_growth_is_a_warning() {
    let obs = Observation {
        gpu_pre: snap(100, 0),
        gpu_post: snap(600, 0),
        ..Default::default()
    };
    let c = run(&obs);
    assert_eq!(c.verdict, Verdict::Pass);
    assert_eq!(c.warn_detectors_fired, ["tier3:vram_growth"]);
    assert!(c.failure_detectors_fired.is_empty());

    let off = ClassifierConfig {
        tier3_vram_growth: false,
        ..Default::default()
    };
    assert!(classify(&obs, &off).warn_detectors_fired.is_empty());

    let small = Observation {
        gpu_pre: snap(100, 0),
        gpu_post: snap(355, 0),
        ..Default::default()
    };
    assert!(
        run(&small).warn_detectors_fired.is_empty(),
        "255 MiB is below the threshold"
    );
    let none = Observation {
        gpu_pre: None,
        gpu_post: snap(6000, 3),
        ..Default::default()
    };
    let c = run(&none);
    assert!(c.warn_detectors_fired.is_empty() && c.failure_detectors_fired.is_empty());
}

#[test]
fn tier3_thermal_throttle_fails() {
    let c = run(&Observation {
        gpu_pre: snap(100, 0),
        gpu_post: snap(100, 1),
        ..Default::default()
    });
    assert_eq!(c.failure_detectors_fired, ["tier3:thermal_throttle"]);
    assert_eq!(c.verdict, Verdict::Fail);
}

#[test]
fn tier3_is_skipped_for_a_command_that_never_ran() {
    let obs = Observation {
        exec_failed: true,
        exit_code: 127,
        dmesg_text: Some("amdgpu: GPU reset begin!".into()),
        gpu_pre: snap(0, 0),
        gpu_post: snap(1000, 1),
        ..Default::default()
    };
    let c = run(&obs);
    assert_eq!(c.error_detectors_fired, ["tier1:exec_failed"]);
    assert!(c.failure_detectors_fired.is_empty() && c.warn_detectors_fired.is_empty());
}

#[test]
fn collect_dmesg_degrades_to_a_reason() {
    // Either the log (privileged host) or a one-line reason; never a panic or a hang.
    match aorta_classify::collect_dmesg(5) {
        Ok(_) => {}
        Err(e) => {
            let reason = e.to_string();
            assert!(!reason.is_empty() && !reason.contains('\n'), "{reason:?}")
        }
    }
}

#[test]
fn tier_durations_cover_all_five_tiers() {
    let c = run(&Trial::new().obs());
    let keys: Vec<_> = c.tier_durations_ms.keys().map(String::as_str).collect();
    assert_eq!(keys, ["tier1", "tier2", "tier3", "tier4", "tier5"]);
    assert!(c.tier_durations_ms.values().all(|v| *v >= 0.0));
}
