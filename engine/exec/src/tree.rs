//! One trial's process tree: who belongs to it, how to signal all of it, how to reap it.
//!
//! Membership (re-evaluated on every refresh, remembered forever once seen):
//! 1. the root (the spawned child, leader of its own session and group);
//! 2. any process whose parent is a member (ppid links, walked to a fixpoint);
//! 3. any process in the root's session — catches double-forks that did not `setsid`, even
//!    after they were re-parented away; sound because the root is not reaped until teardown
//!    ends, so its pid (= the session id) cannot be reused meanwhile;
//! 4. with aorta as child subreaper: any child of aorta whose initial environment carries this
//!    trial's `AORTA_EXEC_TOKEN` — catches daemons that double-forked *and* called `setsid`
//!    between two refreshes;
//! 5. with cgroup containment (contain.rs): any process in the trial's cgroup — catches those
//!    that also cleared their environment (`env -i setsid CMD &`), which no rule above can.
//!
//! A member is identified by (pid, start time); every signal goes through a pidfd opened and
//! then checked against the start time, so a recycled pid is never hit.

use crate::procfs::{self, Snapshot};
use nix::sys::signal::{self, Signal};
use nix::unistd::{self, Pid};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The env var that marks every process of a trial (see the module docs, rule 4).
pub const TOKEN_VAR: &str = "AORTA_EXEC_TOKEN";

/// A process identity that survives pid reuse: pid plus start time (`/proc/<pid>/stat`
/// field 22, clock ticks after boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId {
    pub pid: u32,
    pub start_time: u64,
}

impl ProcId {
    /// Whether this very process still runs (exists with the same start time, not a zombie).
    pub fn is_alive(&self) -> bool {
        procfs::read_stat(self.pid as i32)
            .is_some_and(|s| s.start_time == self.start_time && !s.is_zombie())
    }
}

/// Sets `PR_SET_CHILD_SUBREAPER` on this process once, so orphaned descendants of trials are
/// re-parented to aorta (findable, and reaped by the trial that owns them) instead of init.
/// Returns whether it is in effect.
pub fn ensure_subreaper() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| nix::sys::prctl::set_child_subreaper(true).is_ok())
}

fn subreaper_on() -> bool {
    nix::sys::prctl::get_child_subreaper().unwrap_or(false)
}

#[derive(Debug)]
pub(crate) struct Tree {
    id: u64,
    pub root: i32,
    token_entry: String,
    /// The trial's cgroup directory (rule 5), when trials are contained.
    cgroup: Option<std::path::PathBuf>,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Every member ever seen, (pid, start time) → still alive at the last refresh.
    seen: BTreeMap<(i32, u64), bool>,
    root_reaped: bool,
    /// Children of aorta whose environment was read and did not carry the token.
    rejected: HashSet<(i32, u64)>,
    peak_rss_bytes: u64,
    /// No pid was handed out after the root's by the time it exited ([`Tree::refresh_young`]).
    alone: bool,
}

