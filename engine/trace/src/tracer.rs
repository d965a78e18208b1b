//! The tracer loop: one `waitpid(-1, __WALL)` per stop of any tracee; records paths at
//! seccomp stops and exec events, passes signals through, and returns when the main child
//! ends (the caller then exits, and `PTRACE_O_EXITKILL` ends any remaining tracee).

use crate::filter::{self, Call};
use crate::memory;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

pub(crate) const READ: u8 = 1;
pub(crate) const WRITE: u8 = 2;
pub(crate) const EXEC: u8 = 4;

/// `struct ptrace_syscall_info` (<linux/ptrace.h>) with the `seccomp` union member; our own
/// plain-integer copy so it can be zero-initialised without unsafe.
#[repr(C)]
#[derive(Default)]
struct SyscallInfo {
    op: u8,
    pad: [u8; 3],
    arch: u32,
    instruction_pointer: u64,
    stack_pointer: u64,
    nr: u64,
    args: [u64; 6],
    ret_data: u32,
    pad2: u32,
}

/// Every path seen, with the union of its access kinds.
#[derive(Default)]
pub(crate) struct Recorder {
    pub files: HashMap<PathBuf, u8>,
    /// Set when a stop could not be decoded: the trace is then not complete.
    pub broken: Option<String>,
}

impl Recorder {
    pub(crate) fn add(&mut self, path: PathBuf, kind: u8) {
        *self.files.entry(path).or_insert(0) |= kind;
    }
}

/// # Safety
/// `data` must be an integer, or point at a buffer of the size the request writes (`addr`
/// bytes for `PTRACE_GET_SYSCALL_INFO`).
unsafe fn ptrace(req: libc::c_uint, pid: libc::pid_t, addr: usize, data: usize) -> io::Result<i64> {
    // SAFETY: forwarded to the caller's contract.
    let r = unsafe { libc::ptrace(req, pid, addr, data) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as i64)
    }
}

fn cont(pid: libc::pid_t, sig: libc::c_int) {
    // A tracee killed meanwhile (ESRCH) reports its death at the next waitpid.
    // SAFETY: CONT takes the signal number as an integer.
    let _ = unsafe { ptrace(libc::PTRACE_CONT, pid, 0, sig as usize) };
}

/// Runs until `main` exits or is killed; returns its raw wait status.
pub(crate) fn trace(main: libc::pid_t, rec: &mut Recorder) -> libc::c_int {
    // Tracees whose initial attach-SIGSTOP has been consumed. A new child's SIGSTOP may
    // arrive before or after its parent's fork event: the first SIGSTOP of an unknown pid is
    // that stop, whichever order they come in.
    let mut live: HashSet<libc::pid_t> = HashSet::from([main]);
    loop {
        let mut st = 0;
        // SAFETY: valid status pointer; __WALL also reports cloned threads.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::__WALL) };
        if pid < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // ECHILD cannot happen while `main` is unreaped; do not spin if it does.
            rec.broken.get_or_insert(format!("waitpid: {e}"));
            return 1 << 8;
        }
        if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            if pid == main {
                return st;
            }
            live.remove(&pid);
            continue;
        }
        if !libc::WIFSTOPPED(st) {
            continue;
        }
        let sig = libc::WSTOPSIG(st);
        match st >> 16 {
            0 => on_signal(pid, sig, &mut live),
            libc::PTRACE_EVENT_SECCOMP => {
                on_seccomp(pid, rec);
                cont(pid, 0);
            }
            libc::PTRACE_EVENT_EXEC => {
                on_exec(pid, rec, &mut live);
                cont(pid, 0);
            }
            // Fork, vfork, clone: the new tracee is attached by the options.
            _ => cont(pid, 0),
        }
    }
}

/// Signal-delivery stop: re-inject. Group-stop (GETSIGINFO fails with EINVAL under
/// TRACEME-style attach): leave it stopped, so an external SIGSTOP really freezes the tree.
fn on_signal(pid: libc::pid_t, sig: libc::c_int, live: &mut HashSet<libc::pid_t>) {
    if sig == libc::SIGSTOP && live.insert(pid) {
        return cont(pid, 0);
    }
    if matches!(
        sig,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    ) {
        let mut si = std::mem::MaybeUninit::<libc::siginfo_t>::uninit();
        // SAFETY: GETSIGINFO writes one siginfo_t into `si`.
        let r = unsafe { ptrace(libc::PTRACE_GETSIGINFO, pid, 0, si.as_mut_ptr() as usize) };
        if matches!(r, Err(ref e) if e.raw_os_error() == Some(libc::EINVAL)) {
            return;
        }
    }
    cont(pid, sig)
}

/// After a successful exec: the image the kernel loaded (`/proc/PID/exe`: for a script, its
/// interpreter, which no system call of the tracee names) is recorded as executed.
fn on_exec(pid: libc::pid_t, rec: &mut Recorder, live: &mut HashSet<libc::pid_t>) {
    let mut former: libc::c_ulong = 0;
    let msg = &mut former as *mut libc::c_ulong as usize;
    // A non-leader thread that execs takes the leader's pid; forget its old tid.
    // SAFETY: GETEVENTMSG writes one unsigned long into `former`.
    let got = unsafe { ptrace(libc::PTRACE_GETEVENTMSG, pid, 0, msg) };
    if got.is_ok() && former as libc::pid_t != pid {
        live.remove(&(former as libc::pid_t));
    }
    if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
        rec.add(exe, EXEC);
    }
}

