//! Records which files a command's whole process tree reads, writes or executes (Linux).
//!
//! `aorta-trace --out TRACE -- PROGRAM [ARGS...]` runs PROGRAM (PATH lookup like `execvp`,
//! inherited environment, cwd and signal dispositions) and writes a [`Trace`] as JSON.
//!
//! # Mechanism
//! A seccomp-bpf filter that catches only `open`, `openat`, `openat2`, `creat`, `execve` and
//! `execveat` (`filter.rs`); every other system call runs at full speed, and children and
//! threads inherit the filter. No `LD_PRELOAD` (static binaries, Python and anything that
//! bypasses libc are covered) and no privileges. Two ways to answer a caught call:
//!
//! - **User notifications** (`notify.rs`; the default on Linux 5.5+): the filter returns
//!   `SECCOMP_RET_USER_NOTIF`; the child hands the filter's listener to this process over a
//!   socket before it execs, and a supervisor thread receives each call, records it and lets it
//!   go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`; with `SYNC_WAKE_UP` on 6.6+). No ptrace: forks
//!   are not stopped, signals and stops are the kernel's own, debuggers attach as usual. About
//!   7.5 µs a caught call on the H100 host against ptrace's 17 µs (docs/benchmarks.md). An exec's
//!   image is read from the file: the named path, its resolved path, and a `#!` script's
//!   interpreter. This process is a subreaper, so strays end up its children and are killed
//!   when the main child is done.
//! - **ptrace** (the fallback, or `AORTA_TRACE_MECHANISM=ptrace`): the child asks to be traced
//!   (`PTRACE_TRACEME`), stops, and once the tracer has set `PTRACE_O_TRACESECCOMP` and the
//!   fork/vfork/clone/exec options it installs a `SECCOMP_RET_TRACE` filter. Children and
//!   threads are attached automatically. After every successful exec the tracer records
//!   `/proc/PID/exe` as executed: for a `#!` script that is its interpreter.
//!
//! Either way the path is read from the caller's memory (`process_vm_readv`) and a relative one
//! resolved against the cwd or dirfd through `/proc/PID/{cwd,fd/N}`.
//!
//! # What is recorded
//! Each path once, absolute, lexically cleaned of `.` and `//` (`..` and symlinks are kept as
//! named: nothing is stat-ed or canonicalised at trace time), with the union of
//! - `exec`: named by `execve`/`execveat`, or the image an exec loaded;
//! - `write`: opened with `O_WRONLY`, `O_RDWR`, `O_CREAT` or `O_TRUNC`, or by `creat`;
//! - `read`: any other open, including `O_PATH` and directories opened for listing.
//!
//! Attempts are recorded whether or not they succeed: the PATH search's misses, a failed open
//! of a missing file. The engine drops paths that do not exist when it reads the trace.
//!
//! # Limits
//! - Only opens and execs: `stat`, `access`, `readlink` and friends are not traced, so a file
//!   only looked at (Python compares a `.py`'s mtime with its cached `.pyc` and then opens only
//!   the `.pyc`) is not recorded. The dynamic loader (`PT_INTERP`), mapped by the kernel, is
//!   not recorded either; the libraries it opens are.
//! - 32-bit arm (on aarch64) and x32 (on x86_64) programs run untraced; i386 ones are traced.
//! - When not root, the filter needs `PR_SET_NO_NEW_PRIVS`: setuid and file-capability
//!   programs run without their extra privileges. (Root, or CAP_SYS_ADMIN, installs the filter
//!   without it.)
//! - ptrace only: a traced tree cannot be traced by anything else at the same time (gdb,
//!   eu-stack, or py-spy without `--nonblocking` fail to attach), and a frozen tree stays
//!   frozen: a group-stop (SIGSTOP, SIGTSTP…) is left stopped, as the engine's
//!   freeze-then-kill needs; with `TRACEME`-style attach a later SIGCONT does not resume a
//!   process in group-stop.
//! - When the main child exits or is killed the trace is written and aorta-trace exits at
//!   once with the same status; stray processes still running (daemonised grandchildren) are
//!   killed (`PTRACE_O_EXITKILL`, or as the subreaper's children), so they cannot outlive the
//!   trace unnoticed.
//!
//! # When tracing is impossible
//! If any step fails — `PTRACE_TRACEME` refused by Yama (scope 2 or 3) or a container's
//! seccomp profile, the process already being traced (under strace -f, gdb, or another
//! aorta-trace), seccomp unavailable, a second listener refused — the command still runs,
//! untraced, its exit status is passed through, and the trace says
//! [`TraceStatus::Unavailable`] with the reason.
//!
//! Under another aorta-trace (checked by a test): with user notifications the inner child's
//! filter with a listener is refused (EBUSY: one listener per filter chain); with ptrace the
//! inner child is auto-attached to the outer tracer, so its `TRACEME` fails with EPERM. Either
//! way the inner reports that and execs without a filter of its own, and writes `unavailable`;
//! the command's calls hit the outer filter, so the outer trace records the inner command's
//! files as its own.
//!
//! A `RET_TRACE` filter whose process has no tracer that asked for `PTRACE_O_TRACESECCOMP`
//! makes the trapped calls fail with ENOSYS. Hence the filter is installed only after the
//! tracer has set its options, tracees are never detached, and the tracer's death takes its
//! tracees with it (`PTRACE_O_EXITKILL`).
//!
//! [`trace_command`] forks, ignores SIGTERM, SIGINT and SIGHUP for good (the engine signals
//! the whole tree; tracees get the signal and handle it themselves — SIGKILL still ends the
//! tracer, and then its tracees) and reaps any child: it is meant for the `aorta-trace`
//! process itself.