pub(crate) enum Reap {
    /// Reaped: raw wait status and `ru_maxrss` (KiB).
    Done {
        status: i32,
        maxrss_kib: u64,
    },
    NotYet,
    /// Someone else reaped it (should not happen); status unknown.
    Lost,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Tree {
    pub fn new(
        root: i32,
        root_start: u64,
        token: &str,
        cgroup: Option<std::path::PathBuf>,
    ) -> Tree {
        let mut inner = Inner::default();
        inner.seen.insert((root, root_start), true);
        Tree {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            root,
            token_entry: format!("{TOKEN_VAR}={token}"),
            cgroup,
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Updates membership from a scan no older than `max_age`; returns the new members.
    pub fn refresh(&self, max_age: Duration) -> Vec<ProcId> {
        let snap = procfs::snapshot(max_age);
        let mut inner = self.lock();
        self.refresh_locked(&mut inner, &snap)
    }

    /// A refresh from a scan of only the processes younger than the root (see
    /// [`Snapshot::take_since`]), for the check once the root has exited: on a busy host a full
    /// scan reads hundreds of `stat` files, this one a handful, and none when no pid was handed
    /// out after the root's (the tree is then the root alone: [`Tree::proved_alone`]). Falls
    /// back to a full scan when pids may have wrapped meanwhile.
    pub fn refresh_young(&self, since_start: Duration) -> Vec<ProcId> {
        // Sound while fewer pids than `pid_max` were handed out since the root started: assume
        // at most 100,000 forks a second on the host.
        let no_wrap =
            procfs::pid_max().is_some_and(|max| since_start.as_secs_f64() * 100_000.0 < max as f64);
        if no_wrap && procfs::last_pid() == Some(self.root) {
            // Every process or thread made after the root (its descendants, whatever session,
            // environment or cgroup they moved to) has a larger pid: there is none, so the
            // tree is the root alone, and it has exited.
            let mut inner = self.lock();
            inner.seen.values_mut().for_each(|live| *live = false);
            inner.alone = true;
            return Vec::new();
        }
        let snap = if no_wrap {
            Snapshot::take_since(self.root)
        } else {
            None
        };
        match snap {
            Some(snap) => {
                let mut inner = self.lock();
                self.refresh_locked(&mut inner, &snap)
            }
            None => self.refresh(Duration::ZERO),
        }
    }

    fn refresh_locked(&self, inner: &mut Inner, snap: &Snapshot) -> Vec<ProcId> {
        let me = std::process::id() as i32;
        let my_pgrp = unistd::getpgrp().as_raw();
        let mut frontier = Vec::new();
        for (&(pid, start), live) in inner.seen.iter_mut() {
            match snap.get(pid, start) {
                Some(st) => {
                    *live = !st.is_zombie();
                    frontier.push(pid);
                }
                None => *live = false,
            }
        }
        let mut added = Vec::new();
        let mut add = |inner: &mut Inner, st: &procfs::Stat, frontier: &mut Vec<i32>| {
            if st.pid <= 1 || st.pid == me || st.pgrp == my_pgrp {
                return;
            }
            if inner
                .seen
                .insert((st.pid, st.start_time), !st.is_zombie())
                .is_none()
            {
                frontier.push(st.pid);
                added.push(ProcId {
                    pid: st.pid as u32,
                    start_time: st.start_time,
                });
            }
        };
        if !inner.root_reaped {
            for st in snap.by_pid.values().filter(|s| s.session == self.root) {
                add(inner, st, &mut frontier);
            }
        }
        if subreaper_on() {
            for &c in snap.children.get(&me).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(st) = snap.by_pid.get(&c) else {
                    continue;
                };
                let key = (c, st.start_time);
                if inner.seen.contains_key(&key) || inner.rejected.contains(&key) {
                    continue;
                }
                if procfs::environ_has(c, &self.token_entry) {
                    add(inner, st, &mut frontier);
                } else {
                    inner.rejected.insert(key);
                }
            }
        }
        if let Some(dir) = &self.cgroup {
            for pid in crate::contain::pids_in(dir) {
                if let Some(st) = snap.by_pid.get(&pid) {
                    add(inner, st, &mut frontier);
                }
            }
        }
        while let Some(p) = frontier.pop() {
            for &c in snap.children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
                if let Some(st) = snap.by_pid.get(&c) {
                    add(inner, st, &mut frontier);
                }
            }
        }
        let rss: u64 = inner
            .seen
            .iter()
            .filter(|(_, live)| **live)
            .filter_map(|(&(pid, start), _)| snap.get(pid, start))
            .map(|st| st.rss_pages)
            .sum();
        inner.peak_rss_bytes = inner.peak_rss_bytes.max(rss * procfs::page_size());
        added
    }

    /// Members alive at the last refresh (zombies excluded).
    pub fn live(&self) -> Vec<ProcId> {
        self.lock()
            .seen
            .iter()
            .filter(|(_, live)| **live)
            .map(|(&(pid, start_time), _)| ProcId {
                pid: pid as u32,
                start_time,
            })
            .collect()
    }

    /// Every member ever seen, root included.
    pub fn all(&self) -> Vec<ProcId> {
        self.lock()
            .seen
            .keys()
            .map(|&(pid, start_time)| ProcId {
                pid: pid as u32,
                start_time,
            })
            .collect()
    }

    pub fn peak_rss_bytes(&self) -> u64 {
        self.lock().peak_rss_bytes
    }

    /// Sends `sig` to the root's process group (while the root is unreaped) and to every live
    /// member. Never aorta itself, its group, or pid 1.
    pub fn signal_all(&self, sig: Signal) {
        let inner = self.lock();
        self.signal_locked(&inner, sig);
    }

    fn signal_locked(&self, inner: &Inner, sig: Signal) {
        if !inner.root_reaped && self.root > 1 && self.root != unistd::getpgrp().as_raw() {
            // ESRCH (group already empty) and EPERM are both fine to ignore here.
            let _ = signal::killpg(Pid::from_raw(self.root), sig);
        }
        for (&(pid, start), live) in &inner.seen {
            if *live {
                send_signal(pid, start, sig);
            }
        }
    }

    /// Sends `sig` to some members only (those found during a graceful wait).
    pub fn signal_some(&self, procs: &[ProcId], sig: Signal) {
        let _inner = self.lock();
        for p in procs {
            send_signal(p.pid as i32, p.start_time, sig);
        }
    }

    /// Stops the whole tree with SIGSTOP, rescanning until no new member appears (a stopped
    /// process cannot fork), then SIGKILLs every member and the group.
    pub fn freeze_and_kill(&self) {
        let mut inner = self.lock();
        for round in 0..16 {
            let snap = procfs::snapshot(Duration::ZERO);
            let added = self.refresh_locked(&mut inner, &snap);
            self.signal_locked(&inner, Signal::SIGSTOP);
            if round > 0 && added.is_empty() {
                break;
            }
        }
        self.signal_locked(&inner, Signal::SIGKILL);
        if let Some(dir) = &self.cgroup {
            crate::contain::kill_all_in(dir);
        }
    }

    /// Reaps the root without blocking; keeps the group signalable until then.
    pub fn try_reap_root(&self) -> Reap {
        let mut inner = self.lock();
        if inner.root_reaped {
            return Reap::Lost;
        }
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value; wait4 only writes to the pointers.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: valid pointers to locals.
            let r = unsafe { libc::wait4(self.root, &mut status, libc::WNOHANG, &mut ru) };
            if r == self.root {
                inner.root_reaped = true;
                return Reap::Done {
                    status,
                    maxrss_kib: ru.ru_maxrss.max(0) as u64,
                };
            }
            if r == 0 {
                return Reap::NotYet;
            }
            if nix::errno::Errno::last() == nix::errno::Errno::EINTR {
                continue;
            }
            inner.root_reaped = true;
            return Reap::Lost;
        }
    }

