//! Running one trial process: spawn in its own session, wait, time out, cancel, tear down the
//! whole tree, reap.

use crate::cancel::CancelToken;
use crate::hang::{HangConfig, HangReport, Monitor};
use crate::procfs;
use crate::spawn;
use crate::tree::{self, ProcId, Reap, Tree, TOKEN_VAR};
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Default wait between SIGTERM and SIGKILL.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(10);

/// Exit code for an exec that failed with ENOENT (shell convention).
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code for an exec that failed with EACCES.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code reported on timeout (AORTA's synthetic -1).
pub const EXIT_TIMEOUT: i32 = -1;
/// The stacks of a latched hang, beside the stdout file (in a trial's directory).
pub const HANG_STACKS_FILE: &str = "hang-stacks.txt";

/// What to run and how.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Program and arguments; `argv[0]` is looked up in the child's `PATH`.
    pub argv: Vec<String>,
    /// Set on top of aorta's own environment (after `env_remove`).
    pub env: BTreeMap<String, String>,
    /// Inherited variables to drop.
    pub env_remove: Vec<String>,
    /// Working directory; `None` inherits aorta's.
    pub cwd: Option<PathBuf>,
    /// Files the child writes directly (created, truncated; parent directories created). The
    /// same path for both shares one file. stdin is `/dev/null`.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub timeout: Option<Duration>,
    /// SIGTERM → this long → SIGKILL, on timeout, cancel, hang kill and stray cleanup.
    pub kill_grace: Duration,
    pub hang: Option<HangConfig>,
}

impl ProcessSpec {
    /// A spec with no env changes, no timeout, `kill_grace` 10 s and no hang monitor.
    pub fn new<S: Into<String>>(
        argv: impl IntoIterator<Item = S>,
        stdout: impl Into<PathBuf>,
        stderr: impl Into<PathBuf>,
    ) -> Self {
        ProcessSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            env_remove: Vec::new(),
            cwd: None,
            stdout: stdout.into(),
            stderr: stderr.into(),
            timeout: None,
            kill_grace: DEFAULT_KILL_GRACE,
            hang: None,
        }
    }

    /// Checks everything that can be checked before spawning.
    pub fn validate(&self) -> Result<(), SpawnError> {
        match self.argv.first() {
            None => return Err(SpawnError::EmptyArgv),
            Some(a) if a.is_empty() => return Err(SpawnError::EmptyArgv),
            _ => {}
        }
        if let Some(index) = self.argv.iter().position(|a| a.contains('\0')) {
            return Err(SpawnError::NulInArg { index });
        }
        validate_env(&self.env)?;
        for k in &self.env_remove {
            if !is_posix_name(k) {
                return Err(SpawnError::BadEnvName(k.clone()));
            }
        }
        if let Some(cwd) = &self.cwd {
            if !cwd.is_dir() {
                return Err(SpawnError::BadCwd(cwd.clone()));
            }
        }
        Ok(())
    }
}

