//! Starting the command: fork, `PTRACE_TRACEME`, a stop for the tracer to set its options,
//! the seccomp filter, exec — and, whenever a step fails, the command runs anyway, untraced.
//!
//! The child reports each step on a CLOEXEC status pipe as fixed 8-byte records
//! (`step: u32, errno: i32`); EOF means it reached `exec`. It writes [`STEP_STOPPING`] *before*
//! `raise(SIGSTOP)`, so the parent reads the pipe first and waits for a stop only when one
//! is coming: a child whose `TRACEME` was refused (Yama, a container's seccomp profile, or
//! already being traced — aorta-trace under aorta-trace, strace or gdb) never stops and the
//! parent never hangs. After the stop the child blocks on a second pipe until the parent says
//! whether the options are set: a `SECCOMP_RET_TRACE` filter without a tracer that asked for
//! `PTRACE_O_TRACESECCOMP` would make every `open` fail with ENOSYS, so the filter is
//! installed only on [`GO_TRACE`].

use crate::filter;
use crate::TraceError;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

pub(crate) const STEP_STOPPING: u32 = 1;
pub(crate) const STEP_TRACEME: u32 = 2;
pub(crate) const STEP_EXEC: u32 = 5;
const GO_TRACE: u8 = b'T';
const GO_UNTRACED: u8 = b'U';

/// The signals the tracer ignores (the engine signals the whole tree; tracees handle them).
pub(crate) const FORWARDED: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// A started command.
pub(crate) struct Child {
    pub pid: libc::pid_t,
    /// Read end of the status pipe (later records: filter or exec failures).
    pub status: File,
    /// Whether this process is its tracer; `Err` says why not.
    pub traced: Result<(), Untraced>,
    /// Set when the child ended before tracing started (raw wait status).
    pub ended: Option<libc::c_int>,
}

/// Why a command runs untraced. `Display` is the trace's reason (written to the trace file);
/// the errno is kept as a number so the reason stays `Clone`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Untraced {
    #[error("the command ended before tracing started")]
    EndedEarly,
    #[error("ptrace(PTRACE_TRACEME) failed: {}", errno_text(*.0))]
    TraceMe(i32),
    #[error("waitpid: {}", errno_text(*.0))]
    Wait(i32),
    #[error("PTRACE_SETOPTIONS failed: {}", errno_text(*.0))]
    SetOptions(i32),
    #[error("the command ended or exec'd before handing over the seccomp listener")]
    NoListener,
    #[error("prctl(PR_SET_NO_NEW_PRIVS) failed: {}", errno_text(*.0))]
    NoNewPrivs(i32),
    #[error("seccomp filter not installed: {}", errno_text(*.0))]
    Seccomp(i32),
}

fn os_err(what: &'static str) -> TraceError {
    TraceError::Os {
        what,
        source: io::Error::last_os_error(),
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), TraceError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("pipe2"));
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the zeroed set; sigaddset takes valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        set
    }
}

/// One step record, written from the forked child (async-signal-safe: a single `write`).
fn report(fd: libc::c_int, step: u32, errno: i32) {
    let mut rec = [0u8; 8];
    rec[..4].copy_from_slice(&step.to_ne_bytes());
    rec[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: writes 8 bytes from a stack buffer; errors are ignored (the parent sees EOF).
    unsafe { libc::write(fd, rec.as_ptr().cast(), rec.len()) };
}

/// Reads one record; `None` at EOF (exec happened, or the child died) or on error.
pub(crate) fn read_record(f: &mut File) -> Option<(u32, i32)> {
    let mut rec = [0u8; 8];
    f.read_exact(&mut rec).ok()?;
    let step = u32::from_ne_bytes(rec[..4].try_into().ok()?);
    Some((step, i32::from_ne_bytes(rec[4..].try_into().ok()?)))
}

/// Everything the forked child touches, built before `fork` (the child must not allocate).
struct Plan {
    argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    filter: Vec<libc::sock_filter>,
    old_mask: libc::sigset_t,
}

impl Plan {
    /// The argv as C strings and the filter with `action`, built before the fork.
    fn new(argv: &[OsString], action: filter::Action) -> Result<Plan, TraceError> {
        let argv = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(|_| TraceError::NulInArgument(a.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() {
            return Err(TraceError::NoCommand);
        }
        Ok(Plan {
            argv_ptrs: argv
                .iter()
                .map(|a| a.as_ptr())
                .chain([std::ptr::null()])
                .collect(),
            argv,
            filter: filter::program_for(action),
            // SAFETY: an all-zero sigset_t is a valid (empty) set; overwritten by the caller.
            old_mask: unsafe { std::mem::zeroed() },
        })
    }
}

/// Forks; the child runs `child` (async-signal-safe code only; it execs or exits). The forwarded
/// signals are blocked across the fork, so the child keeps the caller's dispositions and gets
/// any that arrive during setup once it unblocks them just before exec; this process then
/// ignores them for good (the engine signals the whole tree).
fn fork_child(plan: &mut Plan, child: impl FnOnce(&Plan)) -> Result<libc::pid_t, TraceError> {
    let block = sigset(&FORWARDED);
    // SAFETY: valid set pointers; only this thread's mask changes.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut plan.old_mask) };
    // SAFETY: the child runs only async-signal-safe code on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child(plan);
        // SAFETY: `child` execs or exits; should it return, the forked child must not go on.
        unsafe { libc::_exit(127) };
    }
    let fork_err = (pid < 0).then(|| os_err("fork"));
    for s in FORWARDED {
        // SAFETY: setting a valid signal's disposition to SIG_IGN.
        unsafe { libc::signal(s, libc::SIG_IGN) };
    }
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &plan.old_mask, std::ptr::null_mut()) };
    match fork_err {
        Some(e) => Err(e),
        None => Ok(pid),
    }
}

