//! Starting a trial's root process without copying aorta's address space.
//!
//! `std::process::Command` forks (copying the page tables of a process that may hold
//! thousands of trial records) as soon as a `pre_exec` hook is set, and aorta needs one: the
//! child must call `setsid` and `PR_SET_PDEATHSIG`, which `posix_spawn` cannot do. A fork cost
//! 3 ms per trial against 1 ms for the rest of starting `true`. This does what glibc's
//! `posix_spawn` does instead: `clone(CLONE_VM | CLONE_VFORK)` onto a small stack of its own,
//! with every signal blocked around it, and a child that only makes async-signal-safe system
//! calls before `execve`. Everything the child needs (paths, argv, envp) is prepared first.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

/// Everything the child needs, built before the clone (the child must not allocate).
struct Plan {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    /// `sh PROGRAM ARGS…`, for a program the kernel cannot execute itself (ENOEXEC: a script
    /// without `#!`), as `execvp` does.
    sh_argv: Vec<CString>,
    cwd: Option<CString>,
    stdio: [RawFd; 3],
    /// errno of the failed step, written by the child (shared memory) before `_exit(127)`.
    error: AtomicI32,
    /// `cgroup.procs` of the trial's cgroup (contain.rs), which the child joins first.
    cgroup_procs: Option<CString>,
    /// errno of a failed join (the child goes on without the cgroup).
    cgroup_error: AtomicI32,
    /// The signals the child sets back to the default: bit `n - 1` for signal `n`.
    reset: u64,
}

/// The signals a child must set back to the default before it unblocks signals: those with a
/// handler in this process (a handler would run in the child, on the parent's memory: the
/// interrupt handler would cancel the build) and SIGPIPE if ignored (Rust ignores it for
/// itself; `std::process::Command` resets it too).
///
/// Read from `/proc/self/status` once, not per spawn: the 64 `sigaction` queries the child
/// made instead cost a tenth of starting `true`, and so does the read. Handlers are installed
/// at start-up (Rust's) and by [`crate::install_interrupt_handler`], which calls
/// [`forget_signals_to_reset`]; nothing else in aorta installs one.
fn signals_to_reset() -> u64 {
    let mut known = RESET.lock().unwrap_or_else(|p| p.into_inner());
    *known.get_or_insert_with(read_signals_to_reset)
}

static RESET: std::sync::Mutex<Option<u64>> = std::sync::Mutex::new(None);

/// A handler was installed or removed: the next spawn reads the set again.
pub(crate) fn forget_signals_to_reset() {
    *RESET.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// `SigCgt`, plus SIGPIPE if in `SigIgn`; every signal without /proc.
fn read_signals_to_reset() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return u64::MAX;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    match (field("SigCgt:"), field("SigIgn:")) {
        (Some(caught), Some(ignored)) => {
            let sigpipe = 1u64 << (libc::SIGPIPE - 1);
            caught | (ignored & sigpipe)
        }
        _ => u64::MAX,
    }
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in an argument"))
}

fn null_terminated(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The standard streams, directory and cgroup of the child.
pub(crate) struct Stdio<'a> {
    pub stdin: &'a dyn AsRawFd,
    pub stdout: &'a dyn AsRawFd,
    pub stderr: &'a dyn AsRawFd,
    pub cwd: Option<&'a Path>,
    /// `cgroup.procs` of the cgroup to start in.
    pub cgroup_procs: Option<CString>,
}

