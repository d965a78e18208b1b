//! Starting a trial's root process without copying aorta's address space.
//!
//! `std::process::Command` forks (copying the page tables of a process that may hold
//! thousands of trial records) as soon as a `pre_exec` hook is set, and aorta needs one: the
//! child must call `setsid` and `PR_SET_PDEATHSIG`, which `posix_spawn` cannot do. A fork cost
//! 3 ms per trial against 1 ms for the rest of starting `true`. This does what glibc's
//! `posix_spawn` does instead: `clone(CLONE_VM | CLONE_VFORK)` onto a small stack of its own,
//! with every signal blocked around it, and a child that only makes async-signal-safe system
//! calls before `execve`. Everything the child needs (paths, argv, envp) is prepared first.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// One `KEY=VALUE` entry of a child's environment.
pub(crate) type EnvEntry = std::borrow::Cow<'static, CStr>;

/// The program, arguments, environment and directory of a child, as C strings: built ahead
/// of the spawn ([`crate::prepare`]) so the thread that starts it only clones.
pub(crate) struct Command {
    program: CString,
    argv: Vec<CString>,
    /// Borrowed where the entry is aorta's own environment, read once ([`crate::run`]).
    envp: Vec<EnvEntry>,
    /// `sh PROGRAM ARGS…`, for a program the kernel cannot execute itself (ENOEXEC: a script
    /// without `#!`), as `execvp` does.
    sh_argv: Vec<CString>,
    cwd: Option<CString>,
}

impl Command {
    /// `program` is a path (callers resolve `PATH` first); `argv` includes `argv[0]`; `env` is
    /// the child's whole environment.
    #[cfg(test)]
    pub(crate) fn new(
        program: &Path,
        argv: &[String],
        env: &[(std::ffi::OsString, std::ffi::OsString)],
        cwd: Option<&Path>,
    ) -> io::Result<Command> {
        let envp = env
            .iter()
            .map(|(k, v)| env_entry(k, v).map(EnvEntry::Owned))
            .collect::<io::Result<Vec<_>>>()?;
        Command::with_envp(program, argv, envp, cwd)
    }

    /// The command with its environment already as `KEY=VALUE` entries ([`env_entry`]):
    /// `program` is a path (callers resolve `PATH` first), `argv` includes `argv[0]`.
    pub(crate) fn with_envp(
        program: &Path,
        argv: &[String],
        envp: Vec<EnvEntry>,
        cwd: Option<&Path>,
    ) -> io::Result<Command> {
        let program = cstring(program.as_os_str())?;
        let argv = argv
            .iter()
            .map(|a| cstring(OsStr::new(a)))
            .collect::<io::Result<Vec<_>>>()?;
        let mut sh_argv = vec![CString::from(c"sh"), program.clone()];
        sh_argv.extend(argv.iter().skip(1).cloned());
        Ok(Command {
            program,
            argv,
            envp,
            sh_argv,
            cwd: cwd.map(|d| cstring(d.as_os_str())).transpose()?,
        })
    }

    /// The child's environment, as it will get it.
    #[cfg(test)]
    pub(crate) fn envp(&self) -> &[EnvEntry] {
        &self.envp
    }

    /// Sets `key=value` in the child's environment, replacing `key`'s entry if it has one.
    pub(crate) fn set_env(&mut self, key: &str, value: &str) -> io::Result<()> {
        let entry = env_entry(key.as_ref(), value.as_ref())?;
        let prefix = entry.as_bytes()[..=key.len()].to_vec();
        match self
            .envp
            .iter_mut()
            .find(|e| e.to_bytes().starts_with(&prefix))
        {
            Some(e) => *e = EnvEntry::Owned(entry),
            None => self.envp.push(EnvEntry::Owned(entry)),
        }
        Ok(())
    }
}

/// What the child reads and writes between clone and execve (the child must not allocate).
struct Plan<'a> {
    command: &'a Command,
    stdio: [RawFd; 3],
    /// errno of the failed step, written by the child (shared memory) before `_exit(127)`.
    error: AtomicI32,
    /// `cgroup.procs` of the trial's cgroup (contain.rs), which the child joins first.
    cgroup_procs: Option<CString>,
    /// errno of a failed join (the child goes on without the cgroup).
    cgroup_error: AtomicI32,
    /// The signals the child sets back to the default: bit `n - 1` for signal `n`.
    reset: u64,
    /// Set by the child first thing: a child that never ran was killed as it was created.
    reached: AtomicBool,
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

