//! Containment that does not depend on the trial's cooperation: a cgroup (v2) per trial.
//!
//! - A process cannot leave its cgroup by `setsid`, a double fork, `env -i` or daemonising, so
//!   `cgroup.procs` of a trial's cgroup lists every process of it (tree.rs, rule 5), in the
//!   host's pid numbering, and `cgroup.kill` ends them all at once (teardown).
//! - All trial cgroups of one aorta process sit under one cgroup, `aorta.<pid>.<start time>`,
//!   next to aorta's own. A keeper process forked from aorta waits for aorta's death
//!   (`PR_SET_PDEATHSIG`, which the kernel sends even when aorta is killed with `kill -9`) and
//!   then kills that whole subtree and removes it. A build that finds the cgroup of a dead
//!   aorta (the keeper was killed too) ends its processes and removes it before it starts.
//! - Trial cgroups are pooled: an empty one is reused by the next trial, so a trial costs one
//!   write of the child into `cgroup.procs`, not a mkdir and an rmdir.
//!
//! Needs a writable cgroup2 hierarchy with `cgroup.kill` (Linux ≥ 5.14): root, a container
//! with its own cgroup namespace, or a systemd-delegated subtree. Without it, or with
//! `AORTA_CONTAINMENT=off`, [`Containment::ProcessTree`] says why and only tree.rs's rules
//! apply. (A PID namespace would give the same guarantee but shows trials pids that differ from
//! the host's, which breaks `pkill` and pid-based debugging inside trials.)

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable that turns cgroup containment off (`off`).
pub const CONTAINMENT_VAR: &str = "AORTA_CONTAINMENT";

/// Which mechanism keeps trial processes from escaping teardown and outliving aorta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Each trial runs in a cgroup under `dir`; the `keeper` process ends them if aorta dies.
    Cgroup { dir: PathBuf, keeper: u32 },
    /// Only the process-tree rules (session, parent links, subreaper + token): a process that
    /// leaves its session and clears its environment, or any after `kill -9` of aorta, can
    /// survive.
    ProcessTree { why: String },
}

impl std::fmt::Display for Containment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Containment::Cgroup { dir, keeper } => write!(
                f,
                "cgroup v2 per trial under {} (keeper pid {keeper}): no trial process escapes \
                 teardown or outlives aorta, even on kill -9",
                dir.display()
            ),
            Containment::ProcessTree { why } => write!(
                f,
                "process tree only ({why}): a process that leaves its session and clears its \
                 environment, or any after kill -9 of aorta, can survive"
            ),
        }
    }
}

struct State {
    mode: Containment,
    /// Empty trial cgroups ready for reuse.
    free: Mutex<Vec<TrialCgroup>>,
    /// Trial cgroups that got `cgroup.kill` ([`kill_all_in`]): never reused (see [`release`]).
    killed: Mutex<HashSet<PathBuf>>,
    next: AtomicU64,
}

static STATE: OnceLock<State> = OnceLock::new();

fn state() -> &'static State {
    STATE.get_or_init(|| {
        let mode = match setup() {
            Ok((dir, keeper)) => Containment::Cgroup {
                dir,
                keeper: keeper as u32,
            },
            Err(why) => Containment::ProcessTree {
                why: why.to_string(),
            },
        };
        State {
            mode,
            free: Mutex::new(Vec::new()),
            killed: Mutex::new(HashSet::new()),
            next: AtomicU64::new(0),
        }
    })
}

/// errno of the first failed move of a trial into its cgroup (0: none failed).
static JOIN_ERROR: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The mechanism in effect for this process (sets it up on first use).
pub fn containment() -> Containment {
    let errno = JOIN_ERROR.load(Ordering::Relaxed);
    match &state().mode {
        Containment::Cgroup { dir, .. } if errno != 0 => Containment::ProcessTree {
            why: format!(
                "cannot move trials into {}: {}",
                dir.display(),
                std::io::Error::from_raw_os_error(errno)
            ),
        },
        mode => mode.clone(),
    }
}

