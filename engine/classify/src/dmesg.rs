//! Collecting the kernel log for Tier 3 (AORTA §5.4).
//!
//! `dmesg` needs `CAP_SYSLOG` where `kernel.dmesg_restrict=1` (most distributions) and
//! util-linux's `--since` (busybox lacks it). Every failure comes back as a one-line reason
//! so the caller can warn once and classify without dmesg detectors.

use std::ffi::OsStr;
use std::io::{self, Read};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::tier3::MAX_DMESG_BYTES;

/// How long `dmesg` may take before it is killed.
pub const DMESG_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `dmesg --since "<since_secs> seconds ago"` (AORTA passes the trial's walltime + 5).
/// No `--no-pager`: older util-linux lacks it, and dmesg never pages into a pipe. Returns the log (at most its last 10 MiB, decoded with replacement) or why
/// it is unavailable: binary missing, permission denied (`dmesg_restrict`), unsupported
/// option, non-zero exit, or the 10 s timeout.
pub fn collect_dmesg(since_secs: u64) -> Result<String, DmesgError> {
    collect_with(OsStr::new("dmesg"), &[], since_secs, DMESG_TIMEOUT)
}

/// Why the kernel log could not be collected. `Display` is the one-line reason the engine
/// prints once ("tier3 disabled (dmesg): ...").
#[derive(Debug, thiserror::Error)]
pub enum DmesgError {
    #[error("dmesg not found on PATH")]
    NotFound(#[source] io::Error),
    #[error("dmesg is not executable: {0}")]
    NotExecutable(#[source] io::Error),
    #[error("cannot run dmesg: {0}")]
    Spawn(#[source] io::Error),
    #[error("dmesg timed out after {} s", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("waiting for dmesg failed: {0}")]
    Wait(#[source] io::Error),
    /// `kernel.dmesg_restrict`; `detail` is the first line dmesg printed to stderr.
    #[error("permission denied reading the kernel log (kernel.dmesg_restrict=1 without CAP_SYSLOG?): {detail}")]
    PermissionDenied { detail: String },
    #[error("dmesg does not support --since (busybox?): {detail}")]
    NoSince { detail: String },
    /// `code` is `None` when a signal ended it.
    #[error("dmesg exited with {}: {detail}", match code { Some(c) => format!("status {c}"), None => "a signal".to_string() })]
    Failed { code: Option<i32>, detail: String },
}

/// Reads a pipe to its end keeping at most the last `cap` bytes (bounded memory for a huge
/// ring buffer).
fn read_tail(mut r: impl Read, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() > 2 * cap {
                    out.drain(..out.len() - cap);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if out.len() > cap {
        out.drain(..out.len() - cap);
    }
    out
}

/// `program` with `pre_args` before dmesg's own (tests run a fake through `/bin/sh`, which
/// avoids ETXTBSY from executing a freshly written script while other threads fork).
pub(crate) fn collect_with(
    program: &OsStr,
    pre_args: &[&OsStr],
    since_secs: u64,
    timeout: Duration,
) -> Result<String, DmesgError> {
    let mut child = Command::new(program)
        .args(pre_args)
        .args(["--since", &format!("{since_secs} seconds ago")])
        .env("LC_ALL", "C") // English messages, so the reasons below can be recognised
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DmesgError::NotFound(e),
            io::ErrorKind::PermissionDenied => DmesgError::NotExecutable(e),
            _ => DmesgError::Spawn(e),
        })?;
    // Readers on threads, so a full pipe never blocks the child while we wait on it.
    let stdout = child
        .stdout
        .take()
        .map(|p| thread::spawn(move || read_tail(p, MAX_DMESG_BYTES)));
    let stderr = child
        .stderr
        .take()
        .map(|p| thread::spawn(move || read_tail(p, 4096)));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                // Reader threads are left to finish on their own: a grandchild may still
                // hold the pipes open.
                return Err(DmesgError::Timeout(timeout));
            }
            Ok(None) => thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(DmesgError::Wait(e)),
        }
    };
    let out = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if status.success() {
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    let err = String::from_utf8_lossy(&err);
    let detail = err
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    let lower = err.to_ascii_lowercase();
    Err(
        if lower.contains("operation not permitted") || lower.contains("permission denied") {
            DmesgError::PermissionDenied { detail }
        } else if lower.contains("unrecognized option")
            || lower.contains("invalid option")
            || lower.contains("unknown option")
        {
            DmesgError::NoSince { detail }
        } else {
            DmesgError::Failed {
                code: status.code(),
                detail,
            }
        },
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn script(dir: &tempfile::TempDir, body: &str) -> std::path::PathBuf {
        let path = dir.path().join("fake-dmesg");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        path
    }

    fn run(p: &std::path::Path, timeout: Duration) -> Result<String, DmesgError> {
        collect_with(OsStr::new("/bin/sh"), &[p.as_os_str()], 42, timeout)
    }

    #[test]
    fn success_returns_stdout_and_passes_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(&dir, r#"echo "args: $*""#);
        let out = run(&p, DMESG_TIMEOUT).unwrap();
        assert_eq!(out, "args: --since 42 seconds ago\n");
    }

    #[test]
    fn missing_binary() {
        let e = collect_with(
            OsStr::new("/nonexistent/aorta-dmesg"),
            &[],
            5,
            DMESG_TIMEOUT,
        )
        .unwrap_err();
        assert!(matches!(e, DmesgError::NotFound(_)), "{e}");
        assert!(e.to_string().contains("not found"), "{e}");
    }

    #[test]
    fn permission_denied() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            &dir,
            "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1",
        );
        let e = run(&p, DMESG_TIMEOUT).unwrap_err();
        assert!(matches!(e, DmesgError::PermissionDenied { .. }), "{e}");
        assert!(e.to_string().starts_with("permission denied"), "{e}");
    }

    #[test]
    fn other_failures_and_busybox() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(&dir, "echo 'dmesg: unrecognized option: since' >&2; exit 1");
        assert!(run(&p, DMESG_TIMEOUT)
            .unwrap_err()
            .to_string()
            .contains("busybox"));
        let dir2 = tempfile::tempdir().unwrap();
        let p = script(&dir2, "echo boom >&2; exit 3");
        assert_eq!(
            run(&p, DMESG_TIMEOUT).unwrap_err().to_string(),
            "dmesg exited with status 3: boom"
        );
    }

    #[test]
    fn timeout_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(&dir, "exec sleep 30");
        let t = Instant::now();
        let e = run(&p, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, DmesgError::Timeout(_)), "{e}");
        assert!(e.to_string().contains("timed out"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn read_tail_keeps_the_end() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(read_tail(&data[..], 1000), &data[data.len() - 1000..]);
    }
}