/// One environment entry, `KEY=VALUE`, as the child's `envp` holds it.
pub(crate) fn env_entry(key: &OsStr, value: &OsStr) -> io::Result<CString> {
    let mut kv = Vec::with_capacity(key.len() + 1 + value.len());
    kv.extend_from_slice(key.as_bytes());
    kv.push(b'=');
    kv.extend_from_slice(value.as_bytes());
    c_string(kv)
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    c_string(s.as_bytes().to_vec())
}

fn c_string(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in an argument"))
}

fn null_terminated<S: AsRef<CStr>>(v: &[S]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|c| c.as_ref().as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The standard streams and cgroup of the child.
pub(crate) struct Stdio<'a> {
    pub stdin: &'a dyn AsRawFd,
    pub stdout: &'a dyn AsRawFd,
    pub stderr: &'a dyn AsRawFd,
    /// The trial cgroup to start in.
    pub cgroup: Option<Cgroup<'a>>,
}

/// A trial cgroup as the spawn needs it: its directory open (for `CLONE_INTO_CGROUP`) and its
/// `cgroup.procs` (for the child to write itself into where `clone3` cannot be used).
pub(crate) struct Cgroup<'a> {
    pub dir: &'a dyn AsRawFd,
    pub procs: &'a CString,
}

/// Starts `command` with exactly its environment, in a new session, with
/// `PR_SET_PDEATHSIG = SIGTERM`. Returns the pid; an error from any step before the program
/// ran (e.g. ENOENT from execve) comes back as that `io::Error`, the child already reaped.
///
/// A child with a cgroup is created in it (`clone3` with `CLONE_INTO_CGROUP`, [`clone3`]):
/// a child that writes itself into `cgroup.procs` instead takes the kernel's cgroup
/// migration lock for writing, which waits for an RCU grace period whenever no migration
/// happened in the last one (10–30 ms here: the first trial of every build, and every trial
/// longer than a grace period). Where `clone3` is missing or refused, the child writes.
pub(crate) fn spawn(command: &Command, stdio: Stdio<'_>) -> io::Result<i32> {
    let reset = signals_to_reset();
    let plan = |cgroup_procs: Option<CString>| Plan {
        command,
        stdio: [
            stdio.stdin.as_raw_fd(),
            stdio.stdout.as_raw_fd(),
            stdio.stderr.as_raw_fd(),
        ],
        error: AtomicI32::new(0),
        cgroup_procs,
        cgroup_error: AtomicI32::new(0),
        reset,
        reached: AtomicBool::new(false),
    };
    let Some(cgroup) = &stdio.cgroup else {
        return start_child(&plan(None), None).map_err(Failure::into_io);
    };
    if clone3::usable() {
        match start_child(&plan(None), Some(cgroup.dir.as_raw_fd())) {
            // Linux 6.18.44 SIGKILLs every child cloned into a cgroup that once got
            // `cgroup.kill` (contain.rs never reuses a killed trial cgroup, but the kernel may
            // judge by other cgroups too, e.g. aorta's own): a child that writes itself in is
            // not killed.
            Err(Failure::KilledAtBirth) => clone3::disable(),
            Err(Failure::Clone(e)) => match e.raw_os_error().unwrap_or(0) {
                libc::ENOSYS | libc::E2BIG | libc::EINVAL => clone3::disable(),
                errno @ (libc::EACCES
                | libc::EPERM
                | libc::EBADF
                | libc::EBUSY
                | libc::EOPNOTSUPP
                | libc::ENODEV
                | libc::ENOENT) => {
                    // The kernel refused the cgroup (no permission, a domain it cannot join):
                    // this trial and the later ones go without, as when the write is refused.
                    crate::contain::join_failed(errno);
                    return start_child(&plan(None), None).map_err(Failure::into_io);
                }
                _ => return Err(e),
            },
            done => return done.map_err(Failure::into_io),
        }
    }
    start_child(&plan(Some(cgroup.procs.clone())), None).map_err(Failure::into_io)
}

/// Whether children are created inside their trial cgroup (`clone3` with `CLONE_INTO_CGROUP`)
/// rather than writing themselves in: false off x86-64, and from the first refusal on.
pub fn spawns_into_cgroup() -> bool {
    clone3::usable()
}