/// Access kind from `open` flags: writes if it may write or create or truncate.
pub(crate) fn open_kind(flags: u64) -> u8 {
    let flags = flags as libc::c_int;
    let acc = flags & libc::O_ACCMODE;
    let writes = acc == libc::O_WRONLY || acc == libc::O_RDWR;
    if writes || flags & (libc::O_CREAT | libc::O_TRUNC) != 0 {
        WRITE
    } else {
        READ
    }
}

fn on_seccomp(pid: libc::pid_t, rec: &mut Recorder) {
    let mut info = SyscallInfo::default();
    let size = std::mem::size_of::<SyscallInfo>();
    let buf = &mut info as *mut SyscallInfo as usize;
    // SAFETY: the kernel writes at most `size` bytes, the size of `info`.
    let got = unsafe { ptrace(libc::PTRACE_GET_SYSCALL_INFO, pid, size, buf) };
    match got {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
        Err(e) => {
            rec.broken
                .get_or_insert(format!("PTRACE_GET_SYSCALL_INFO failed: {e}"));
            return;
        }
        Ok(_) if info.op != libc::PTRACE_SYSCALL_INFO_SECCOMP => return,
        Ok(_) => {}
    }
    let Some(call) = filter::decode(info.arch, info.nr) else {
        return; // Another filter's RET_TRACE: not a call we record.
    };
    if let Some((path, kind)) = accessed(pid, call, &info.args) {
        rec.add(path, kind);
    }
}

/// The path a trapped call of `pid` names (absolute), and how it accesses it; `None` when
/// the call names no file the kernel could use either.
pub(crate) fn accessed(pid: libc::pid_t, call: Call, a: &[u64; 6]) -> Option<(PathBuf, u8)> {
    let (dirfd, ptr, kind) = match call {
        Call::Open => (libc::AT_FDCWD, a[0], open_kind(a[1])),
        Call::OpenAt => (a[0] as i32, a[1], open_kind(a[2])),
        // A bad `open_how` pointer fails the call (EFAULT): recording a read is harmless.
        Call::OpenAt2 => (
            a[0] as i32,
            a[1],
            open_kind(memory::read_u64(pid, a[2]).unwrap_or(0)),
        ),
        Call::Creat => (libc::AT_FDCWD, a[0], WRITE),
        Call::Execve => (libc::AT_FDCWD, a[0], EXEC),
        Call::ExecveAt => (a[0] as i32, a[1], EXEC),
    };
    // Unreadable: the kernel fails the call with EFAULT too.
    let raw = memory::read_path(pid, ptr)?;
    let empty_path = a[4] as i32 & libc::AT_EMPTY_PATH != 0;
    let path = if raw.first() == Some(&b'/') {
        normalize(Path::new("/"), &raw)
    } else if raw.is_empty() {
        // Only execveat(fd, "", AT_EMPTY_PATH) names a file with an empty path.
        if call != Call::ExecveAt || !empty_path {
            return None;
        }
        std::fs::read_link(format!("/proc/{pid}/fd/{dirfd}")).ok()?
    } else {
        let base = if dirfd == libc::AT_FDCWD {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
        } else {
            std::fs::read_link(format!("/proc/{pid}/fd/{dirfd}"))
        };
        normalize(&base.ok()?, &raw)
    };
    Some((path, kind))
}

/// `base` joined with `rel`, dropping `.` components and repeated slashes. `..` is kept:
/// resolving it lexically is wrong across symlinks, and stat-ing here would cost a syscall.
pub(crate) fn normalize(base: &Path, rel: &[u8]) -> PathBuf {
    let mut out = base.to_path_buf();
    for c in Path::new(OsStr::from_bytes(rel)).components() {
        match c {
            Component::CurDir => {}
            Component::RootDir => out = PathBuf::from("/"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_classify_as_read_or_write() {
        let f = |x: libc::c_int| open_kind(x as u64);
        assert_eq!(f(libc::O_RDONLY | libc::O_CLOEXEC), READ);
        assert_eq!(f(libc::O_RDONLY | libc::O_DIRECTORY), READ);
        assert_eq!(f(libc::O_WRONLY), WRITE);
        assert_eq!(f(libc::O_RDWR), WRITE);
        assert_eq!(f(libc::O_RDONLY | libc::O_CREAT), WRITE);
        assert_eq!(f(libc::O_RDONLY | libc::O_TRUNC), WRITE);
        // openat2's u64 flags: high bits must not matter.
        assert_eq!(open_kind(1 << 40), READ);
        assert_eq!(std::mem::size_of::<SyscallInfo>(), 88);
    }

    #[test]
    fn joins_drop_dots_and_keep_dotdot() {
        let n = |b: &str, r: &str| normalize(Path::new(b), r.as_bytes());
        assert_eq!(n("/w", "a/./b//c"), Path::new("/w/a/b/c"));
        assert_eq!(n("/w", "./x"), Path::new("/w/x"));
        assert_eq!(n("/w", "../x"), Path::new("/w/../x"));
        assert_eq!(n("/", "/usr//lib/./x"), Path::new("/usr/lib/x"));
        assert_eq!(n("/w", "d/"), Path::new("/w/d"));
    }
}