/// Forks and starts `argv` (PATH lookup like `execvp`), traced when possible.
pub(crate) fn spawn(argv: &[OsString]) -> Result<Child, TraceError> {
    let mut plan = Plan::new(argv, filter::Action::Trace)?;
    let (status_r, status_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let pid = fork_child(&mut plan, |plan| {
        use std::os::fd::AsRawFd;
        // The parent's ends: were the child to keep its copy of `go_w`, a parent killed
        // before answering would leave the child blocked on its own pipe.
        // SAFETY: closing descriptors of this (child) process that it never uses again.
        unsafe {
            (
                libc::close(status_r.as_raw_fd()),
                libc::close(go_w.as_raw_fd()),
            )
        };
        child_main(plan, status_w.as_raw_fd(), go_r.as_raw_fd())
    })?;
    drop((status_w, go_r));
    let mut status = File::from(status_r);
    let mut go = File::from(go_w);
    let (traced, ended) = match read_record(&mut status) {
        Some((STEP_STOPPING, _)) => initial_stop(pid, &mut go),
        Some((STEP_TRACEME, e)) => (Err(Untraced::TraceMe(e)), None),
        _ => (Err(Untraced::EndedEarly), None),
    };
    Ok(Child {
        pid,
        status,
        traced,
        ended,
    })
}

/// Waits for the child's `raise(SIGSTOP)`, sets the options, tells it to go on. Returns
/// whether it is traced, and its wait status if it ended instead.
fn initial_stop(pid: libc::pid_t, go: &mut File) -> (Result<(), Untraced>, Option<libc::c_int>) {
    use std::io::Write;
    let opts = libc::PTRACE_O_TRACESECCOMP
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_EXITKILL;
    let mut traced = None;
    loop {
        let mut st = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        if unsafe { libc::waitpid(pid, &mut st, libc::__WALL) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return (Err(Untraced::Wait(e.raw_os_error().unwrap_or(0))), None);
        }
        if !libc::WIFSTOPPED(st) {
            return (Err(Untraced::EndedEarly), Some(st));
        }
        let traced = traced.get_or_insert_with(|| {
            // SAFETY: the child is in a ptrace-stop; the options are passed as the data word.
            let r = unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, opts as usize) };
            let res = match r {
                0 => Ok(()),
                _ => Err(Untraced::SetOptions(
                    io::Error::last_os_error().raw_os_error().unwrap_or(0),
                )),
            };
            let _ = go.write_all(&[if res.is_ok() { GO_TRACE } else { GO_UNTRACED }]);
            res
        });
        let sig = libc::WSTOPSIG(st);
        if sig != libc::SIGSTOP {
            // Another signal came first: deliver it and wait on for the SIGSTOP.
            // SAFETY: resuming a stopped tracee with a signal number.
            unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as usize) };
            continue;
        }
        // Our SIGSTOP, suppressed. Without the options the child runs detached and
        // filterless: a stop nobody handles must not block it.
        let req = if traced.is_ok() {
            libc::PTRACE_CONT
        } else {
            libc::PTRACE_DETACH
        };
        // SAFETY: resuming (or detaching) a stopped tracee with no signal.
        unsafe { libc::ptrace(req, pid, 0, 0) };
        return (traced.clone(), None);
    }
}

pub(crate) fn errno_text(e: i32) -> String {
    io::Error::from_raw_os_error(e).to_string()
}

/// The forked child. Only async-signal-safe calls on pre-built data; never returns.
fn child_main(plan: &Plan, status: libc::c_int, go: libc::c_int) -> ! {
    // SAFETY: raw system calls on descriptors and memory prepared before the fork.
    unsafe {
        if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
            report(status, STEP_TRACEME, *libc::__errno_location());
        } else {
            report(status, STEP_STOPPING, 0);
            libc::raise(libc::SIGSTOP);
            let mut b = 0u8;
            while libc::read(go, (&mut b as *mut u8).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            if b == GO_TRACE {
                let prog = libc::sock_fprog {
                    len: plan.filter.len() as u16,
                    filter: plan.filter.as_ptr() as *mut _,
                };
                if let Err((step, e)) = filter::install(&prog) {
                    report(status, step, e);
                }
            }
        }
        // Rust's runtime ignores SIGPIPE; commands expect the default (as std::process does).
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.old_mask, std::ptr::null_mut());
        libc::execvp(plan.argv[0].as_ptr(), plan.argv_ptrs.as_ptr());
        let e = *libc::__errno_location();
        report(status, STEP_EXEC, e);
        libc::_exit(if e == libc::ENOENT { 127 } else { 126 })
    }
}