/// Ends containment at a normal exit: removes this process's cgroups and stops the keeper, so
/// no keeper lingers as a stray when aorta itself runs as another aorta's trial. Trials must
/// have ended. A no-op without cgroup containment or before the first trial.
pub fn shutdown() {
    let Some(st) = STATE.get() else {
        return;
    };
    if let Containment::Cgroup { dir, keeper } = &st.mode {
        remove_tree(dir);
        // SAFETY: kill + waitpid of our own child, the keeper (it blocks every signal but
        // SIGKILL).
        unsafe {
            libc::kill(*keeper as i32, libc::SIGKILL);
            libc::waitpid(*keeper as i32, std::ptr::null_mut(), 0);
        }
    }
}

/// A trial's child could not join its cgroup (errno): later trials run without one.
pub(crate) fn join_failed(errno: i32) {
    JOIN_ERROR.store(errno, Ordering::Relaxed);
}

/// A trial's cgroup: the child is created in it (`dir_fd`, spawn.rs) or writes itself into
/// its `cgroup.procs` before it executes the command.
#[derive(Debug)]
pub(crate) struct TrialCgroup {
    pub dir: PathBuf,
    /// The directory, open for `CLONE_INTO_CGROUP`.
    pub dir_fd: File,
    /// Its `cgroup.procs`.
    pub procs: CString,
}

impl TrialCgroup {
    fn open(dir: PathBuf) -> Option<TrialCgroup> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir_fd = File::options()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&dir)
            .ok()?;
        let procs = cstring_path(&dir.join("cgroup.procs"));
        Some(TrialCgroup { dir, dir_fd, procs })
    }
}