/// A setup problem found before anything was spawned.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("empty command")]
    EmptyArgv,
    #[error("argument {index} of the command contains a NUL byte")]
    NulInArg { index: usize },
    #[error("environment variable name {0:?} is not a POSIX name ([A-Za-z_][A-Za-z0-9_]*)")]
    BadEnvName(String),
    #[error("the value of environment variable {0} contains a NUL byte")]
    NulInEnvValue(String),
    #[error("working directory {} does not exist", .0.display())]
    BadCwd(PathBuf),
    #[error("cannot open {}: {source}", path.display())]
    Log { path: PathBuf, source: io::Error },
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_posix_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'a'..=b'z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Keys must be POSIX names and values free of NUL.
pub fn validate_env(env: &BTreeMap<String, String>) -> Result<(), SpawnError> {
    for (k, v) in env {
        if !is_posix_name(k) {
            return Err(SpawnError::BadEnvName(k.clone()));
        }
        if v.contains('\0') {
            return Err(SpawnError::NulInEnvValue(k.clone()));
        }
    }
    Ok(())
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutcome {
    /// Whether the program was executed at all.
    pub launched: bool,
    /// Why it could not be executed (also appended to the stderr file).
    pub exec_error: Option<String>,
    /// Exit status; negative = killed by that signal; [`EXIT_TIMEOUT`] on timeout; 127/126/1
    /// for exec failures (ENOENT/EACCES/other).
    pub exit_code: i32,
    pub timed_out: bool,
    /// Stopped by the cancel token (not launched at all if it was cancelled before).
    pub cancelled: bool,
    /// The hang monitor latched (whether or not it killed: see `HangConfig::kill_on_hang`).
    /// Raw: reconciling a latched hang with a clean exit is the classifier's call.
    pub hang_detected: bool,
    /// aorta tore the tree down because the hang latched (`kill_on_hang`): the exit signal is
    /// aorta's, not the workload's.
    pub killed_on_hang: bool,
    /// When and why the hang latched, and the stacks sampled (also written to
    /// `hang-stacks.txt` beside the stdout file).
    pub hang: Option<HangReport>,
    /// Spawn to the root's exit (or to the end of teardown when aorta killed it).
    pub walltime: Duration,
    pub pid: Option<u32>,
    /// Best effort: the larger of the sampled sum of the tree's resident sets and the root's
    /// `ru_maxrss` (which covers the descendants it waited for) where that exceeds aorta's own
    /// peak; `None` for a short, small trial (nothing sampled, nothing attributable).
    pub peak_rss_kib: Option<u64>,
    /// Processes of the tree still running when the root exited; aorta killed them.
    pub strays_killed: usize,
    /// Every process seen in the tree (root first among equals), for audits and tests.
    pub processes: Vec<ProcId>,
}

impl ProcessOutcome {
    /// The outcome of a program that never ran (callers use it when spawning was refused).
    pub fn not_launched(exit_code: i32) -> Self {
        ProcessOutcome {
            launched: false,
            exec_error: None,
            exit_code,
            timed_out: false,
            cancelled: false,
            hang_detected: false,
            killed_on_hang: false,
            hang: None,
            walltime: Duration::ZERO,
            pid: None,
            peak_rss_kib: None,
            strays_killed: 0,
            processes: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Exited(Instant),
    Timeout,
    Cancelled,
    Hang,
}

/// Main-loop tick: how quickly an exit is noticed.
const TICK: Duration = Duration::from_millis(20);
/// Tree refresh cadence: fast while a trial is young (wrappers fork early), then slower.
const REFRESH_EARLY: Duration = Duration::from_millis(100);
const REFRESH_LATE: Duration = Duration::from_millis(500);
const EARLY_PHASE: Duration = Duration::from_secs(2);
/// How long to wait for SIGKILLed processes to become reapable before a detached thread
/// takes over.
const REAP_BUDGET: Duration = Duration::from_secs(2);

/// Runs one process to completion (see the crate docs for the protocol).
///
/// Returns `Err` only for setup problems found before spawning. An exec failure is an
/// outcome with `launched: false`.
pub fn run(spec: &ProcessSpec, cancel: &CancelToken) -> Result<ProcessOutcome, SpawnError> {
    Ok(start(spec.clone(), cancel)?.wait(cancel))
}

/// A process [`start`]ed and not yet waited for, or the outcome of one that never ran.
///
/// [`wait`](Self::wait) runs the rest of the protocol. Dropped without a wait, the tree is
/// torn down at once (SIGKILL) and reaped, so a started trial never outlives its handle.
pub struct Started {
    running: Option<Box<Running>>,
    not_launched: Option<ProcessOutcome>,
}

/// What the wait needs of a spawned root.
struct Running {
    spec: ProcessSpec,
    pid: i32,
    tree: Arc<Tree>,
    _registration: tree::Registration,
    cgroup: Option<crate::contain::TrialCgroup>,
    start: Instant,
    own_maxrss_at_spawn: u64,
    root_fd: Option<std::os::fd::OwnedFd>,
}

/// Starts one process: the first half of [`run`], for a caller that has other work between
/// the spawn and the wait (the pool starts the next trial on the thread that gives a slot
/// back, and another thread waits). [`prepare`] + [`Prepared::start`] in one call.
pub fn start(spec: ProcessSpec, cancel: &CancelToken) -> Result<Started, SpawnError> {
    spec.validate()?;
    if cancel.is_cancelled() {
        // Nothing is spawned and the log files are left alone.
        return Ok(Started::cancelled());
    }
    Ok(prepare(spec)?.start(cancel))
}

/// A process ready to start: its log files open, its program found in `PATH`, its environment
/// and arguments built as the child needs them. [`prepare`] does this ahead, while the slot
/// the process will run on is still busy, so that [`Prepared::start`] (on the thread that
/// gives the slot back) only spawns.
pub struct Prepared {
    spec: ProcessSpec,
    out: File,
    err: File,
    token: String,
    /// The command as the child gets it, or why the program cannot be executed (an outcome,
    /// not an error: the trial ran and could not execute, as a shell reports it).
    command: io::Result<spawn::Command>,
}

/// Opens the logs (created, truncated), finds the program and builds the child's environment:
/// everything of a start that does not need the slot. `Err` for setup problems only.
pub fn prepare(spec: ProcessSpec) -> Result<Prepared, SpawnError> {
    spec.validate()?;
    let (out, err) = open_logs(&spec.stdout, &spec.stderr)?;
    static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
    let token = format!(
        "{}.{}",
        std::process::id(),
        NEXT_TOKEN.fetch_add(1, Ordering::Relaxed)
    );
    let command = command_of(&spec, &token);
    Ok(Prepared {
        spec,
        out,
        err,
        token,
        command,
    })
}

/// The child's command: aorta's environment less `env_remove`, plus the spec's and the token
/// (which replace inherited entries of the same name), sorted by name.
fn command_of(spec: &ProcessSpec, token: &str) -> io::Result<spawn::Command> {
    let program = resolve_program(spec)?;
    let mut own: Vec<(&OsStr, spawn::EnvEntry)> = Vec::with_capacity(spec.env.len() + 1);
    for (k, v) in spec.env.iter().filter(|(k, _)| k.as_str() != TOKEN_VAR) {
        let entry = spawn::env_entry(k.as_ref(), v.as_ref())?;
        own.push((OsStr::new(k), spawn::EnvEntry::Owned(entry)));
    }
    let token = spawn::env_entry(TOKEN_VAR.as_ref(), token.as_ref())?;
    own.push((OsStr::new(TOKEN_VAR), spawn::EnvEntry::Owned(token)));
    let mut entries: Vec<(&OsStr, spawn::EnvEntry)> = inherited_env()
        .iter()
        .filter(|(k, _)| {
            !spec
                .env_remove
                .iter()
                .any(|r| OsStr::new(r) == k.as_os_str())
                && !own.iter().any(|(o, _)| *o == k.as_os_str())
        })
        .map(|(k, entry)| (k.as_os_str(), spawn::EnvEntry::Borrowed(entry.as_c_str())))
        .collect();
    entries.extend(own);
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let envp = entries.into_iter().map(|(_, entry)| entry).collect();
    spawn::Command::with_envp(&program, &spec.argv, envp, spec.cwd.as_deref())
}

/// aorta's own environment as `KEY=VALUE` entries, one per name (the last wins, as a map
/// would keep it), read once: aorta does not change its environment once started, and reading
/// and converting it again for every trial cost some 150 allocations a trial.
fn inherited_env() -> &'static [(OsString, CString)] {
    static ENV: OnceLock<Vec<(OsString, CString)>> = OnceLock::new();
    ENV.get_or_init(|| {
        std::env::vars_os()
            .collect::<BTreeMap<OsString, OsString>>()
            .into_iter()
            .filter_map(|(k, v)| {
                let entry = spawn::env_entry(&k, &v).ok()?;
                Some((k, entry))
            })
            .collect()
    })
}

/// `/dev/null`, opened once: every child's stdin.
fn dev_null() -> io::Result<&'static File> {
    static NULL: OnceLock<File> = OnceLock::new();
    if let Some(f) = NULL.get() {
        return Ok(f);
    }
    let f = File::open("/dev/null")?;
    Ok(NULL.get_or_init(|| f))
}

impl Prepared {
    /// Gives the process the lease's devices (`CUDA_VISIBLE_DEVICES`, …; the lease wins over
    /// the spec's own values). A CPU lease changes nothing.
    pub fn apply_lease(&mut self, lease: &crate::Lease) {
        let Ok(command) = self.command.as_mut() else {
            return;
        };
        for (k, v) in lease.env() {
            if let Err(e) = command.set_env(&k, &v) {
                self.command = Err(e);
                return;
            }
        }
    }

    /// The hang monitor's settings, for what is known only once the slot is (the devices).
    pub fn hang_mut(&mut self) -> Option<&mut HangConfig> {
        self.spec.hang.as_mut()
    }

    /// Spawns the process (into a trial cgroup where there is containment). A cancelled token
    /// spawns nothing.
    pub fn start(self, cancel: &CancelToken) -> Started {
        if cancel.is_cancelled() {
            return Started::cancelled();
        }
        let Prepared {
            spec,
            out,
            err,
            token,
            command,
        } = self;
        tree::ensure_subreaper();
        let cgroup = crate::contain::acquire();
        let start = Instant::now();
        let own_maxrss_at_spawn = own_maxrss_kib();
        let spawned = command.and_then(|command| {
            let stdio = spawn::Stdio {
                stdin: dev_null()?,
                stdout: &out,
                stderr: &err,
                cgroup: cgroup.as_ref().map(|c| spawn::Cgroup {
                    dir: &c.dir_fd,
                    procs: &c.procs,
                }),
            };
            spawn::spawn(&command, stdio)
        });
        drop((out, err));
        let pid = match spawned {
            Ok(pid) => pid,
            Err(e) => {
                let code = match e.raw_os_error() {
                    Some(libc::ENOENT) => EXIT_NOT_FOUND,
                    Some(libc::EACCES) => EXIT_NOT_EXECUTABLE,
                    _ => 1,
                };
                let msg = format!("aorta: cannot execute {:?}: {e}", spec.argv[0]);
                if let Ok(mut f) = OpenOptions::new().append(true).open(&spec.stderr) {
                    let _ = writeln!(f, "{msg}");
                }
                if let Some(cg) = cgroup {
                    crate::contain::release(cg, false);
                }
                let mut o = ProcessOutcome::not_launched(code);
                o.exec_error = Some(msg);
                o.walltime = start.elapsed();
                return Started::ended(o);
            }
        };
        let root_start = procfs::read_stat(pid).map_or(0, |s| s.start_time);
        let tree = Arc::new(Tree::new(
            pid,
            root_start,
            &token,
            cgroup.as_ref().map(|c| c.dir.clone()),
        ));
        let registration = tree::register(&tree);
        // None on a kernel without pidfds: the wait then ticks.
        let root_fd = crate::pidfd::pidfd_open(pid).ok();
        Started {
            running: Some(Box::new(Running {
                spec,
                pid,
                tree,
                _registration: registration,
                cgroup,
                start,
                own_maxrss_at_spawn,
                root_fd,
            })),
            not_launched: None,
        }
    }
}

impl Started {
    fn cancelled() -> Self {
        let mut o = ProcessOutcome::not_launched(-1);
        o.cancelled = true;
        Started::ended(o)
    }

    fn ended(outcome: ProcessOutcome) -> Self {
        Started {
            running: None,
            not_launched: Some(outcome),
        }
    }

    /// Whether a process was spawned (`false`: an exec failure or a cancel before the spawn).
    pub fn launched(&self) -> bool {
        self.running.is_some()
    }

    /// Waits for the root, tears the tree down as the protocol says, reaps: the rest of [`run`].
    pub fn wait(mut self, cancel: &CancelToken) -> ProcessOutcome {
        match self.running.take() {
            Some(r) => r.wait(cancel),
            None => self
                .not_launched
                .take()
                .unwrap_or_else(|| ProcessOutcome::not_launched(-1)),
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            let stop = CancelToken::new();
            stop.cancel();
            stop.force();
            r.wait(&stop);
        }
    }
}

impl Running {
    fn wait(self, cancel: &CancelToken) -> ProcessOutcome {
        let Running {
            spec,
            pid,
            tree,
            _registration,
            cgroup,
            start,
            own_maxrss_at_spawn,
            root_fd,
        } = self;
        let spec = &spec;
        // Nothing can latch before `grace - window` (the monitor's first samples are its history
        // for the first window after the grace period): its thread starts then, so a trial that ends
        // sooner never pays for a thread.
        let monitor_at = spec
            .hang
            .as_ref()
            .map(|h| start + h.grace.saturating_sub(h.window));
        let mut monitor: Option<Monitor> = None;
        let kill_on_hang = spec.hang.as_ref().is_some_and(|h| h.kill_on_hang);
        let deadline = spec.timeout.map(|t| start + t);

        // The first scan can wait: a process that escapes earlier still carries the trial token
        // and is found by the scan at exit, and short trials then cost one scan, not two.
        let mut next_refresh = start + REFRESH_EARLY;
        let end = loop {
            if tree.root_exited() {
                break End::Exited(Instant::now());
            }
            if cancel.is_cancelled() {
                break End::Cancelled;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break End::Timeout;
            }
            if kill_on_hang && monitor.as_ref().is_some_and(Monitor::latched) {
                break End::Hang;
            }
            if let (None, Some(at), Some(h)) = (&monitor, monitor_at, &spec.hang) {
                if now >= at {
                    let outputs = vec![spec.stdout.clone(), spec.stderr.clone()];
                    monitor = Some(Monitor::start(h, Arc::clone(&tree), outputs, start));
                }
            }
            if now >= next_refresh {
                tree.refresh(procfs::SHARED_SCAN_AGE);
                let every = if now - start < EARLY_PHASE {
                    REFRESH_EARLY
                } else {
                    REFRESH_LATE
                };
                next_refresh = now + every;
            }
            let tick = deadline.map_or(TICK, |d| TICK.min(d.saturating_duration_since(now)));
            let tick = tick.min(
                next_refresh
                    .saturating_duration_since(now)
                    .max(Duration::from_millis(1)),
            );
            let tick = match (&monitor, monitor_at) {
                (None, Some(at)) => tick.min(at.saturating_duration_since(now)),
                _ => tick,
            };
            // Sleep until the root exits (its pidfd turns readable) or the tick ends, so a short
            // trial is noticed at once instead of at the next 20 ms tick.
            match &root_fd {
                Some(fd) => crate::pidfd::wait_readable(fd, tick),
                None => {
                    cancel.wait_cancelled(tick);
                }
            }
        };
        let hang = monitor.and_then(Monitor::stop);
        if let Some(text) = hang.as_ref().and_then(|h| h.stacks.as_deref()) {
            let header = hang
                .as_ref()
                .map(|h| format!("# hang evidence: {}\n\n", h.evidence))
                .unwrap_or_default();
            // Best effort: the report keeps the text either way.
            let _ = fs::write(spec.stdout.with_file_name(HANG_STACKS_FILE), header + text);
        }

        let mut strays_killed = 0;
        match end {
            End::Exited(at) => {
                tree.refresh_young(at - start);
                strays_killed = tree.live().len();
                if strays_killed > 0 {
                    teardown(&tree, spec.kill_grace, cancel);
                }
            }
            End::Timeout | End::Cancelled | End::Hang => teardown(&tree, spec.kill_grace, cancel),
        }

        // Reap the root (a zombie by now unless stuck in uninterruptible sleep).
        let reap_deadline = Instant::now() + REAP_BUDGET;
        let reaped = loop {
            match tree.try_reap_root() {
                Reap::NotYet if Instant::now() < reap_deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Reap::NotYet => {
                    tree.reap_root_later();
                    break None;
                }
                Reap::Done { status, maxrss_kib } => break Some((status, maxrss_kib)),
                Reap::Lost => break None,
            }
        };
        let ended_at = match end {
            End::Exited(at) => at,
            _ => Instant::now(),
        };
        // Adopted members (re-parented to aorta) are reaped too.
        let adopt_deadline = Instant::now() + REAP_BUDGET;
        while tree.reap_adopted() > 0 {
            if Instant::now() >= adopt_deadline {
                tree.reap_adopted_later();
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }

        if let Some(cg) = cgroup {
            crate::contain::release(cg, reaped.is_some() && tree.proved_alone());
        }
        let mut exit_code = match reaped {
            Some((status, _)) if libc::WIFEXITED(status) => libc::WEXITSTATUS(status),
            Some((status, _)) if libc::WIFSIGNALED(status) => -libc::WTERMSIG(status),
            _ => -1,
        };
        let timed_out = end == End::Timeout;
        if timed_out {
            exit_code = EXIT_TIMEOUT;
        }
        // The root started inside aorta's address space (spawn.rs), and Linux folds the high-water
        // mark of the address space a process leaves at execve into its ru_maxrss: a figure no
        // larger than aorta's own high-water mark at that moment may be aorta's, not the child's.
        let child_maxrss = reaped.map_or(0, |r| r.1);
        let child_maxrss = if child_maxrss > own_maxrss_at_spawn {
            child_maxrss
        } else {
            0
        };
        let peak = (tree.peak_rss_bytes() / 1024).max(child_maxrss);
        ProcessOutcome {
            launched: true,
            exec_error: None,
            exit_code,
            timed_out,
            cancelled: end == End::Cancelled,
            hang_detected: hang.is_some(),
            killed_on_hang: end == End::Hang,
            hang,
            walltime: ended_at - start,
            pid: Some(pid as u32),
            peak_rss_kib: (peak > 0).then_some(peak),
            strays_killed,
            processes: tree.all(),
        }
    }
}

/// SIGTERM (+SIGCONT, so stopped members can act on it) to the group and every member;
/// members that appear meanwhile get it too; after `grace` (or at once when the token is
/// forced) the tree is frozen with SIGSTOP and SIGKILLed.
fn teardown(tree: &Tree, grace: Duration, cancel: &CancelToken) {
    tree.refresh(Duration::ZERO);
    if cancel.is_forced() {
        tree.freeze_and_kill();
        return;
    }
    tree.signal_all(Signal::SIGTERM);
    tree.signal_all(Signal::SIGCONT);
    let deadline = Instant::now() + grace;
    loop {
        let added = tree.refresh(procfs::SHARED_SCAN_AGE);
        if !added.is_empty() {
            tree.signal_some(&added, Signal::SIGTERM);
            tree.signal_some(&added, Signal::SIGCONT);
        }
        if tree.live().is_empty() {
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if cancel.wait_forced((deadline - now).min(Duration::from_millis(50))) {
            break;
        }
    }
    tree.freeze_and_kill();
}

/// The CPU time the calling thread has used (user and system): what a phase costs apart from
/// the other processes competing for the machine's cores while it runs.
pub fn thread_cpu_time() -> Duration {
    // SAFETY: an all-zero timespec is valid; clock_gettime only writes to it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid clock id and a pointer to a local.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// aorta's own peak resident set so far (KiB).
fn own_maxrss_kib() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a local.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss.max(0) as u64
}

/// The child's `PATH`: the spec's, or aorta's unless the spec removes it.
fn child_path(spec: &ProcessSpec) -> Option<std::ffi::OsString> {
    if let Some(p) = spec.env.get("PATH") {
        return Some(p.into());
    }
    if spec.env_remove.iter().any(|k| k == "PATH") {
        return None;
    }
    std::env::var_os("PATH")
}

/// The program to execute, as `execvp` would find it in the child's `PATH` (relative entries
/// against the child's working directory), looked up once per (name, PATH) and remembered:
/// otherwise every trial's child tries each `PATH` entry in turn with a failing `execve`. A
/// remembered path that is no longer an executable file is looked up afresh. Names with a `/`
/// are used as they are. ENOENT when found nowhere, EACCES when found but not executable.
pub fn resolve_program(spec: &ProcessSpec) -> io::Result<PathBuf> {
    type Cache = Mutex<HashMap<(String, std::ffi::OsString), PathBuf>>;
    static FOUND: OnceLock<Cache> = OnceLock::new();
    let name = &spec.argv[0];
    if name.contains('/') {
        return Ok(PathBuf::from(name));
    }
    // execvp's default search path when PATH is unset.
    let path_var = child_path(spec).unwrap_or_else(|| "/bin:/usr/bin".into());
    let cache = FOUND.get_or_init(Default::default);
    let key = (name.clone(), path_var.clone());
    if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        if crate::program::is_executable_file(p) {
            return Ok(p.clone());
        }
    }
    let child_cwd = match &spec.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    let found = crate::program::find_program(name, &path_var, &child_cwd)?;
    // A relative entry depends on the child's directory: only all-absolute PATHs are remembered.
    if std::env::split_paths(&path_var).all(|d| d.is_absolute()) {
        cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, found.clone());
    }
    Ok(found)
}

fn open_logs(stdout: &Path, stderr: &Path) -> Result<(File, File), SpawnError> {
    let open = |path: &Path| -> Result<File, SpawnError> {
        let wrap = |source| SpawnError::Log {
            path: path.to_path_buf(),
            source,
        };
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        // The directory is there for a trial (its staging directory): made only when missing.
        match options.open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs::create_dir_all(parent).map_err(wrap)?;
                }
                options.open(path).map_err(wrap)
            }
            opened => opened.map_err(wrap),
        }
    };
    let out = open(stdout)?;
    let err = if stdout == stderr {
        out.try_clone().map_err(|source| SpawnError::Log {
            path: stderr.to_path_buf(),
            source,
        })?
    } else {
        open(stderr)?
    };
    Ok((out, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_childs_environment_is_aortas_less_removals_plus_the_specs_and_the_token() {
        let mut s = ProcessSpec::new(["/bin/true"], "/dev/null", "/dev/null");
        s.env_remove.push("PATH".into());
        s.env.insert("HOME".into(), "/elsewhere".into());
        s.env.insert("AORTA_ENV_TEST".into(), "1".into());
        s.env.insert(TOKEN_VAR.into(), "forged".into());
        // Twice: the inherited entries are read once and must not be changed by a command.
        for token in ["7.1", "7.2"] {
            let c = command_of(&s, token).unwrap();
            let entries: Vec<String> = c
                .envp()
                .iter()
                .map(|e| e.to_string_lossy().into_owned())
                .collect();
            let names: Vec<&str> = entries
                .iter()
                .map(|e| e.split('=').next().unwrap())
                .collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(names, sorted, "sorted by name, each name once");
            assert!(
                entries.contains(&"HOME=/elsewhere".to_string()),
                "{entries:?}"
            );
            assert!(entries.contains(&"AORTA_ENV_TEST=1".to_string()));
            assert!(
                entries.contains(&format!("{TOKEN_VAR}={token}")),
                "the token wins"
            );
            assert!(!names.contains(&"PATH"), "removed");
            let inherited = std::env::vars_os()
                .filter(|(k, _)| {
                    !["PATH", "HOME", "AORTA_ENV_TEST", TOKEN_VAR]
                        .contains(&k.to_str().unwrap_or(""))
                })
                .count();
            assert_eq!(entries.len(), inherited + 3);
        }
    }

    #[test]
    fn posix_names() {
        for ok in ["A", "_", "a_b9", "CUDA_VISIBLE_DEVICES"] {
            assert!(is_posix_name(ok), "{ok}");
        }
        for bad in ["", "9A", "A=B", "A B", "A-B", "É", "A\0"] {
            assert!(!is_posix_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn validation_errors_not_panics() {
        let mut s = ProcessSpec::new(["true"], "/dev/null", "/dev/null");
        assert!(s.validate().is_ok());
        s.env.insert("A=B".into(), "x".into());
        assert!(matches!(s.validate(), Err(SpawnError::BadEnvName(_))));
        s.env.clear();
        s.env.insert("A".into(), "x\0y".into());
        assert!(matches!(s.validate(), Err(SpawnError::NulInEnvValue(_))));
        s.env.clear();
        s.env_remove.push(String::new());
        assert!(matches!(s.validate(), Err(SpawnError::BadEnvName(_))));
        s.env_remove.clear();
        s.argv.push("a\0b".into());
        assert!(matches!(
            s.validate(),
            Err(SpawnError::NulInArg { index: 1 })
        ));
        s.argv.clear();
        assert!(matches!(s.validate(), Err(SpawnError::EmptyArgv)));
        let mut s = ProcessSpec::new(["true"], "/dev/null", "/dev/null");
        s.cwd = Some("/definitely/not/here".into());
        assert!(matches!(s.validate(), Err(SpawnError::BadCwd(_))));
    }
}
