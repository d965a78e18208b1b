//! The kernel log for Tier 3 without a `dmesg` process per trial.
//!
//! `/dev/kmsg` is opened once per build, positioned at its end; each read returns one record
//! (`prio,seq,usec,flags;message`). A trial takes a [`Mark`] (the last sequence number seen)
//! before it starts and asks for everything after it when it ends: exactly the messages logged
//! while it ran (and while its neighbours ran, as with AORTA's `dmesg --since`), for a few
//! non-blocking reads instead of a fork and exec of `dmesg` (about 10 ms per trial). Where
//! `/dev/kmsg` cannot be opened (no `CAP_SYSLOG` under `dmesg_restrict`, containers) the caller
//! falls back to [`crate::collect_dmesg`].

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::tier3::MAX_DMESG_BYTES;

/// The sequence number a trial's messages come after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(u64);

/// A shared, non-blocking reader of the kernel log.
#[derive(Debug)]
pub struct KernelLog {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    /// Recent records (seq, dmesg-style line), bounded by [`MAX_DMESG_BYTES`] in total.
    records: VecDeque<(u64, String)>,
    bytes: usize,
    last_seq: u64,
}

/// One record: `prio,seq,usec,flags[,...];message` then optional ` KEY=value` lines.
fn parse_record(raw: &[u8]) -> Option<(u64, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once(';')?;
    let mut fields = head.split(',');
    let _prio = fields.next()?;
    let seq: u64 = fields.next()?.parse().ok()?;
    let usec: u64 = fields.next()?.parse().ok()?;
    let message = rest.lines().next().unwrap_or("");
    Some((
        seq,
        format!(
            "[{:5}.{:06}] {}",
            usec / 1_000_000,
            usec % 1_000_000,
            unescape(message)
        ),
    ))
}