/// A command started under the user-notification filter ([`spawn_notify`]).
pub(crate) struct NotifyChild {
    pub pid: libc::pid_t,
    /// Read end of the status pipe (filter or exec failures).
    pub status: File,
    /// The filter's listener, or why there is none (the command then runs untraced).
    pub listener: Result<OwnedFd, Untraced>,
}

/// Forks and starts `argv` with a `SECCOMP_RET_USER_NOTIF` filter: the child installs it with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`, hands the listener to this process over a socket
/// (`SCM_RIGHTS`) and execs; its exec is the first call it traps, answered by the supervisor
/// (`notify.rs`) once this process has the listener. No ptrace, no stop: a failed step only
/// means the command runs untraced.
pub(crate) fn spawn_notify(argv: &[OsString]) -> Result<NotifyChild, TraceError> {
    use std::os::fd::AsRawFd;
    let mut plan = Plan::new(argv, filter::Action::Notify)?;
    let (status_r, status_w) = pipe()?;
    let mut socks = [0; 2];
    // SAFETY: `socks` has room for the two descriptors socketpair writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            socks.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(os_err("socketpair"));
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (mine, theirs) = unsafe {
        (
            OwnedFd::from_raw_fd(socks[0]),
            OwnedFd::from_raw_fd(socks[1]),
        )
    };
    let pid = fork_child(&mut plan, |plan| {
        // SAFETY: closing descriptors of this (child) process that it never uses again.
        unsafe {
            libc::close(status_r.as_raw_fd());
            libc::close(mine.as_raw_fd());
        }
        child_main_notify(plan, status_w.as_raw_fd(), theirs.as_raw_fd())
    })?;
    drop((status_w, theirs));
    let listener = receive_fd(mine.as_raw_fd()).ok_or(Untraced::NoListener);
    Ok(NotifyChild {
        pid,
        status: File::from(status_r),
        listener,
    })
}

/// Room for one `SCM_RIGHTS` descriptor (`CMSG_SPACE(sizeof(int))` is 24 on 64-bit Linux),
/// 8-byte aligned as `cmsghdr` needs.
type CmsgBuf = [u64; 4];

/// The descriptor the child sent, or `None` once the child's end is closed (it exec'd or
/// died without sending one).
fn receive_fd(sock: libc::c_int) -> Option<OwnedFd> {
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    let mut cbuf: CmsgBuf = [0; 4];
    // SAFETY: an all-zero msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of::<CmsgBuf>() as _;
    loop {
        // SAFETY: `msg` points at `iov` and `cbuf`, both alive for the call.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return None;
        }
        break;
    }
    // SAFETY: the kernel filled `msg`'s control buffer; CMSG_* walk it within its length.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
        Some(OwnedFd::from_raw_fd(fd))
    }
}

/// The forked child of [`spawn_notify`]. Only async-signal-safe calls; never returns.
fn child_main_notify(plan: &Plan, status: libc::c_int, sock: libc::c_int) -> ! {
    // SAFETY: raw system calls on descriptors and memory prepared before the fork; the
    // message buffers live on this stack frame.
    unsafe {
        let prog = libc::sock_fprog {
            len: plan.filter.len() as u16,
            filter: plan.filter.as_ptr() as *mut _,
        };
        match filter::install_with(&prog, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER) {
            Err((step, e)) => report(status, step, e),
            Ok(listener) => {
                let mut byte = 0u8;
                let mut iov = libc::iovec {
                    iov_base: (&mut byte as *mut u8).cast(),
                    iov_len: 1,
                };
                let mut cbuf: CmsgBuf = [0; 4];
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                msg.msg_control = cbuf.as_mut_ptr().cast();
                msg.msg_controllen = libc::CMSG_SPACE(4) as _;
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(4) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), listener);
                while libc::sendmsg(sock, &msg, 0) < 0 && *libc::__errno_location() == libc::EINTR {
                }
                libc::close(listener);
            }
        }
        libc::close(sock);
        // Rust's runtime ignores SIGPIPE; commands expect the default (as std::process does).
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.old_mask, std::ptr::null_mut());
        libc::execvp(plan.argv[0].as_ptr(), plan.argv_ptrs.as_ptr());
        let e = *libc::__errno_location();
        report(status, STEP_EXEC, e);
        libc::_exit(if e == libc::ENOENT { 127 } else { 126 })
    }
}