/// Starts `program` (a path: callers resolve `PATH` first) with `argv` (`argv[0]` included)
/// and exactly the environment `env`, in a new session, with `PR_SET_PDEATHSIG = SIGTERM`.
/// Returns the pid; an error from any step before the program ran (e.g. ENOENT from execve)
/// comes back as that `io::Error`, the child already reaped.
pub(crate) fn spawn(
    program: &Path,
    argv: &[String],
    env: &[(OsString, OsString)],
    stdio: Stdio<'_>,
) -> io::Result<i32> {
    let program_c = cstring(program.as_os_str())?;
    let argv_c = argv
        .iter()
        .map(|a| cstring(OsStr::new(a)))
        .collect::<io::Result<Vec<_>>>()?;
    let mut sh_argv = vec![CString::from(c"sh"), program_c.clone()];
    sh_argv.extend(argv_c.iter().skip(1).cloned());
    let envp = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let plan = Plan {
        program: program_c,
        argv: argv_c,
        envp,
        sh_argv,
        cwd: stdio.cwd.map(|d| cstring(d.as_os_str())).transpose()?,
        stdio: [
            stdio.stdin.as_raw_fd(),
            stdio.stdout.as_raw_fd(),
            stdio.stderr.as_raw_fd(),
        ],
        error: AtomicI32::new(0),
        cgroup_procs: stdio.cgroup_procs,
        cgroup_error: AtomicI32::new(0),
        reset: signals_to_reset(),
    };
    let argv_p = null_terminated(&plan.argv);
    let envp_p = null_terminated(&plan.envp);
    let sh_p = null_terminated(&plan.sh_argv);
    let child = Child {
        plan: &plan,
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        sh_argv: sh_p.as_ptr(),
    };

    // The child runs on this buffer while the parent waits (CLONE_VFORK).
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the stack grows down on every Linux architecture Rust supports; 16-byte aligned.
    let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
    let top = (top as usize & !15) as *mut libc::c_void;

    // Block every signal so no handler of aorta's runs in the child while it shares our memory;
    // the child resets handlers to the default and unblocks before execve.
    // SAFETY: plain sigset manipulation on locals.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above: fills `all` and swaps this thread's mask, saving the old one in `old`.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let child = ChildWithMask {
        child,
        old_mask: old,
    };
    // SAFETY: `child_main` only reads `child` (alive until clone returns, as CLONE_VFORK
    // suspends us until the child has exec'd or exited) and makes async-signal-safe calls.
    let pid = unsafe {
        libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &child as *const ChildWithMask as *mut libc::c_void,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &child.old_mask, std::ptr::null_mut());
    }
    drop(stack);
    if pid < 0 {
        return Err(clone_error);
    }
    let join_errno = plan.cgroup_error.load(Ordering::SeqCst);
    if join_errno != 0 {
        crate::contain::join_failed(join_errno);
    }
    let errno = plan.error.load(Ordering::SeqCst);
    if errno != 0 {
        let mut status = 0;
        // SAFETY: reaping our own child, which has exited.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(pid)
}

struct Child<'a> {
    plan: &'a Plan,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    sh_argv: *const *const libc::c_char,
}

struct ChildWithMask<'a> {
    child: Child<'a>,
    old_mask: libc::sigset_t,
}