mod child;
mod cli;
mod filter;
mod memory;
mod notify;
mod schema;
mod tracer;

pub use cli::main_with;
pub use schema::{read_trace, write_trace, Trace, TraceError, TraceStatus, TracedFile};

use std::ffi::OsString;
use std::io;

/// How the main child ended; [`ExitKind::exit_process`] ends the tracer the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitKind {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ExitKind {
    /// From a raw `waitpid` status.
    pub fn from_wait_status(st: libc::c_int) -> ExitKind {
        if libc::WIFSIGNALED(st) {
            ExitKind::Signal(libc::WTERMSIG(st))
        } else {
            ExitKind::Code(libc::WEXITSTATUS(st))
        }
    }

    /// Exits this process with the same status: `exit(code)`, or dies of the same signal
    /// (default action restored and unblocked; no core dump of the tracer), falling back to
    /// `exit(128 + signal)`.
    pub fn exit_process(self) -> ! {
        match self {
            ExitKind::Code(c) => std::process::exit(c),
            ExitKind::Signal(s) => {
                // SAFETY: plain calls on this process with valid arguments; `set` is a local.
                unsafe {
                    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                    libc::signal(s, libc::SIG_DFL);
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, s);
                    libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                    libc::kill(libc::getpid(), s);
                }
                std::process::exit(128 + s)
            }
        }
    }
}

/// The result of [`trace_command`].
#[derive(Debug)]
pub struct Traced {
    pub trace: Trace,
    pub exit: ExitKind,
    /// The command could not be executed (not found: exit 127, otherwise 126).
    pub exec_error: Option<io::Error>,
}

/// Runs `argv` traced (see the crate docs) until its first process ends. Errors only when
/// the command could not be started at all (bad argument, fork failure).
pub fn trace_command(argv: &[OsString]) -> Result<Traced, TraceError> {
    match Mechanism::chosen() {
        Mechanism::Notify => trace_notified(argv),
        Mechanism::Ptrace => trace_ptraced(argv),
    }
}

/// How the calls are caught: seccomp user notifications where the kernel has them, else
/// ptrace. `AORTA_TRACE_MECHANISM=ptrace|notify` picks one (benchmarks, tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mechanism {
    Notify,
    Ptrace,
}

impl Mechanism {
    fn chosen() -> Mechanism {
        match std::env::var("AORTA_TRACE_MECHANISM").as_deref() {
            Ok("ptrace") => Mechanism::Ptrace,
            Ok("notify") => Mechanism::Notify,
            _ if notify::available() => Mechanism::Notify,
            _ => Mechanism::Ptrace,
        }
    }
}

