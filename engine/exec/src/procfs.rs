//! The little of `/proc` that teardown and the hang monitor read.
//!
//! Descendants are found from a scan of every `/proc/<pid>/stat` (ppid, session, start time),
//! not from `/proc/<pid>/task/*/children`: that file needs `CONFIG_PROC_CHILDREN`, which some
//! kernels (Firecracker guests among them) lack. One scan is shared by every trial that asks
//! within [`SHARED_SCAN_AGE`], so N concurrent trials cost one scan, not N.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How old a shared scan may be and still be reused by a periodic refresh.
pub(crate) const SHARED_SCAN_AGE: Duration = Duration::from_millis(40);

/// The fields of `/proc/<pid>/stat` aorta uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub pid: i32,
    pub state: u8,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Field 22: start time after boot, clock ticks. With the pid, a process's identity.
    pub start_time: u64,
    /// Resident set, pages.
    pub rss_pages: u64,
}

impl Stat {
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses one `/proc/<pid>/stat` line. `comm` may hold spaces and parentheses, so the fixed
/// fields start after the *last* `)`.
pub(crate) fn parse_stat(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid: i32 = line[..open].trim().parse().ok()?;
    let rest: Vec<&str> = line.get(close + 1..)?.split_ascii_whitespace().collect();
    // rest[0] is field 3 (state); field n is rest[n - 3].
    let field = |n: usize| rest.get(n - 3).copied();
    let num = |n: usize| field(n).and_then(|s| s.parse::<i64>().ok());
    Some(Stat {
        pid,
        state: *field(3)?.as_bytes().first()?,
        ppid: num(4)? as i32,
        pgrp: num(5)? as i32,
        session: num(6)? as i32,
        cpu_ticks: (num(14)?.max(0) + num(15)?.max(0)) as u64,
        start_time: num(22)?.max(0) as u64,
        rss_pages: num(24)?.max(0) as u64,
    })
}

pub(crate) fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&read_small(&format!("/proc/{pid}/stat")).ok()?)
}

/// A `/proc` file read with one buffer: they report size 0, so `read_to_string` starts small
/// and grows, five reads for a `stat` line where one does (most of a short trial's reads).
fn read_small(path: &str) -> io::Result<String> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    let mut buf = Vec::with_capacity(2048);
    loop {
        let len = buf.len();
        buf.resize(len + 2048, 0);
        match f.read(&mut buf[len..]) {
            Ok(0) => {
                buf.truncate(len);
                break;
            }
            Ok(n) => buf.truncate(len + n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(len),
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Up to this many candidate pids [`Snapshot::take_since`] reads one by one; with more, one
/// listing of `/proc` costs less.
const DIRECT_READS: i32 = 64;

/// Whether `pid` is a process rather than another thread of one: `/proc/<tid>` of a thread
/// that is not its group's leader can be read but is not listed, and its `Tgid` differs.
fn is_thread_group_leader(pid: i32) -> bool {
    read_small(&format!("/proc/{pid}/status")).is_ok_and(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse::<i32>().ok())
            == Some(pid)
    })
}

/// Every process on the host at one moment, with the parent → children index.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub by_pid: HashMap<i32, Stat>,
    pub children: HashMap<i32, Vec<i32>>,
}

impl Snapshot {
    pub fn take() -> Snapshot {
        Self::take_filtered(|_| true)
    }

    /// Every process created since `first` started, judged by pid: pids are handed out in
    /// increasing order, so a process younger than `first` has a pid in `first ..=
    /// ns_last_pid` unless the counter wrapped. Reads a handful of `stat` files instead of
    /// all of them. `None` when it cannot tell (no `ns_last_pid`, or the counter wrapped):
    /// the caller then takes a full scan.
    pub fn take_since(first: i32) -> Option<Snapshot> {
        let last = last_pid()?;
        if last < first {
            return None;
        }
        if last - first >= DIRECT_READS {
            return Some(Self::take_filtered(|pid| (first..=last).contains(&pid)));
        }
        // Few candidates (a short trial on a quiet host: often the root alone): read them one
        // by one instead of listing all of /proc, the largest part of a short trial's cost.
        let mut snap = Snapshot::default();
        for pid in first..=last {
            // A listing shows processes only; a direct read also finds a thread's id.
            if let Some(st) = read_stat(pid).filter(|_| pid == first || is_thread_group_leader(pid))
            {
                snap.children.entry(st.ppid).or_default().push(pid);
                snap.by_pid.insert(pid, st);
            }
        }
        Some(snap)
    }

    fn take_filtered(keep: impl Fn(i32) -> bool) -> Snapshot {
        let mut snap = Snapshot::default();
        let Ok(dir) = fs::read_dir("/proc") else {
            return snap;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
                .filter(|&p| keep(p))
            else {
                continue;
            };
            // A process that exits between readdir and read is simply not in the snapshot.
            if let Some(st) = read_stat(pid) {
                snap.children.entry(st.ppid).or_default().push(pid);
                snap.by_pid.insert(pid, st);
            }
        }
        snap
    }

