//! The seccomp-bpf program: `SECCOMP_RET_TRACE | tag` for the file-opening and exec system
//! calls, `ALLOW` for everything else, so the tracer only wakes up for the calls it records.
//!
//! Hand-written rather than built with `seccompiler`: the program is a flat table of at most
//! six system calls per architecture, ~40 lines here; seccompiler would add a dependency and
//! its rule compiler for no gain, and KILL/ERRNO actions are never wanted. The tracer decodes
//! a stop from the (arch, nr) pair that `PTRACE_GET_SYSCALL_INFO` reports, with [`decode`],
//! not from `SECCOMP_RET_DATA`: a tracee's own filter may return `RET_TRACE` with its own data.

use std::io;

/// Which traced call stopped the tracee (also put in `SECCOMP_RET_DATA`, for debugging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// aarch64 has no `open`/`creat`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) enum Call {
    Open = 1,
    OpenAt = 2,
    OpenAt2 = 3,
    Creat = 4,
    Execve = 5,
    ExecveAt = 6,
}

// <linux/audit.h>: EM_* | __AUDIT_ARCH_64BIT (0x8000_0000) | __AUDIT_ARCH_LE (0x4000_0000).
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;

type Table = (u32, &'static [(libc::c_long, Call)]);

/// Native x86_64 plus i386 binaries (their own numbers; same flags and `open_how`). x32
/// (`nr | 0x4000_0000`) matches nothing and is allowed untraced.
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
const TABLES: &[Table] = &[
    (
        AUDIT_ARCH_X86_64,
        &[
            (libc::SYS_open, Call::Open),
            (libc::SYS_openat, Call::OpenAt),
            (libc::SYS_openat2, Call::OpenAt2),
            (libc::SYS_creat, Call::Creat),
            (libc::SYS_execve, Call::Execve),
            (libc::SYS_execveat, Call::ExecveAt),
        ],
    ),
    (
        AUDIT_ARCH_I386,
        &[
            (5, Call::Open),
            (295, Call::OpenAt),
            (437, Call::OpenAt2),
            (8, Call::Creat),
            (11, Call::Execve),
            (358, Call::ExecveAt),
        ],
    ),
];

/// aarch64 has no `open`/`creat`; 32-bit arm binaries (compat) are allowed untraced.
#[cfg(target_arch = "aarch64")]
const TABLES: &[Table] = &[(
    AUDIT_ARCH_AARCH64,
    &[
        (libc::SYS_openat, Call::OpenAt),
        (libc::SYS_openat2, Call::OpenAt2),
        (libc::SYS_execve, Call::Execve),
        (libc::SYS_execveat, Call::ExecveAt),
    ],
)];

#[cfg(not(any(
    all(target_arch = "x86_64", target_pointer_width = "64"),
    target_arch = "aarch64"
)))]
const TABLES: &[Table] = &[];

/// The traced call `nr` is on `arch`, if it is one of ours.
pub(crate) fn decode(arch: u32, nr: u64) -> Option<Call> {
    let (_, calls) = TABLES.iter().find(|(a, _)| *a == arch)?;
    calls.iter().find(|(n, _)| *n as u64 == nr).map(|(_, c)| *c)
}

/// Whether this build can trace at all (an empty table would record nothing).
pub(crate) const SUPPORTED: bool = !TABLES.is_empty();

// struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    let code = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    libc::sock_filter { code, jt, jf, k }
}

/// What the recorded calls return to the kernel.
#[derive(Clone, Copy)]
pub(crate) enum Action {
    /// `SECCOMP_RET_TRACE | call`: a ptrace stop.
    Trace,
    /// `SECCOMP_RET_USER_NOTIF`: a notification on the filter's listener (`notify.rs`).
    Notify,
}

/// The whole program, with `action` for the recorded calls. Built before `fork` (it
/// allocates); the child only installs it.
pub(crate) fn program_for(action: Action) -> Vec<libc::sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let mut p = Vec::new();
    for (arch, calls) in TABLES {
        p.push(stmt(load, ARCH_OFFSET));
        // Another arch: skip this block (load nr, a jump + return per call, final allow).
        let block = u8::try_from(2 * calls.len() + 2).expect("small table");
        p.push(jeq(*arch, 0, block));
        p.push(stmt(load, NR_OFFSET));
        for (nr, call) in *calls {
            p.push(jeq(*nr as u32, 0, 1));
            let k = match action {
                Action::Trace => libc::SECCOMP_RET_TRACE | *call as u32,
                Action::Notify => libc::SECCOMP_RET_USER_NOTIF,
            };
            p.push(stmt(ret, k));
        }
        p.push(stmt(ret, libc::SECCOMP_RET_ALLOW));
    }
    // Unknown arch: allow, never kill.
    p.push(stmt(ret, libc::SECCOMP_RET_ALLOW));
    p
}