/// The child, between clone and execve. Only async-signal-safe system calls; no allocation.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildWithMask`, alive while the parent is suspended.
    let cm = unsafe { &*(arg as *const ChildWithMask) };
    let c = &cm.child;
    let fail = |plan: &Plan| -> libc::c_int {
        // SAFETY: errno read and _exit are async-signal-safe.
        unsafe {
            plan.error
                .store(*libc::__errno_location(), Ordering::SeqCst);
            libc::_exit(127)
        }
    };
    // SAFETY: async-signal-safe calls with pointers prepared by the parent.
    unsafe {
        // Handlers installed by aorta become the default; ignored signals stay ignored except
        // SIGPIPE, which Rust ignores for itself (std::process::Command resets it too). Only
        // the signals the parent found caught (or SIGPIPE ignored) are looked at.
        for sig in 1..libc::SIGRTMAX() {
            if sig > 64 || c.plan.reset & (1u64 << (sig - 1)) == 0 {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut sa) != 0 {
                continue;
            }
            let ignored = sa.sa_sigaction == libc::SIG_IGN;
            if (sa.sa_sigaction != libc::SIG_DFL && !ignored) || (ignored && sig == libc::SIGPIPE) {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        // Own session and process group: teardown signals the group, and the terminal's Ctrl-C
        // reaches aorta only.
        if libc::setsid() < 0 {
            return fail(c.plan);
        }
        // Into the trial's cgroup before anything can fork: every descendant inherits it.
        if let Some(procs) = &c.plan.cgroup_procs {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                c.plan
                    .cgroup_error
                    .store(*libc::__errno_location(), Ordering::SeqCst);
            }
            if fd >= 0 {
                libc::close(fd);
            }
        }
        // If aorta dies without tearing down, the root gets SIGTERM.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
        for (target, &fd) in c.plan.stdio.iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) < 0 {
                return fail(c.plan);
            }
        }
        if let Some(dir) = &c.plan.cwd {
            if libc::chdir(dir.as_ptr()) != 0 {
                return fail(c.plan);
            }
        }
        let empty: libc::sigset_t = std::mem::zeroed();
        let mut empty = empty;
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(c.plan.program.as_ptr(), c.argv, c.envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(c"/bin/sh".as_ptr(), c.sh_argv, c.envp);
        }
        fail(c.plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn env() -> Vec<(OsString, OsString)> {
        vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("AORTA_SPAWN_TEST".into(), "yes".into()),
        ]
    }

    fn wait(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn runs_with_exact_env_streams_cwd_and_new_session() {
        let dir = tempfile::tempdir().unwrap();
        let out = File::create(dir.path().join("out")).unwrap();
        let null = File::open("/dev/null").unwrap();
        let script =
            "echo \"$AORTA_SPAWN_TEST $(pwd) $HOME\"; ps -o sid= -p $$ | tr -d ' '; echo $$";
        let pid = spawn(
            Path::new("/bin/sh"),
            &["sh".into(), "-c".into(), script.into()],
            &env(),
            Stdio {
                stdin: &null,
                stdout: &out,
                stderr: &out,
                cwd: Some(dir.path()),
                cgroup_procs: None,
            },
        )
        .unwrap();
        assert_eq!(wait(pid), 0);
        let text = std::fs::read_to_string(dir.path().join("out")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!("yes {} ", dir.path().canonicalize().unwrap().display()),
            "only the given env: no HOME"
        );
        if lines.len() == 3 {
            assert_eq!(lines[1], lines[2], "the child leads its own session");
        }
    }

    /// The child starts with default handlers where aorta has its own, and SIGPIPE at the
    /// default though Rust ignores it here; the mask read from /proc names both.
    #[test]
    fn the_child_gets_default_handlers_and_sigpipe() {
        extern "C" fn on_usr1(_: libc::c_int) {}
        // SAFETY: installs a no-op handler for SIGUSR1 in this test process.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        }
        forget_signals_to_reset();
        let reset = signals_to_reset();
        assert_ne!(reset & (1 << (libc::SIGUSR1 - 1)), 0, "caught: {reset:x}");
        assert_ne!(
            reset & (1 << (libc::SIGPIPE - 1)),
            0,
            "Rust ignores SIGPIPE: {reset:x}"
        );
        assert_eq!(
            reset & (1 << (libc::SIGUSR2 - 1)),
            0,
            "default stays: {reset:x}"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = File::create(dir.path().join("out")).unwrap();
        let null = File::open("/dev/null").unwrap();
        // SigCgt and SigIgn of the child itself, after execve.
        let pid = spawn(
            Path::new("/bin/sh"),
            &[
                "sh".into(),
                "-c".into(),
                "grep -E '^Sig(Cgt|Ign)' /proc/self/status".into(),
            ],
            &env(),
            Stdio {
                stdin: &null,
                stdout: &out,
                stderr: &out,
                cwd: None,
                cgroup_procs: None,
            },
        )
        .unwrap();
        assert_eq!(wait(pid), 0);
        let text = std::fs::read_to_string(dir.path().join("out")).unwrap();
        let ign = text
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap();
        assert_eq!(ign & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE reset: {text}");
    }

    #[test]
    fn exec_errors_come_back_as_errno() {
        let null = File::open("/dev/null").unwrap();
        let io = || Stdio {
            stdin: &null,
            stdout: &null,
            stderr: &null,
            cwd: None,
            cgroup_procs: None,
        };
        let e = spawn(
            Path::new("/definitely/not/here"),
            &["x".into()],
            &env(),
            io(),
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("not-executable");
        std::fs::write(&plain, "true\n").unwrap();
        std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let e = spawn(&plain, &["x".into()], &env(), io()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
        let bad_cwd = Stdio {
            cwd: Some(Path::new("/definitely/not/here")),
            ..io()
        };
        assert_eq!(
            spawn(Path::new("/bin/true"), &["true".into()], &env(), bad_cwd)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ENOENT)
        );
    }

    #[test]
    fn scripts_without_a_shebang_run_under_sh() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "exit 7\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let null = File::open("/dev/null").unwrap();
        let pid = spawn(
            &script,
            &["s".into()],
            &env(),
            Stdio {
                stdin: &null,
                stdout: &null,
                stderr: &null,
                cwd: None,
                cgroup_procs: None,
            },
        )
        .unwrap();
        assert_eq!(wait(pid), 7);
    }
}
