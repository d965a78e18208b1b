//! The user-notification mechanism (the default where the kernel has it, Linux 5.5+): the
//! filter answers the recorded calls with `SECCOMP_RET_USER_NOTIF`, and a supervisor thread
//! of this process receives each one on the filter's listener, records the path it names and
//! lets the call go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Two system calls per recorded
//! call, and no ptrace: forks and threads are not stopped (they inherit the filter), signals
//! and stops are the kernel's own, and nothing else is kept from attaching (gdb, py-spy).
//!
//! What ptrace learns after an exec (`/proc/PID/exe`) is read from the file instead: the
//! image an `execve` names is recorded as executed, with its resolved path, and for a `#!`
//! script its interpreter (and that one's, up to the kernel's four levels).

use crate::filter;
use crate::tracer::{accessed, Recorder, EXEC};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (<linux/seccomp.h>, not in the libc crate).
const SYNC_WAKE_UP: libc::c_ulong = 1;

/// Whether the kernel offers user notifications with `SECCOMP_USER_NOTIF_FLAG_CONTINUE`
/// (5.5+). A seccomp(2) that is refused (a sandbox's filter) answers no.
pub(crate) fn available() -> bool {
    let action: u32 = libc::SECCOMP_RET_USER_NOTIF;
    let op = libc::SECCOMP_GET_ACTION_AVAIL as libc::c_long;
    // SAFETY: GET_ACTION_AVAIL reads one u32 from a valid pointer.
    let avail = unsafe { libc::syscall(libc::SYS_seccomp, op, 0 as libc::c_long, &action) } == 0;
    avail && kernel_at_least(5, 5)
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// Answers the listener's notifications until the process exits (the caller returns once the
/// main child has ended; the thread dies with the process). A notification that cannot be
/// answered would leave its caller blocked, so errors are recorded and the loop goes on.
pub(crate) fn supervise(listener: OwnedFd, rec: Arc<Mutex<Recorder>>) {
    let fd = listener.as_raw_fd();
    // Linux 6.6+: the caller and this thread hand the CPU to each other instead of each waking
    // the other through the scheduler (several times faster per call). Older kernels say
    // EINVAL and keep the plain wake-ups.
    // SAFETY: SET_FLAGS takes its flags by value.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS, SYNC_WAKE_UP) };
    loop {
        // SAFETY: an all-zero seccomp_notif is what NOTIF_RECV requires as input.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: NOTIF_RECV writes one seccomp_notif into `req`.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // The caller died before we received it, or no process uses the filter any
                // more (then the listener hangs up, and every later RECV would fail at once).
                Some(libc::ENOENT) if hung_up(fd) => return,
                Some(libc::ENOENT) => continue,
                _ => {
                    let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
                    r.broken
                        .get_or_insert(format!("SECCOMP_IOCTL_NOTIF_RECV failed: {e}"));
                    drop(r);
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
            }
        }
        let pid = req.pid as libc::pid_t;
        let seen = filter::decode(req.data.arch, req.data.nr as u64)
            .and_then(|call| accessed(pid, call, &req.data.args));
        if let Some((path, kind)) = seen {
            let images = if kind & EXEC != 0 {
                images(&path)
            } else {
                Vec::new()
            };
            let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
            r.add(path, kind);
            for image in images {
                r.add(image, EXEC);
            }
        }
        let resp = libc::seccomp_notif_resp {
            id: req.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        // SAFETY: NOTIF_SEND reads one seccomp_notif_resp. ENOENT: the caller died meanwhile.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    }
}

/// Whether every process that used the filter has exited (`POLLHUP` on the listener).
fn hung_up(fd: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one valid pollfd without waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & libc::POLLHUP != 0
}

/// What an exec of `path` loads besides `path` as named: its resolved path (what
/// `/proc/PID/exe` shows) and, for a `#!` script, its interpreter's, recursively.
fn images(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut at = path.to_path_buf();
    for _ in 0..4 {
        let Ok(real) = at.canonicalize() else { break };
        let Some(next) = interpreter(&real) else {
            out.push(real);
            break;
        };
        out.push(real);
        out.push(next.clone());
        at = next;
    }
    out
}

/// A `#!` script's interpreter path.
fn interpreter(file: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n').unwrap_or(line.len())];
    let start = line.iter().position(|b| *b != b' ' && *b != b'\t')?;
    let rest = &line[start..];
    let end = rest
        .iter()
        .position(|b| *b == b' ' || *b == b'\t')
        .unwrap_or(rest.len());
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&rest[..end])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_names_its_interpreter() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("s");
        std::fs::write(&s, "#!  /bin/sh -e\necho\n").unwrap();
        assert_eq!(interpreter(&s), Some(PathBuf::from("/bin/sh")));
        std::fs::write(&s, "\x7fELF").unwrap();
        assert_eq!(interpreter(&s), None);
        std::fs::write(&s, "#!/usr/bin/env python3").unwrap();
        assert_eq!(interpreter(&s), Some(PathBuf::from("/usr/bin/env")));
        let sh = Path::new("/bin/sh").canonicalize().unwrap();
        std::fs::write(&s, "#!/bin/sh\n").unwrap();
        let got = images(&s);
        assert_eq!(
            got,
            vec![s.canonicalize().unwrap(), PathBuf::from("/bin/sh"), sh]
        );
    }
}