    /// Whether [`Tree::refresh_young`] proved that no process but the root ever belonged to the
    /// tree: once the root is reaped its cgroup is empty without being read.
    pub fn proved_alone(&self) -> bool {
        self.lock().alone
    }

    /// Whether the root has exited (without reaping it).
    pub fn root_exited(&self) -> bool {
        use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
        if self.lock().root_reaped {
            return true;
        }
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(Pid::from_raw(self.root)), flags) {
            Ok(WaitStatus::StillAlive) => false,
            Ok(_) => true,
            Err(nix::errno::Errno::EINTR) => false,
            Err(_) => true,
        }
    }

    /// Reaps members that were re-parented to aorta (subreaper) and have exited. Returns how
    /// many adopted members are still running.
    pub fn reap_adopted(&self) -> usize {
        if self.lock().seen.len() <= 1 {
            return 0; // only the root was ever seen: nothing was adopted
        }
        let me = std::process::id() as i32;
        let snap = procfs::snapshot(Duration::ZERO);
        let inner = self.lock();
        let mut running = 0;
        for &(pid, start) in inner.seen.keys() {
            if pid == self.root {
                continue;
            }
            let Some(st) = snap.get(pid, start) else {
                continue;
            };
            if st.ppid != me {
                continue;
            }
            // Our child with the right start time: only we can reap it, so the pid is stable.
            let mut status = 0;
            // SAFETY: valid pointer to a local.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == 0 {
                running += 1;
            }
        }
        running
    }

    /// Blocks in a detached thread until the adopted members still running exit, then reaps
    /// them (they were SIGKILLed; only uninterruptible sleep can delay them).
    pub fn reap_adopted_later(&self) {
        if self.lock().seen.len() <= 1 {
            return;
        }
        let me = std::process::id() as i32;
        let snap = procfs::snapshot(Duration::ZERO);
        let pids: Vec<i32> = self
            .lock()
            .seen
            .keys()
            .filter(|&&(pid, start)| {
                pid != self.root && snap.get(pid, start).is_some_and(|s| s.ppid == me)
            })
            .map(|&(pid, _)| pid)
            .collect();
        if !pids.is_empty() {
            let _ = std::thread::Builder::new()
                .name("aorta-reaper".into())
                .spawn(move || {
                    for pid in pids {
                        let mut status = 0;
                        // SAFETY: valid pointer to a local.
                        unsafe { libc::waitpid(pid, &mut status, 0) };
                    }
                });
        }
    }

    /// Hands the root to a detached thread that reaps it whenever it finally exits.
    pub fn reap_root_later(&self) {
        let mut inner = self.lock();
        if inner.root_reaped {
            return;
        }
        inner.root_reaped = true;
        let root = self.root;
        let _ = std::thread::Builder::new()
            .name("aorta-reaper".into())
            .spawn(move || {
                let mut status = 0;
                // SAFETY: valid pointer to a local.
                unsafe { libc::waitpid(root, &mut status, 0) };
            });
    }
}