/// kmsg escapes non-printable bytes as `\xNN`; dmesg shows them decoded.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("\\x") {
        out.push_str(&rest[..i]);
        let hex = rest
            .get(i + 2..i + 4)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) if b.is_ascii() => {
                out.push(b as char);
                rest = &rest[i + 4..];
            }
            _ => {
                out.push_str("\\x");
                rest = &rest[i + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Why `/dev/kmsg` cannot be followed (the caller then falls back to `dmesg`).
#[derive(Debug, thiserror::Error)]
pub enum KmsgError {
    #[error("cannot read {} (kernel.dmesg_restrict=1 without CAP_SYSLOG?): {source}", path.display())]
    Restricted {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot seek {}: {source}", path.display())]
    Seek {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl KernelLog {
    /// Opens `/dev/kmsg` at its end. The error is a one-line reason (permission, absence).
    pub fn open() -> Result<KernelLog, KmsgError> {
        Self::open_path(Path::new("/dev/kmsg"))
    }

    /// Every record still in the kernel's ring buffer (since boot, unless it wrapped), as
    /// dmesg prints them, at most the last [`MAX_DMESG_BYTES`]: what `aorta doctor` scans.
    /// `/dev/kmsg` must be read one whole record per `read`, which this does (`head` on it
    /// fails with EINVAL).
    pub fn read_all() -> Result<String, KmsgError> {
        Self::read_all_path(Path::new("/dev/kmsg"))
    }

    pub fn read_all_path(path: &Path) -> Result<String, KmsgError> {
        let mut state = State {
            file: Self::open_file(path)?,
            records: VecDeque::new(),
            bytes: 0,
            last_seq: 0,
        };
        state.drain();
        let mut out = String::with_capacity(state.bytes);
        for (_, line) in &state.records {
            out.push_str(line);
            out.push('\n');
        }
        Ok(out)
    }

    fn open_file(path: &Path) -> Result<File, KmsgError> {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::PermissionDenied => KmsgError::Restricted {
                    path: path.to_path_buf(),
                    source,
                },
                _ => KmsgError::Open {
                    path: path.to_path_buf(),
                    source,
                },
            })
    }

    pub(crate) fn open_path(path: &Path) -> Result<KernelLog, KmsgError> {
        let file = Self::open_file(path)?;
        // SAFETY: lseek on an fd we own; SEEK_END on /dev/kmsg moves past every existing record.
        if unsafe { libc::lseek(std::os::fd::AsRawFd::as_raw_fd(&file), 0, libc::SEEK_END) } < 0 {
            return Err(KmsgError::Seek {
                path: path.to_path_buf(),
                source: std::io::Error::last_os_error(),
            });
        }
        let log = KernelLog {
            state: Mutex::new(State {
                file,
                records: VecDeque::new(),
                bytes: 0,
                last_seq: 0,
            }),
        };
        log.lock().drain();
        Ok(log)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Call before a trial starts.
    pub fn mark(&self) -> Mark {
        let mut s = self.lock();
        s.drain();
        Mark(s.last_seq)
    }

    /// Every message logged after `mark`, as dmesg prints them (`[secs.usecs] text`), at most
    /// the last [`MAX_DMESG_BYTES`].
    pub fn since(&self, mark: Mark) -> String {
        let mut s = self.lock();
        s.drain();
        let mut out = String::new();
        for (seq, line) in &s.records {
            if *seq > mark.0 {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl State {
    /// Reads every pending record without blocking.
    fn drain(&mut self) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Some((seq, line)) = parse_record(&buf[..n]) {
                        self.last_seq = self.last_seq.max(seq);
                        self.bytes += line.len() + 1;
                        self.records.push_back((seq, line));
                        while self.bytes > MAX_DMESG_BYTES {
                            match self.records.pop_front() {
                                Some((_, l)) => self.bytes -= l.len() + 1,
                                None => break,
                            }
                        }
                    }
                }
                // EPIPE: records were overwritten before we read them; the next read continues.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break, // EAGAIN: nothing more for now
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records_like_dmesg_prints_them() {
        let (seq, line) = parse_record(
            b"3,1234,5678901,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1\n SUBSYSTEM=pci\n",
        )
        .unwrap();
        assert_eq!(seq, 1234);
        assert_eq!(line, "[    5.678901] NVRM: Xid (PCI:0000:18:00): 79, pid=1");
        assert_eq!(
            parse_record(b"6,7,1,-;tab\\x09here").unwrap().1,
            "[    0.000001] tab\there"
        );
        assert!(parse_record(b"garbage").is_none());
        assert!(parse_record(b"1,x,2,-;m").is_none());
    }

    #[test]
    fn a_missing_device_is_a_reason() {
        let e = KernelLog::open_path(Path::new("/nonexistent/kmsg")).unwrap_err();
        assert!(
            matches!(&e, KmsgError::Open { path, .. } if path == Path::new("/nonexistent/kmsg"))
        );
        assert!(e.to_string().contains("/nonexistent/kmsg"), "{e}");
    }

    /// Real kernel log: a message written to /dev/kmsg after a mark is seen, one before is not.
    /// Needs write access to /dev/kmsg (root); says so and returns where it has none.
    #[test]
    fn sees_exactly_the_messages_after_its_mark() {
        let log = match KernelLog::open() {
            Ok(l) => l,
            Err(e) => return eprintln!("skipped: {e}"),
        };
        let Ok(mut w) = std::fs::OpenOptions::new().write(true).open("/dev/kmsg") else {
            return eprintln!("skipped: /dev/kmsg not writable");
        };
        let tag = format!("aorta-kmsg-test-{}", std::process::id());
        use std::io::Write;
        w.write_all(format!("{tag} before\n").as_bytes()).unwrap();
        let mark = log.mark();
        w.write_all(format!("{tag} after\n").as_bytes()).unwrap();
        let text = log.since(mark);
        assert!(text.contains(&format!("{tag} after")), "{text}");
        assert!(!text.contains(&format!("{tag} before")), "{text}");
        assert!(!log.since(log.mark()).contains(&tag));
    }
}