/// Why the filter could not be installed: the step and its errno.
pub(crate) type Failure = (u32, i32);
pub(crate) const STEP_NO_NEW_PRIVS: u32 = 3;
pub(crate) const STEP_SECCOMP: u32 = 4;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn seccomp(prog: &libc::sock_fprog, flags: libc::c_ulong) -> i32 {
    let op = libc::SECCOMP_SET_MODE_FILTER as libc::c_long;
    // SAFETY: `prog` points at a valid sock_fprog whose filter outlives the call; the kernel
    // copies the program.
    unsafe { libc::syscall(libc::SYS_seccomp, op, flags as libc::c_long, prog) as i32 }
}

/// Installs the filter in the calling process (the forked child: no allocation here). Tries
/// without `PR_SET_NO_NEW_PRIVS` first so setuid programs keep working where the caller may
/// (root / CAP_SYS_ADMIN); sets it and retries only on `EACCES`.
pub(crate) fn install(prog: &libc::sock_fprog) -> Result<(), Failure> {
    install_with(prog, 0).map(|_| ())
}

/// [`install`] with seccomp(2) `flags`; returns what the call returns (the listener's
/// descriptor with `SECCOMP_FILTER_FLAG_NEW_LISTENER`).
pub(crate) fn install_with(prog: &libc::sock_fprog, flags: libc::c_ulong) -> Result<i32, Failure> {
    let r = seccomp(prog, flags);
    if r >= 0 {
        return Ok(r);
    }
    let e = errno();
    if e != libc::EACCES {
        return Err((STEP_SECCOMP, e));
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err((STEP_NO_NEW_PRIVS, errno()));
    }
    let r = seccomp(prog, flags);
    if r >= 0 {
        Ok(r)
    } else {
        Err((STEP_SECCOMP, errno()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_table_and_jumps_stay_in_the_program() {
        let (arch, calls) = TABLES[0];
        for (nr, call) in calls {
            assert_eq!(decode(arch, *nr as u64), Some(*call));
        }
        assert_eq!(decode(arch, libc::SYS_getpid as u64), None);
        assert_eq!(decode(0, calls[0].0 as u64), None, "unknown arch");
        let p = program_for(Action::Trace);
        assert!(SUPPORTED && p.len() > 4);
        let jump = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
        for (i, ins) in p.iter().enumerate().filter(|(_, ins)| ins.code == jump) {
            let last = i + 1 + ins.jt.max(ins.jf) as usize;
            assert!(last < p.len(), "jump at {i} leaves the program");
        }
        let ret = (libc::BPF_RET | libc::BPF_K) as u16;
        assert_eq!(
            p.last().map(|i| (i.code, i.k)),
            Some((ret, libc::SECCOMP_RET_ALLOW))
        );
    }

    /// The real kernel runs the program: with no tracer attached, `SECCOMP_RET_TRACE` makes
    /// `openat` fail with ENOSYS while other calls (`getppid`) still work.
    #[test]
    fn kernel_traps_openat_and_allows_the_rest() {
        let p = program_for(Action::Trace);
        let prog = libc::sock_fprog {
            len: p.len() as u16,
            filter: p.as_ptr() as *mut _,
        };
        let path = c"/".as_ptr();
        // SAFETY: the child only makes raw system calls and `_exit`s (fork-safe in a
        // multithreaded test harness); `prog` and `path` were built before the fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above; NO_NEW_PRIVS keeps this from affecting anything but the child.
            let code = unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                match install(&prog) {
                    Err(_) => 2,
                    Ok(()) => {
                        let fd = libc::openat(libc::AT_FDCWD, path, libc::O_RDONLY);
                        let trapped = fd == -1 && errno() == libc::ENOSYS;
                        if trapped && libc::getppid() > 0 {
                            0
                        } else {
                            1
                        }
                    }
                }
            };
            // SAFETY: leaving the forked child without running the harness's destructors.
            unsafe { libc::_exit(code) }
        }
        assert!(pid > 0);
        let mut status = 0;
        // SAFETY: waiting for our own child with a valid status pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "status {status:#x}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "2: not installed, 1: openat not trapped"
        );
    }
}