/// Signals one process if it is still the one that started at `start`: a pidfd is opened,
/// the start time checked, and the signal sent through the pidfd, so a recycled pid is never
/// signalled. Falls back to kill(2) where pidfds are unavailable (Linux < 5.3).
fn send_signal(pid: i32, start: u64, sig: Signal) -> bool {
    if pid <= 1 || pid == std::process::id() as i32 {
        return false;
    }
    let opened = crate::pidfd::pidfd_open(pid);
    if let Ok(fd) = &opened {
        if !same_process(pid, start) {
            return false;
        }
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall; a null siginfo is allowed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                sig as i32,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        return r == 0;
    }
    if opened.is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
        return false;
    }
    if !same_process(pid, start) {
        return false;
    }
    signal::kill(Pid::from_raw(pid), sig).is_ok()
}

fn same_process(pid: i32, start: u64) -> bool {
    procfs::read_stat(pid).is_some_and(|s| s.start_time == start)
}

// ---- registry of live trees (for the second Ctrl-C) ----

fn registry() -> &'static Mutex<BTreeMap<u64, Arc<Tree>>> {
    static REG: OnceLock<Mutex<BTreeMap<u64, Arc<Tree>>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(BTreeMap::new()))
}

pub(crate) fn registered() -> Vec<Arc<Tree>> {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect()
}

/// Keeps a tree in the registry while alive.
pub(crate) struct Registration(u64);

pub(crate) fn register(tree: &Arc<Tree>) -> Registration {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(tree.id, Arc::clone(tree));
    Registration(tree.id)
}

impl Drop for Registration {
    fn drop(&mut self) {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
    }
}