    /// The process `pid` if it is still the one that started at `start_time`.
    pub fn get(&self, pid: i32, start_time: u64) -> Option<&Stat> {
        self.by_pid.get(&pid).filter(|s| s.start_time == start_time)
    }
}

/// A scan no older than `max_age` (a fresh one with `Duration::ZERO`), shared between trials.
pub(crate) fn snapshot(max_age: Duration) -> Arc<Snapshot> {
    type Cached = Option<(Instant, Arc<Snapshot>)>;
    static CACHE: OnceLock<Mutex<Cached>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(None));
    let mut guard = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, snap)) = guard.as_ref() {
        if !max_age.is_zero() && at.elapsed() <= max_age {
            return Arc::clone(snap);
        }
    }
    let snap = Arc::new(Snapshot::take());
    *guard = Some((Instant::now(), Arc::clone(&snap)));
    snap
}

/// Why `/proc/<pid>/io` gave no number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IoUnread {
    /// The process is gone: it simply drops out of the sample.
    Gone,
    /// Permission denied (a setuid wrapper such as sudo) or unparseable: the sample is unknown.
    Denied,
}

/// `rchar + wchar` of one process.
pub(crate) fn read_io_chars(pid: i32) -> Result<u64, IoUnread> {
    let text = match read_small(&format!("/proc/{pid}/io")) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            return Err(IoUnread::Gone)
        }
        Err(_) => return Err(IoUnread::Denied),
    };
    parse_io_chars(&text).ok_or(IoUnread::Denied)
}

pub(crate) fn parse_io_chars(text: &str) -> Option<u64> {
    let mut rchar = None;
    let mut wchar = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("rchar:") {
            rchar = v.trim().parse::<u64>().ok();
        } else if let Some(v) = line.strip_prefix("wchar:") {
            wchar = v.trim().parse::<u64>().ok();
        }
    }
    Some(rchar?.saturating_add(wchar?))
}

/// Whether the initial environment of `pid` holds exactly the entry `entry` (`KEY=value`).
pub(crate) fn environ_has(pid: i32, entry: &str) -> bool {
    match fs::read(format!("/proc/{pid}/environ")) {
        Ok(bytes) => bytes.split(|b| *b == 0).any(|e| e == entry.as_bytes()),
        Err(_) => false,
    }
}

/// The last pid handed out in this pid namespace (`ns_last_pid`), read through a descriptor
/// kept open: one `pread` per trial instead of an open, two reads and a close.
pub(crate) fn last_pid() -> Option<i32> {
    use std::os::unix::fs::FileExt;
    static FILE: OnceLock<Option<fs::File>> = OnceLock::new();
    let file = FILE
        .get_or_init(|| fs::File::open("/proc/sys/kernel/ns_last_pid").ok())
        .as_ref()?;
    let mut buf = [0u8; 24];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

/// `/proc/sys/kernel/pid_max`: how many pids are handed out before the counter wraps.
pub(crate) fn pid_max() -> Option<u64> {
    static MAX: OnceLock<Option<u64>> = OnceLock::new();
    *MAX.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

pub(crate) fn clock_ticks_per_sec() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if v > 0 {
            v as u64
        } else {
            100
        }
    })
}

pub(crate) fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v > 0 {
            v as u64
        } else {
            4096
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_hostile_comm() {
        let line = "4242 (a) b (c) d) S 1 4242 4242 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 1 0 123456 1000 55 18446744073709551615";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.pid, 4242);
        assert_eq!(st.state, b'S');
        assert_eq!((st.ppid, st.pgrp, st.session), (1, 4242, 4242));
        assert_eq!(st.cpu_ticks, 10);
        assert_eq!(st.start_time, 123456);
        assert_eq!(st.rss_pages, 55);
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("12 (x) S 1").is_none());
    }

    #[test]
    fn reads_own_stat_and_io() {
        let me = std::process::id() as i32;
        let st = read_stat(me).unwrap();
        assert_eq!(st.pid, me);
        assert!(read_io_chars(me).is_ok());
        assert_eq!(parse_io_chars("rchar: 5\nwchar: 7\nsyscr: 1\n"), Some(12));
        assert_eq!(parse_io_chars("rchar: 5\n"), None);
        let snap = snapshot(Duration::ZERO);
        assert!(snap.get(me, st.start_time).is_some());
    }

    #[test]
    fn scan_since_a_pid_finds_younger_processes_only() {
        let older = std::process::id() as i32;
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // A thread of ours started after the child takes a pid in the range, and is no process.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        if let Some(snap) = Snapshot::take_since(pid) {
            assert!(snap.by_pid.contains_key(&pid));
            assert!(!snap.by_pid.contains_key(&older) || older >= pid);
            assert!(!snap.by_pid.contains_key(&tid), "a thread is not a process");
        }
        assert!(is_thread_group_leader(pid) && is_thread_group_leader(older));
        assert!(!is_thread_group_leader(tid));
        drop(tx);
        t.join().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