/// Why a child did not start.
enum Failure {
    /// The clone itself failed (errno).
    Clone(io::Error),
    /// A step in the child before the program ran (its errno).
    Child(io::Error),
    /// The child cloned into its cgroup was killed before it ran any of its own code (reaped).
    KilledAtBirth,
}

impl Failure {
    fn into_io(self) -> io::Error {
        match self {
            Failure::Clone(e) | Failure::Child(e) => e,
            Failure::KilledAtBirth => io::Error::other("the child was killed as it was created"),
        }
    }
}

/// The clone (into `cgroup` with `clone3`, or the plain one) and the child's report.
fn start_child(plan: &Plan<'_>, cgroup: Option<RawFd>) -> Result<i32, Failure> {
    let command = plan.command;
    let argv_p = null_terminated(&command.argv);
    let envp_p = null_terminated(&command.envp);
    let sh_p = null_terminated(&command.sh_argv);
    let child = Child {
        plan,
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        sh_argv: sh_p.as_ptr(),
    };

    CHILD_STACK.with_borrow_mut(|stack| clone_child(plan, cgroup, child, stack))
}

thread_local! {
    /// The stack a vfork'd child runs on while this thread waits (CLONE_VFORK), so two children
    /// never share it. Kept, not made per spawn: a fresh 64 KiB buffer cost a memset, and its
    /// free made glibc consolidate the heap, on every trial.
    static CHILD_STACK: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; 64 * 1024].into_boxed_slice());
}