/// The pids now in the cgroup `dir` (host numbering).
pub(crate) fn pids_in(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// SIGKILLs every process in the trial cgroup `dir` at once; [`release`] then removes it.
pub(crate) fn kill_all_in(dir: &Path) {
    if let Some(st) = STATE.get() {
        lock(&st.killed).insert(dir.to_path_buf());
    }
    let _ = fs::write(dir.join("cgroup.kill"), "1");
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cgroup for the next trial, or `None` without cgroup containment.
pub(crate) fn acquire() -> Option<TrialCgroup> {
    let st = state();
    let Containment::Cgroup { dir, .. } = &st.mode else {
        return None;
    };
    if JOIN_ERROR.load(Ordering::Relaxed) != 0 {
        return None;
    }
    if let Some(cg) = lock(&st.free).pop() {
        return Some(cg);
    }
    let n = st.next.fetch_add(1, Ordering::Relaxed);
    let trial = dir.join(format!("t{n}"));
    fs::create_dir(&trial).ok()?;
    TrialCgroup::open(trial)
}

/// Returns a trial's cgroup to the pool once it is empty; one that still holds processes (they
/// were SIGKILLed and are exiting, or stuck in the kernel) is killed again and left out.
/// `known_empty`: the caller proved it empty (the tree was its root alone, reaped: a process
/// leaves its cgroup when it exits, before it can be reaped), so `cgroup.events` is not read.
/// One that got `cgroup.kill` is removed, not reused: Linux 6.18 kills every child later
/// cloned into it (`CLONE_INTO_CGROUP`, spawn.rs), as if the kill were still going on.
pub(crate) fn release(cg: TrialCgroup, known_empty: bool) {
    let st = state();
    let killed = lock(&st.killed).remove(&cg.dir);
    if killed || (!known_empty && populated(&cg.dir)) {
        let _ = fs::write(cg.dir.join("cgroup.kill"), "1");
        // Gone if it emptied already; else shutdown, the keeper or the next aorta's sweep
        // removes it.
        let _ = fs::remove_dir(&cg.dir);
        return;
    }
    lock(&st.free).push(cg);
}

fn populated(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events"))
        .map(|s| s.lines().any(|l| l.trim() == "populated 1"))
        .unwrap_or(true)
}

fn cstring_path(p: &Path) -> CString {
    // Paths built here from /proc/self/mountinfo and numbers hold no NUL.
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

/// Why trials cannot get cgroups; `Display` is [`Containment::ProcessTree`]'s `why`.
#[derive(Debug, thiserror::Error)]
enum CgroupError {
    #[error("/proc: {0}")]
    Proc(#[source] std::io::Error),
    #[error("no cgroup v2 hierarchy")]
    NoHierarchy,
    #[error("no cgroup2 mount")]
    NoMount,
    /// Turned off by the environment variable named.
    #[error("{0}=off")]
    Off(&'static str),
    #[error("cannot create a cgroup in {}: {source}", parent.display())]
    Create {
        parent: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the kernel has no cgroup.kill (Linux < 5.14)")]
    NoKill,
    #[error("cannot start the keeper: {0}")]
    Keeper(#[source] std::io::Error),
}

/// Where this process's cgroup lives in the cgroup2 hierarchy (mount point + own path).
fn own_cgroup_dir() -> Result<PathBuf, CgroupError> {
    let cgroup = fs::read_to_string("/proc/self/cgroup").map_err(CgroupError::Proc)?;
    let own = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or(CgroupError::NoHierarchy)?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").map_err(CgroupError::Proc)?;
    // Fields: id parent major:minor root mount-point options… - fstype source super-options.
    let mount = mountinfo
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mut f = left.split_whitespace();
            let root = f.nth(3)?;
            let point = f.next()?;
            (fstype == "cgroup2" && root == "/").then(|| PathBuf::from(point))
        })
        .ok_or(CgroupError::NoMount)?;
    Ok(mount.join(own.trim().trim_start_matches('/')))
}

/// Creates this process's cgroup, sweeps those of dead aortas, starts the keeper.
fn setup() -> Result<(PathBuf, i32), CgroupError> {
    if std::env::var(CONTAINMENT_VAR).is_ok_and(|v| v == "off") {
        return Err(CgroupError::Off(CONTAINMENT_VAR));
    }
    let parent = own_cgroup_dir()?;
    sweep_dead(&parent);
    let me = std::process::id();
    let start = crate::procfs::read_stat(me as i32).map_or(0, |s| s.start_time);
    let dir = parent.join(format!("aorta.{me}.{start}"));
    if let Err(source) = fs::create_dir(&dir) {
        return Err(CgroupError::Create { parent, source });
    }
    if !dir.join("cgroup.kill").exists() {
        let _ = fs::remove_dir(&dir);
        return Err(CgroupError::NoKill);
    }
    // Whether processes may be moved in (delegation) shows when the first trial's child tries:
    // a failed move leaves that trial to tree.rs's rules and turns cgroups off (join_failed).
    let (tx, rx) = std::sync::mpsc::channel();
    let keeper_dir = dir.clone();
    let spawned = std::thread::Builder::new()
        .name("aorta-keeper".into())
        .spawn(move || {
            // PR_SET_PDEATHSIG fires when the *thread* that forked the keeper exits: this one
            // never does.
            let _ = tx.send(start_keeper(&keeper_dir));
            loop {
                std::thread::park();
            }
        });
    let keeper = match spawned {
        Ok(_) => rx
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("keeper thread died"))),
        Err(e) => Err(e),
    };
    match keeper {
        Ok(pid) => Ok((dir, pid)),
        Err(e) => {
            let _ = fs::remove_dir(&dir);
            Err(CgroupError::Keeper(e))
        }
    }
}

/// Ends the processes of and removes every `aorta.<pid>.<start>` cgroup in `parent` whose
/// aorta is gone (pid not running with that start time).
fn sweep_dead(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("aorta.")) else {
            continue;
        };
        let Some((pid, start)) = rest.split_once('.') else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
            continue;
        };
        let alive = crate::procfs::read_stat(pid).is_some_and(|s| s.start_time == start);
        if !alive {
            remove_tree(&e.path());
        }
    }
}