/// [`trace_command`] with user notifications (`notify.rs`): a supervisor thread answers them
/// while this thread waits for the main child. A subreaper, so that strays (daemonised
/// grandchildren) become this process's and are killed when it is done, as ptrace's
/// `PTRACE_O_EXITKILL` does.
fn trace_notified(argv: &[OsString]) -> Result<Traced, TraceError> {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut child = child::spawn_notify(argv)?;
    let rec = std::sync::Arc::new(std::sync::Mutex::new(tracer::Recorder::default()));
    let mut reason = None;
    match child.listener {
        Ok(listener) => {
            let rec = std::sync::Arc::clone(&rec);
            let spawned = std::thread::Builder::new()
                .name("aorta-trace-notify".into())
                .spawn(move || notify::supervise(listener, rec));
            if let Err(e) = spawned {
                // The child is blocked on its exec until someone answers: nobody will.
                // SAFETY: killing our own child.
                unsafe { libc::kill(child.pid, libc::SIGKILL) };
                return Err(TraceError::Os {
                    what: "spawn the supervisor thread",
                    source: e,
                });
            }
        }
        Err(why) => reason = Some(why.to_string()),
    }
    let raw = wait_untraced(child.pid);
    let mut exec_error = None;
    while let Some((step, e)) = child::read_record(&mut child.status) {
        match step {
            child::STEP_EXEC => exec_error = Some(io::Error::from_raw_os_error(e)),
            filter::STEP_NO_NEW_PRIVS => {
                reason = Some(child::Untraced::NoNewPrivs(e).to_string());
            }
            filter::STEP_SECCOMP => {
                reason = Some(child::Untraced::Seccomp(e).to_string());
            }
            _ => {}
        }
    }
    if !filter::SUPPORTED {
        reason.get_or_insert_with(|| "unsupported architecture".into());
    }
    let mut rec = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(b) = rec.broken.take() {
        reason.get_or_insert(b);
    }
    kill_strays();
    Ok(Traced {
        trace: Trace::from_accesses(reason, rec.files),
        exit: ExitKind::from_wait_status(raw),
        exec_error,
    })
}

/// SIGKILLs every process left below this one (strays reparented to it as subreaper, and
/// their children), without waiting for them.
fn kill_strays() {
    let mut stack = vec![std::process::id().to_string()];
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = stack.pop() {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten();
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace() {
                if seen.insert(c.to_owned()) {
                    if let Ok(n) = c.parse::<libc::pid_t>() {
                        // SAFETY: signalling a process below this one.
                        unsafe { libc::kill(n, libc::SIGKILL) };
                    }
                    stack.push(c.to_owned());
                }
            }
        }
    }
}

/// [`trace_command`] with ptrace (the fallback).
fn trace_ptraced(argv: &[OsString]) -> Result<Traced, TraceError> {
    let mut child = child::spawn(argv)?;
    let mut rec = tracer::Recorder::default();
    let raw = match (&child.traced, child.ended) {
        (_, Some(st)) => st,
        (Ok(()), None) => tracer::trace(child.pid, &mut rec),
        (Err(_), None) => wait_untraced(child.pid),
    };
    // The trace stores the reason as text.
    let mut reason = child.traced.err().map(|e| e.to_string());
    if !filter::SUPPORTED {
        reason.get_or_insert_with(|| "unsupported architecture".into());
    }
    let mut exec_error = None;
    // The child has ended: its end of the pipe is closed, these reads cannot block.
    while let Some((step, e)) = child::read_record(&mut child.status) {
        match step {
            child::STEP_EXEC => exec_error = Some(io::Error::from_raw_os_error(e)),
            filter::STEP_NO_NEW_PRIVS => {
                reason.get_or_insert(child::Untraced::NoNewPrivs(e).to_string());
            }
            filter::STEP_SECCOMP => {
                reason.get_or_insert(child::Untraced::Seccomp(e).to_string());
            }
            _ => {}
        }
    }
    if let Some(b) = rec.broken.take() {
        reason.get_or_insert(b);
    }
    let trace = Trace::from_accesses(reason, rec.files);
    Ok(Traced {
        trace,
        exit: ExitKind::from_wait_status(raw),
        exec_error,
    })
}

fn wait_untraced(pid: libc::pid_t) -> libc::c_int {
    let mut st = 0;
    // SAFETY: waiting for our own child with a valid status pointer.
    while unsafe { libc::waitpid(pid, &mut st, 0) } < 0 {
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return 1 << 8;
        }
    }
    st
}