/// [`start_child`] on the stack `stack`.
fn clone_child(
    plan: &Plan<'_>,
    cgroup: Option<RawFd>,
    child: Child<'_>,
    stack: &mut [u8],
) -> Result<i32, Failure> {
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
    let arg = &child as *const ChildWithMask as *mut libc::c_void;
    let pid = match cgroup {
        // SAFETY: as for clone below; `stack` is this thread's, which waits while the child
        // uses it (CLONE_VFORK), and no other child runs on it meanwhile.
        Some(fd) => unsafe { clone3::clone_vfork_into(fd, stack.as_mut_ptr(), top, arg) },
        // SAFETY: `child_main` only reads `child` (alive until clone returns, as CLONE_VFORK
        // suspends us until the child has exec'd or exited) and makes async-signal-safe calls.
        None => unsafe {
            libc::clone(
                child_main,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                arg,
            )
        }
        .into(),
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &child.old_mask, std::ptr::null_mut());
    }
    if pid < 0 {
        return Err(Failure::Clone(clone_error));
    }
    let pid = pid as i32;
    if cgroup.is_some() && !plan.reached.load(Ordering::SeqCst) {
        let mut status = 0;
        // SAFETY: reaping our own child, which has exited without running.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(Failure::KilledAtBirth);
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
        return Err(Failure::Child(io::Error::from_raw_os_error(errno)));
    }
    Ok(pid)
}

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP)`: `clone(2)`'s glibc wrapper has no
/// cgroup argument and `clone3` has no wrapper, so the child's entry into [`child_main`] on
/// its own stack is written here (x86-64; elsewhere the child writes `cgroup.procs`).
mod clone3 {
    use std::sync::atomic::{AtomicBool, Ordering};

    static REFUSED: AtomicBool = AtomicBool::new(false);

    /// Whether to try `clone3`: x86-64, and not refused yet by this kernel (or a seccomp
    /// filter, as container runtimes' default profiles have, answering ENOSYS).
    pub(super) fn usable() -> bool {
        cfg!(target_arch = "x86_64") && !REFUSED.load(Ordering::Relaxed)
    }

    /// No `clone3` (Linux < 5.3, seccomp: ENOSYS) or no `CLONE_INTO_CGROUP` (Linux < 5.7:
    /// E2BIG for the larger argument, EINVAL for the flag): the child writes from now on.
    pub(super) fn disable() {
        REFUSED.store(true, Ordering::Relaxed);
    }

    /// `struct clone_args` of `<linux/sched.h>`, up to `cgroup` (Linux 5.7).
    #[repr(C)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }

    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

    /// Starts a vfork child in the cgroup `dir_fd` on the stack `bottom..top` (16-byte aligned
    /// `top`), running `child_main(arg)`. Returns the pid, or -1 with errno set.
    ///
    /// # Safety
    /// As for `clone(CLONE_VM | CLONE_VFORK)`: `arg` stays valid and the stack unused by
    /// anything else until this returns (the parent is suspended until the child execs or
    /// exits), and the child only makes async-signal-safe calls.
    #[cfg(target_arch = "x86_64")]
    pub(super) unsafe fn clone_vfork_into(
        dir_fd: i32,
        bottom: *mut u8,
        top: *mut libc::c_void,
        arg: *mut libc::c_void,
    ) -> libc::c_long {
        let args = CloneArgs {
            flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
            pidfd: 0,
            child_tid: 0,
            parent_tid: 0,
            exit_signal: libc::SIGCHLD as u64,
            stack: bottom as u64,
            stack_size: top as u64 - bottom as u64,
            tls: 0,
            set_tid: 0,
            set_tid_size: 0,
            cgroup: dir_fd as u64,
        };
        let entry: extern "C" fn(*mut libc::c_void) -> libc::c_int = super::child_main;
        let ret: libc::c_long;
        // SAFETY: the caller's contract. The kernel starts the child after the `syscall`
        // with rax = 0 and rsp = `top` (16-byte aligned, so the `call` leaves the stack as
        // the ABI wants at a function's entry) and every other register as the parent's:
        // r12 and r13 carry the argument and the entry. `child_main` never returns (it
        // execs or `_exit`s); should it, the child exits with its value. The parent gets
        // the pid (or -errno) in rax; the syscall clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "mov rdi, r12",
                "call r13",
                "mov edi, eax",
                "mov eax, {exit}",
                "syscall",
                "ud2",
                "2:",
                exit = const libc::SYS_exit,
                inlateout("rax") libc::SYS_clone3 => ret,
                in("rdi") &args as *const CloneArgs,
                in("rsi") std::mem::size_of::<CloneArgs>(),
                in("r12") arg,
                in("r13") entry,
                lateout("rcx") _,
                lateout("r11") _,
            );
        }
        if ret < 0 {
            // SAFETY: errno of this thread.
            unsafe { *libc::__errno_location() = -ret as i32 };
            return -1;
        }
        ret
    }

    /// Not built for this architecture: [`usable`] is false, so never called.
    #[cfg(not(target_arch = "x86_64"))]
    pub(super) unsafe fn clone_vfork_into(
        _dir_fd: i32,
        _bottom: *mut u8,
        _top: *mut libc::c_void,
        _arg: *mut libc::c_void,
    ) -> libc::c_long {
        // SAFETY: errno of this thread.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        -1
    }
}

struct Child<'a> {
    plan: &'a Plan<'a>,
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
    c.plan.reached.store(true, Ordering::SeqCst);
    let fail = |plan: &Plan<'_>| -> libc::c_int {
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
        // SIGPIPE, which Rust ignores for itself (std::process::Command resets it too). The
        // parent's set names exactly those (`signals_to_reset`), so each is just set; only
        // without that set (no /proc: every bit) is each signal looked at first.
        let unknown = c.plan.reset == u64::MAX;
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..libc::SIGRTMAX().min(65) {
            if c.plan.reset & (1u64 << (sig - 1)) == 0 {
                continue;
            }
            if unknown {
                let mut sa: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut sa) != 0 {
                    continue;
                }
                let ignored = sa.sa_sigaction == libc::SIG_IGN;
                let caught = sa.sa_sigaction != libc::SIG_DFL && !ignored;
                if !(caught || (ignored && sig == libc::SIGPIPE)) {
                    continue;
                }
            }
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
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
        if let Some(dir) = &c.plan.command.cwd {
            if libc::chdir(dir.as_ptr()) != 0 {
                return fail(c.plan);
            }
        }
        let empty: libc::sigset_t = std::mem::zeroed();
        let mut empty = empty;
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(c.plan.command.program.as_ptr(), c.argv, c.envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(c"/bin/sh".as_ptr(), c.sh_argv, c.envp);
        }
        fail(c.plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::fs::File;

    fn env() -> Vec<(OsString, OsString)> {
        vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("AORTA_SPAWN_TEST".into(), "yes".into()),
        ]
    }

    /// Builds the command and spawns it at once.
    fn spawn_at(
        program: &Path,
        argv: &[String],
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
        stdio: Stdio<'_>,
    ) -> io::Result<i32> {
        spawn(&Command::new(program, argv, env, cwd)?, stdio)
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
        let pid = spawn_at(
            Path::new("/bin/sh"),
            &["sh".into(), "-c".into(), script.into()],
            &env(),
            Some(dir.path()),
            Stdio {
                stdin: &null,
                stdout: &out,
                stderr: &out,
                cgroup: None,
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
        let pid = spawn_at(
            Path::new("/bin/sh"),
            &[
                "sh".into(),
                "-c".into(),
                "grep -E '^Sig(Cgt|Ign)' /proc/self/status".into(),
            ],
            &env(),
            None,
            Stdio {
                stdin: &null,
                stdout: &out,
                stderr: &out,
                cgroup: None,
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
            cgroup: None,
        };
        let e = spawn_at(
            Path::new("/definitely/not/here"),
            &["x".into()],
            &env(),
            None,
            io(),
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("not-executable");
        std::fs::write(&plain, "true\n").unwrap();
        std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let e = spawn_at(&plain, &["x".into()], &env(), None, io()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES));
        let bad_cwd = Some(Path::new("/definitely/not/here"));
        assert_eq!(
            spawn_at(
                Path::new("/bin/true"),
                &["true".into()],
                &env(),
                bad_cwd,
                io()
            )
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
        let pid = spawn_at(
            &script,
            &["s".into()],
            &env(),
            None,
            Stdio {
                stdin: &null,
                stdout: &null,
                stderr: &null,
                cgroup: None,
            },
        )
        .unwrap();
        assert_eq!(wait(pid), 7);
    }

    /// A lease's variable replaces the entry of the same name (not a prefix of another) or
    /// is added: the child sees each name once, with the new value.
    #[test]
    fn set_env_replaces_or_adds_one_entry() {
        let mut vars = env();
        vars.push(("GPU".into(), "0".into()));
        vars.push(("GPU_IDS".into(), "keep".into()));
        let mut cmd = Command::new(
            Path::new("/bin/sh"),
            &[
                "sh".into(),
                "-c".into(),
                "echo \"$GPU $GPU_IDS $HIP\"; env | grep -c '^GPU='".into(),
            ],
            &vars,
            None,
        )
        .unwrap();
        cmd.set_env("GPU", "3,4").unwrap();
        cmd.set_env("HIP", "5").unwrap();
        assert!(cmd.set_env("HIP", "nul\0").is_err());
        let dir = tempfile::tempdir().unwrap();
        let out = File::create(dir.path().join("out")).unwrap();
        let null = File::open("/dev/null").unwrap();
        let io = Stdio {
            stdin: &null,
            stdout: &out,
            stderr: &out,
            cgroup: None,
        };
        assert_eq!(wait(spawn(&cmd, io).unwrap()), 0);
        let text = std::fs::read_to_string(dir.path().join("out")).unwrap();
        assert_eq!(text, "3,4 keep 5\n1\n");
    }

    /// A cgroup that had `cgroup.kill` written to it: Linux 6.18 kills a child cloned into it
    /// before it runs; the spawn notices (the child never ran) and has the child write itself
    /// in instead, which works.
    #[test]
    fn a_child_killed_as_it_is_created_is_started_again_by_the_write() {
        let crate::Containment::Cgroup { dir, .. } = crate::containment() else {
            eprintln!("note: no cgroup containment here; nothing to check");
            return;
        };
        let cg = dir.join(format!("spawn-test-{}", std::process::id()));
        std::fs::create_dir(&cg).unwrap();
        std::fs::write(cg.join("cgroup.kill"), "1").unwrap();
        let dir_fd = File::open(&cg).unwrap();
        let procs = CString::new(cg.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let out = File::create(tmp.path().join("out")).unwrap();
        let null = File::open("/dev/null").unwrap();
        let pid = spawn_at(
            Path::new("/bin/cat"),
            &["cat".into(), "/proc/self/cgroup".into()],
            &env(),
            None,
            Stdio {
                stdin: &null,
                stdout: &out,
                stderr: &out,
                cgroup: Some(Cgroup {
                    dir: &dir_fd,
                    procs: &procs,
                }),
            },
        )
        .unwrap();
        assert_eq!(wait(pid), 0);
        let text = std::fs::read_to_string(tmp.path().join("out")).unwrap();
        let _ = std::fs::remove_dir(&cg);
        assert!(
            text.trim_end()
                .ends_with(&*cg.file_name().unwrap().to_string_lossy()),
            "{text}"
        );
    }
}