/// Kills everything under `dir`, waits (up to 2 s) for it to empty, removes the directories.
fn remove_tree(dir: &Path) {
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    for _ in 0..200 {
        if !populated(dir) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

/// Forks the keeper. Returns its pid.
fn start_keeper(dir: &Path) -> std::io::Result<i32> {
    let kill = cstring_path(&dir.join("cgroup.kill"));
    let events = cstring_path(&dir.join("cgroup.events"));
    let dir_c = cstring_path(dir);
    let null = File::options().read(true).write(true).open("/dev/null")?;
    let parent = std::process::id() as i32;
    // Every signal blocked around the fork: no handler of aorta's may run in the child.
    // SAFETY: plain sigset manipulation on locals.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: fills `all` and swaps this thread's mask, saving the old one.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: the child only makes async-signal-safe system calls (keeper_main) on data
    // prepared above and never returns into Rust code.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        keeper_main(
            parent,
            null.as_raw_fd(),
            &all,
            KeeperPaths {
                kill: &kill,
                events: &events,
                dir: &dir_c,
            },
        );
    }
    let fork_error = std::io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if pid < 0 {
        return Err(fork_error);
    }
    Ok(pid)
}

struct KeeperPaths<'a> {
    kill: &'a CString,
    events: &'a CString,
    dir: &'a CString,
}

/// The keeper: sleeps until aorta is gone, then kills aorta's trial cgroups and removes them.
/// A fork of a threaded process: only async-signal-safe system calls, no allocation.
fn keeper_main(parent: i32, null: i32, all: &libc::sigset_t, paths: KeeperPaths<'_>) -> ! {
    // SAFETY: async-signal-safe system calls on prepared, NUL-terminated paths and locals;
    // never returns.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
        // Out of aorta's session and group (a terminal's Ctrl-C is aorta's to handle), holding
        // none of aorta's descriptors (store locks, log files, pipes a caller waits on).
        libc::setsid();
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..4096 {
                libc::close(fd);
            }
        }
        let mut info: libc::siginfo_t = std::mem::zeroed();
        // Signals stay blocked; each one wakes this loop; only aorta's death ends it.
        while libc::getppid() == parent {
            libc::sigwaitinfo(all, &mut info);
        }
        let fd = libc::open(paths.kill.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"1".as_ptr().cast(), 1);
            libc::close(fd);
        }
        // Wait (up to 2 s) for the subtree to empty, then remove the trial cgroups and ours.
        let mut buf = [0u8; 4096];
        for _ in 0..200 {
            let fd = libc::open(paths.events.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                break;
            }
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            libc::close(fd);
            if n <= 0 || !contains(&buf[..n as usize], b"populated 1") {
                break;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
        remove_children_raw(paths.dir, &mut buf);
        libc::rmdir(paths.dir.as_ptr());
        libc::_exit(0)
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `rmdir` of every `t<N>` directory in `dir`, with getdents64 and a stack buffer (no
/// allocation: the keeper is a fork of a threaded process).
fn remove_children_raw(dir: &CString, buf: &mut [u8; 4096]) {
    // SAFETY: open/getdents64/unlinkat/close on a NUL-terminated path and a buffer owned here;
    // record lengths are bounds-checked before use.
    unsafe {
        let fd = libc::open(
            dir.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                if off + 19 >= n as usize {
                    break;
                }
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                if reclen < 20 || off + reclen > n as usize {
                    break;
                }
                let name = &buf[off + 19..off + reclen];
                if name.first() == Some(&b't') {
                    libc::unlinkat(fd, name.as_ptr().cast(), libc::AT_REMOVEDIR);
                }
                off += reclen;
            }
        }
        libc::close(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroup_dir_is_a_cgroup_when_there_is_a_v2_hierarchy() {
        if let Ok(dir) = own_cgroup_dir() {
            assert!(dir.join("cgroup.procs").exists(), "{}", dir.display());
        }
    }

    #[test]
    fn containment_says_what_is_in_effect() {
        let text = containment().to_string();
        assert!(
            text.starts_with("cgroup v2 per trial") || text.starts_with("process tree only"),
            "{text}"
        );
    }

    #[test]
    fn contains_finds_a_line() {
        assert!(contains(b"populated 1\nfrozen 0\n", b"populated 1"));
        assert!(!contains(b"populated 0\n", b"populated 1"));
    }
}
