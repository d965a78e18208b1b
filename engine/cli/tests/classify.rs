//! `aorta classify`: logs that already exist through the trials' classifier, from the CLI.
mod common;
use common::*;
use std::io::Write;
use std::process::{Command, Stdio};

const FIX: &str = "engine/cli/tests/fixtures/classify";

fn fix(name: &str) -> String {
    format!("{FIX}/{name}")
}

#[test]
fn output_and_kernel_logs_with_and_without_timestamps() {
    let out = aorta(&[
        "classify",
        &fix("train.log"),
        "--dmesg",
        &fix("dmesg.txt"),
        "--dmesg",
        &fix("journal.txt"),
    ]);
    insta::assert_snapshot!(transcript(&out));
}

#[test]
fn a_recipe_adds_its_custom_patterns_and_disables() {
    // ticket-1234: custom `loss` (condition > 100) and `illegal_access`; tier3 disabled.
    let out = aorta(&[
        "classify",
        &fix("train.log"),
        "--dmesg",
        &fix("dmesg.txt"),
        "--recipe",
        "//recipes:ticket-1234",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_clean_log_exits_0_and_bad_input_exits_2() {
    let clean = aorta(&[
        "classify",
        "engine/classify/tests/corpus/clean-nccl-info.log",
    ]);
    assert_eq!(clean.status.code(), Some(0), "{}", transcript(&clean));
    for args in [
        vec!["classify", "no/such.log"],
        vec!["classify", "-", "--dmesg", "-"],
        vec!["classify", "engine"],
        vec![
            "classify",
            &fix("train.log"),
            "--recipe",
            "recipes/nope.yaml",
        ],
    ] {
        let out = aorta(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", transcript(&out));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}

/// Every log of the classifier's corpus fires exactly the Tier-4 detectors its manifest lists.
#[test]
fn the_corpus_fires_what_its_manifest_lists() {
    let corpus = repo_root().join("engine/classify/tests/corpus");
    let manifest = std::fs::read_to_string(corpus.join("MANIFEST.tsv")).unwrap();
    let mut checked = 0;
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let mut cols = line.split('\t');
        let (file, want) = (cols.next().unwrap(), cols.next().unwrap());
        let mut want: Vec<String> = want
            .split(',')
            .filter(|s| *s != "-")
            .map(|s| format!("tier4:{s}"))
            .collect();
        want.sort();
        let path = corpus.join(file);
        let out = aorta(&["classify", "--json", path.to_str().unwrap()]);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut got: Vec<String> = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                assert!(f["line"].as_u64().unwrap() >= 1);
                f["detector"].as_str().unwrap().to_string()
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "{file}");
        let code = if want.is_empty() { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(code), "{file}");
        checked += 1;
    }
    assert!(checked >= 40, "{checked}");
}

/// A long log streamed through stdin is read whole in bounded memory: 256 MiB of training
/// output ending in an OOM, and the peak resident set of that one process (wait4's rusage).
#[test]
// Reaped by wait4 below, which std's Child cannot do, to read this one process's rusage.
#[allow(clippy::zombie_processes)]
fn a_long_log_on_stdin_streams_in_bounded_memory() {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("aorta"))
        .args(["classify", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let block: String = (0..4096)
            .map(|i| {
                format!(
                    "[rank{}] step {i} loss=2.{i:04} lr=3.0e-4 tokens/s=41230 INFO ok\n",
                    i % 8
                )
            })
            .collect();
        let mut written = 0usize;
        let mut lines = 0u64;
        while written < 256 << 20 {
            stdin.write_all(block.as_bytes()).unwrap();
            written += block.len();
            lines += 4096;
        }
        stdin
            .write_all(b"RuntimeError: CUDA error: out of memory\n")
            .unwrap();
        lines + 1
    });
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let last_line = writer.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own unreaped child; status and usage are valid out-pointers.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let json: serde_json::Value = serde_json::from_str(&reader.join().unwrap()).unwrap();
    assert_eq!(json["findings"][0]["detector"], "tier4:cuda_error");
    assert_eq!(json["findings"][0]["line"], last_line);
    assert!(json["logs"][0]["bytes_read"].as_u64().unwrap() > 256 << 20);
    let peak_mib = usage.ru_maxrss / 1024; // KiB on Linux
    assert!(peak_mib < 48, "peak RSS {peak_mib} MiB for a 256 MiB log");
}

#[test]
fn an_amdgpu_page_fault_fires_and_a_kernel_log_passed_as_a_log_gets_a_hint() {
    // Newer kernels print `[gfxhub]` without an instance number.
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("kernel.txt");
    std::fs::write(
        &k,
        "[ 812.4] amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:32771)\n",
    )
    .unwrap();
    let k = k.to_str().unwrap();
    let out = aorta(&["classify", "--dmesg", k]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tier3:amdgpu_page_fault"));
    let out = aorta(&["classify", k]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "reads like a kernel log (tier3:amdgpu_page_fault at line 1): pass it with --dmesg"
        ),
        "{err}"
    );
}
