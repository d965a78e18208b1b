//! The hang monitor: a thread per trial that samples the whole process tree and latches
//! `hang_detected` when the trial looks stuck.
//!
//! Signals (each "idle" for at least `window`):
//! - `output_silent`: neither the stdout nor the stderr file grew;
//! - `io_idle`: `rchar + wchar` summed over every live member of the tree did not change
//!   (a member whose `/proc/<pid>/io` is unreadable makes the sample unknown, never idle);
//! - `cpu_idle`: `utime + stime` summed over the tree advanced by less than 1 % of the window;
//! - `gpu_idle`: the caller's callback (`None` = unknown = not idle).
//!
//! Predicate ([`hang_predicate`]): inside the grace period, never; after it, at least two
//! signals idle — unless the tree measurably burns CPU (`cpu_idle == Some(false)`) and
//! `cpu_veto` is on (the default): a busy loop is not a hang.
//!
//! A spinning hang (CUDA's default synchronize, an NCCL collective that never completes) is
//! silent but busy, so the veto rules it out. Then the stacks decide ([`crate::stacks`]): while
//! the tree is silent and vetoed, its stacks are sampled a window apart, and the same thread
//! waiting in the same frames in both samples latches the hang.

use crate::procfs;
use crate::stacks::{self, ProcessStacks};
use crate::tree::{ProcId, Tree};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A GPU activity probe: `Some(true)` = the trial's GPUs are idle, `Some(false)` = busy,
/// `None` = unknown (never counts as idle). Called once per poll on the monitor thread.
pub type GpuIdleFn = Arc<dyn Fn() -> Option<bool> + Send + Sync>;

/// Hang monitor settings.
#[derive(Clone)]
pub struct HangConfig {
    /// How long a signal must stay idle to vote (default 30 s).
    pub window: Duration,
    /// No hang is declared before this much time since spawn (default 60 s).
    pub grace: Duration,
    /// Sampling interval (default 1 s; AORTA used 5 s).
    pub poll: Duration,
    /// Tear the tree down (like a timeout) once a hang latches (default false: AORTA only
    /// flagged, and the hang then cost the whole timeout).
    pub kill_on_hang: bool,
    /// A tree that measurably burns CPU is never declared hung (default true). Off, the plain
    /// two-of-four vote applies, which also catches spin-waiting hangs (NCCL, CUDA sync spin)
    /// but flags busy loops that print nothing.
    pub cpu_veto: bool,
    /// Optional GPU idleness probe (e.g. NVML utilisation of the leased devices).
    pub gpu_idle: Option<GpuIdleFn>,
    /// Sample stacks of a silent tree the CPU veto holds back, and keep stacks of a latched
    /// hang (default true; a no-op where no sampler is installed).
    pub stack_sampling: bool,
    /// Directories searched for `py-spy` before `PATH` (e.g. the configured Python's `bin`).
    pub py_spy_dirs: Vec<PathBuf>,
}

impl Default for HangConfig {
    fn default() -> Self {
        HangConfig {
            window: Duration::from_secs(30),
            grace: Duration::from_secs(60),
            poll: Duration::from_secs(1),
            kill_on_hang: false,
            cpu_veto: true,
            gpu_idle: None,
            stack_sampling: true,
            py_spy_dirs: Vec::new(),
        }
    }
}

impl fmt::Debug for HangConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HangConfig")
            .field("window", &self.window)
            .field("grace", &self.grace)
            .field("poll", &self.poll)
            .field("kill_on_hang", &self.kill_on_hang)
            .field("cpu_veto", &self.cpu_veto)
            .field("gpu_idle", &self.gpu_idle.as_ref().map(|_| "<fn>"))
            .field("stack_sampling", &self.stack_sampling)
            .field("py_spy_dirs", &self.py_spy_dirs)
            .finish()
    }
}

/// The four signals at one poll. `None` = unknown, which never votes idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HangSignals {
    pub output_silent: bool,
    pub io_idle: Option<bool>,
    pub cpu_idle: Option<bool>,
    pub gpu_idle: Option<bool>,
}

impl HangSignals {
    /// How many signals say idle.
    pub fn idle_votes(&self) -> usize {
        [
            Some(self.output_silent),
            self.io_idle,
            self.cpu_idle,
            self.gpu_idle,
        ]
        .into_iter()
        .filter(|s| *s == Some(true))
        .count()
    }
}

/// The hang predicate, pure: `elapsed < grace` → false; else at least two idle votes, and,
/// with `cpu_veto`, the tree not measurably busy on CPU.
pub fn hang_predicate(
    elapsed: Duration,
    grace: Duration,
    signals: &HangSignals,
    cpu_veto: bool,
) -> bool {
    if elapsed < grace {
        return false;
    }
    if cpu_veto && signals.cpu_idle == Some(false) {
        return false;
    }
    signals.idle_votes() >= 2
}

/// One poll's raw readings of the tree, as monotone counters since spawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HangSample {
    /// Bytes in the stdout and stderr files together.
    pub output_bytes: u64,
    /// Cumulative `rchar + wchar` over the tree; `None` when some member was unreadable.
    pub io_chars: Option<u64>,
    /// Cumulative `utime + stime` over the tree; `None` when unknown.
    pub cpu_time: Option<Duration>,
    pub gpu_idle: Option<bool>,
}

/// Turns a stream of samples into signals and latches the first hang. Pure: time is the
/// `elapsed` the caller passes (since spawn, when the counters were all zero).
#[derive(Debug, Clone)]
pub struct HangDetector {
    window: Duration,
    grace: Duration,
    cpu_veto: bool,
    last_output: u64,
    output_changed_at: Duration,
    last_io: Option<u64>,
    io_changed_at: Duration,
    cpu_history: VecDeque<(Duration, Duration)>,
    latched_at: Option<Duration>,
}

impl HangDetector {
    pub fn new(window: Duration, grace: Duration, cpu_veto: bool) -> Self {
        HangDetector {
            window,
            grace,
            cpu_veto,
            last_output: 0,
            output_changed_at: Duration::ZERO,
            last_io: None,
            io_changed_at: Duration::ZERO,
            cpu_history: VecDeque::from([(Duration::ZERO, Duration::ZERO)]),
            latched_at: None,
        }
    }

    pub fn from_config(cfg: &HangConfig) -> Self {
        Self::new(cfg.window, cfg.grace, cfg.cpu_veto)
    }

    /// Feeds one sample taken `elapsed` after spawn; returns the signals it yields. Latches
    /// the hang the first time the predicate holds.
    pub fn observe(&mut self, elapsed: Duration, sample: &HangSample) -> HangSignals {
        if sample.output_bytes != self.last_output {
            self.last_output = sample.output_bytes;
            self.output_changed_at = elapsed;
        }
        let output_silent = elapsed.saturating_sub(self.output_changed_at) >= self.window;

        let io_idle = match sample.io_chars {
            Some(v) => {
                if self.last_io != Some(v) {
                    self.last_io = Some(v);
                    self.io_changed_at = elapsed;
                }
                Some(elapsed.saturating_sub(self.io_changed_at) >= self.window)
            }
            None => {
                // Unknown: can't vote now, and the idle stretch restarts from here.
                self.last_io = None;
                self.io_changed_at = elapsed;
                None
            }
        };

        let cpu_idle = sample.cpu_time.and_then(|cpu| {
            self.cpu_history.push_back((elapsed, cpu));
            let horizon = elapsed.checked_sub(self.window)?;
            // The newest sample at or before `elapsed - window` is the reference; older ones go.
            while self.cpu_history.len() > 1 && self.cpu_history[1].0 <= horizon {
                self.cpu_history.pop_front();
            }
            let &(t_ref, cpu_ref) = self.cpu_history.front()?;
            if t_ref > horizon {
                return None;
            }
            Some(cpu.saturating_sub(cpu_ref) < self.window / 100)
        });

        let signals = HangSignals {
            output_silent,
            io_idle,
            cpu_idle,
            gpu_idle: sample.gpu_idle,
        };
        if self.latched_at.is_none() && hang_predicate(elapsed, self.grace, &signals, self.cpu_veto)
        {
            self.latched_at = Some(elapsed);
        }
        signals
    }

    /// When the hang latched, if it did.
    pub fn latched_at(&self) -> Option<Duration> {
        self.latched_at
    }

    /// Latches now on outside evidence (the stacks), unless already latched.
    pub fn latch(&mut self, elapsed: Duration) {
        self.latched_at.get_or_insert(elapsed);
    }

    /// Since when neither the output nor the tree's I/O moved: where a hang began, as far as
    /// the counters tell.
    pub fn quiet_since(&self) -> Duration {
        self.output_changed_at.max(self.io_changed_at)
    }
}

/// What the monitor knows about a latched hang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HangReport {
    /// Since spawn: when the output and the tree's I/O last moved.
    pub quiet_since: Duration,
    /// Since spawn: when the hang latched (detection time is `latched_after - quiet_since`).
    pub latched_after: Duration,
    /// `idle vote`, or the waiting frame the stacks showed twice (`pid 12 thread 12: ncclGroupEnd`).
    pub evidence: String,
    /// The stack samples (what each sampler printed), when a sampler ran.
    pub stacks: Option<String>,
}

/// The stack evidence's state: the earlier sample of a silent, busy tree.
#[derive(Debug, Default)]
pub(crate) struct StackWatch {
    first: Option<(Duration, Vec<ProcessStacks>)>,
}

impl StackWatch {
    /// Feeds one poll. `quiet`: no output or I/O for a while (sampling may start); `suspect`:
    /// silent for a window past the grace period but held back by the CPU veto (evidence may
    /// latch). Samples (through `take`) at the start of a quiet stretch and a `window` later;
    /// returns the evidence and both samples' text when, at a suspect poll, the same thread
    /// waits in the same frames. A poll that is not quiet forgets the earlier sample.
    pub fn observe(
        &mut self,
        elapsed: Duration,
        window: Duration,
        quiet: bool,
        suspect: bool,
        take: impl FnOnce() -> Vec<ProcessStacks>,
    ) -> Option<(String, String)> {
        if !quiet {
            self.first = None;
            return None;
        }
        match self.first.take() {
            None => {
                let s = take();
                self.first = (!s.is_empty()).then_some((elapsed, s));
                None
            }
            Some((t, earlier)) if elapsed.saturating_sub(t) >= window => {
                let later = take();
                if let Some(ev) = suspect
                    .then(|| stacks::evidence(&earlier, &later))
                    .flatten()
                {
                    let text =
                        stacks::render(&format!("sample 1 at {:.1} s", t.as_secs_f64()), &earlier)
                            + &stacks::render(
                                &format!("sample 2 at {:.1} s", elapsed.as_secs_f64()),
                                &later,
                            );
                    return Some((ev, text));
                }
                self.first = (!later.is_empty()).then_some((elapsed, later));
                None
            }
            kept => {
                self.first = kept;
                None
            }
        }
    }
}

/// How long a tree must be quiet before its stacks are first sampled: a quarter window, so a
/// healthy job that pauses its output briefly is not sampled, and a hang is still caught within
/// `window + grace` of its start whenever `grace >= window / 4` (the defaults: 30 s, 60 s).
fn early_sample(cfg: &HangConfig) -> Duration {
    (cfg.window / 4).max(cfg.poll)
}

/// Samples the live members of the tree, oldest first, at most [`MAX_SAMPLED`] of them and
/// none started after [`SAMPLE_BUDGET`] has passed (gdb can take seconds per process).
fn sample_tree(samplers: &[stacks::Sampler], tree: &Tree) -> Vec<ProcessStacks> {
    let mut live = tree.live();
    live.sort_by_key(|p| p.start_time);
    let start = Instant::now();
    live.into_iter()
        .take(MAX_SAMPLED)
        .take_while(|_| start.elapsed() < SAMPLE_BUDGET)
        .filter_map(|p| stacks::sample(samplers, p))
        .collect()
}

/// A tree of hundreds of processes is sampled in part: the launcher and the first ranks
/// are where a collective hang shows.
const MAX_SAMPLED: usize = 16;
/// Time after which no further process of the tree is sampled in one round.
const SAMPLE_BUDGET: Duration = Duration::from_secs(30);

/// Says once per aorta process that spinning hangs cannot be told from busy loops here.
fn note_no_sampler() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "aorta: hang monitor: no stack sampler (py-spy, eu-stack or gdb) found; a silent trial that spins the CPU \
             (CUDA synchronize, NCCL collective) is not recognised as a hang"
        );
    }
}

/// Reads the tree's counters and keeps them monotone across processes coming and going:
/// each member contributes what it did since it was first seen (all of it, for a new one).
struct Sampler {
    io_prev: HashMap<ProcId, u64>,
    cpu_prev: HashMap<ProcId, u64>,
    io_total: u64,
    cpu_ticks_total: u64,
}

impl Sampler {
    fn new() -> Self {
        Sampler {
            io_prev: HashMap::new(),
            cpu_prev: HashMap::new(),
            io_total: 0,
            cpu_ticks_total: 0,
        }
    }

    fn sample(&mut self, tree: &Tree, outputs: &[PathBuf], gpu: Option<&GpuIdleFn>) -> HangSample {
        tree.refresh(procfs::SHARED_SCAN_AGE);
        let mut io_unknown = false;
        for p in tree.live() {
            let Some(st) = procfs::read_stat(p.pid as i32).filter(|s| s.start_time == p.start_time)
            else {
                continue;
            };
            if st.is_zombie() {
                continue;
            }
            let prev = self.cpu_prev.insert(p, st.cpu_ticks).unwrap_or(0);
            self.cpu_ticks_total += st.cpu_ticks.saturating_sub(prev);
            match procfs::read_io_chars(p.pid as i32) {
                Ok(v) => {
                    let prev = self.io_prev.insert(p, v).unwrap_or(0);
                    self.io_total += v.saturating_sub(prev);
                }
                Err(procfs::IoUnread::Gone) => {}
                Err(procfs::IoUnread::Denied) => io_unknown = true,
            }
        }
        let output_bytes = outputs
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let tck = procfs::clock_ticks_per_sec();
        HangSample {
            output_bytes,
            io_chars: (!io_unknown).then_some(self.io_total),
            cpu_time: Some(Duration::from_micros(
                self.cpu_ticks_total.saturating_mul(1_000_000) / tck,
            )),
            gpu_idle: gpu.and_then(|f| f()),
        }
    }
}

/// A running monitor thread.
pub(crate) struct Monitor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    latched: Arc<AtomicBool>,
    report: Arc<Mutex<Option<HangReport>>>,
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<()>>,
    join_budget: Duration,
}

impl Monitor {
    pub fn start(
        cfg: &HangConfig,
        tree: Arc<Tree>,
        outputs: Vec<PathBuf>,
        spawned_at: Instant,
    ) -> Monitor {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let latched = Arc::new(AtomicBool::new(false));
        let report = Arc::new(Mutex::new(None));
        let (tx, rx) = mpsc::channel();
        let cfg2 = cfg.clone();
        let (stop2, latched2, report2) =
            (Arc::clone(&stop), Arc::clone(&latched), Arc::clone(&report));
        let poll = cfg.poll.max(Duration::from_millis(10));
        let handle = std::thread::Builder::new()
            .name("aorta-hang".into())
            .spawn(move || {
                let mut det = HangDetector::from_config(&cfg2);
                let mut sampler = Sampler::new();
                let mut watch = StackWatch::default();
                let mut samplers: Option<Vec<stacks::Sampler>> = None;
                // Nothing can latch before the grace period ends, and a signal needs one window
                // of history: sleep until then, so short trials never pay for /proc scans
                // (`run` starts this thread no earlier, so this is usually no wait at all).
                let quiet = (spawned_at + cfg2.grace.saturating_sub(cfg2.window))
                    .saturating_duration_since(Instant::now());
                if !quiet.is_zero() {
                    let (lock, cv) = &*stop2;
                    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (guard, _) = cv
                        .wait_timeout_while(guard, quiet, |stopped| !*stopped)
                        .unwrap_or_else(|p| p.into_inner());
                    if *guard {
                        let _ = tx.send(());
                        return;
                    }
                }
                loop {
                    let sample = sampler.sample(&tree, &outputs, cfg2.gpu_idle.as_ref());
                    let elapsed = spawned_at.elapsed();
                    let signals = det.observe(elapsed, &sample);
                    let mut found: Option<(String, Option<String>)> = None;
                    if det.latched_at().is_some() {
                        // Keep what the hung tree was doing (one sample), when a sampler exists.
                        let stacks = cfg2.stack_sampling.then(|| {
                            let s =
                                samplers.get_or_insert_with(|| stacks::discover(&cfg2.py_spy_dirs));
                            sample_tree(s, &tree)
                        });
                        let text = stacks
                            .filter(|s| !s.is_empty())
                            .map(|s| stacks::render("at detection", &s));
                        found = Some(("idle vote".into(), text));
                    } else if cfg2.stack_sampling {
                        let suspect = elapsed >= cfg2.grace
                            && signals.output_silent
                            && signals.io_idle == Some(true)
                            && signals.cpu_idle == Some(false)
                            && cfg2.cpu_veto;
                        // The first sample comes early in a quiet stretch, before the tree counts
                        // as suspect (a window of silence), so the second one a window later
                        // already decides: a spinning hang latches about `window * 5/4` after it
                        // began, not two windows after.
                        let quiet = cfg2.cpu_veto
                            && elapsed.saturating_sub(det.quiet_since()) >= early_sample(&cfg2);
                        let s: &[stacks::Sampler] = if quiet || suspect {
                            samplers.get_or_insert_with(|| stacks::discover(&cfg2.py_spy_dirs))
                        } else {
                            &[]
                        };
                        if suspect && s.is_empty() {
                            note_no_sampler();
                        }
                        let usable = !s.is_empty();
                        if let Some((ev, text)) = watch.observe(
                            elapsed,
                            cfg2.window,
                            (quiet || suspect) && usable,
                            suspect && usable,
                            || sample_tree(s, &tree),
                        ) {
                            det.latch(elapsed);
                            found = Some((format!("stacks: {ev}"), Some(text)));
                        }
                    }
                    if let Some((evidence, stacks)) = found {
                        let latched_after = det.latched_at().unwrap_or(elapsed);
                        *report2.lock().unwrap_or_else(|p| p.into_inner()) = Some(HangReport {
                            quiet_since: det.quiet_since(),
                            latched_after,
                            evidence,
                            stacks,
                        });
                        latched2.store(true, Ordering::SeqCst);
                        break;
                    }
                    let (lock, cv) = &*stop2;
                    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (guard, _) = cv
                        .wait_timeout_while(guard, poll, |stopped| !*stopped)
                        .unwrap_or_else(|p| p.into_inner());
                    if *guard {
                        break;
                    }
                }
                let _ = tx.send(());
            })
            .ok();
        Monitor {
            stop,
            latched,
            report,
            done: rx,
            handle,
            join_budget: poll + Duration::from_secs(1),
        }
    }

    pub fn latched(&self) -> bool {
        self.latched.load(Ordering::SeqCst)
    }

    /// Stops the thread and returns the hang, if one latched. A thread stuck in the GPU
    /// callback or a stack dump is waited for at most one poll plus a second, then left to
    /// finish on its own (a hang it latches later is not reported).
    pub fn stop(mut self) -> Option<HangReport> {
        {
            let (lock, cv) = &*self.stop;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            if self.done.recv_timeout(self.join_budget).is_ok() || h.is_finished() {
                let _ = h.join();
            }
        }
        if !self.latched() {
            return None;
        }
        self.report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn quiet(cpu: Duration) -> HangSample {
        HangSample {
            output_bytes: 0,
            io_chars: Some(100),
            cpu_time: Some(cpu),
            gpu_idle: None,
        }
    }

    #[test]
    fn predicate_grace_and_votes() {
        let two = HangSignals {
            output_silent: true,
            io_idle: Some(true),
            cpu_idle: None,
            gpu_idle: None,
        };
        let one = HangSignals {
            output_silent: true,
            io_idle: Some(false),
            cpu_idle: None,
            gpu_idle: None,
        };
        assert!(
            !hang_predicate(secs(59), secs(60), &two, true),
            "inside grace nothing fires"
        );
        assert!(
            hang_predicate(secs(60), secs(60), &two, true),
            "fires exactly at elapsed == grace"
        );
        assert!(hang_predicate(secs(61), secs(60), &two, true));
        assert!(
            !hang_predicate(secs(600), secs(60), &one, true),
            "one signal never fires"
        );
        let unknowns = HangSignals {
            output_silent: true,
            io_idle: None,
            cpu_idle: None,
            gpu_idle: None,
        };
        assert!(
            !hang_predicate(secs(600), secs(0), &unknowns, true),
            "unknown never votes idle"
        );
        let gpu_and_cpu = HangSignals {
            output_silent: false,
            io_idle: Some(false),
            cpu_idle: Some(true),
            gpu_idle: Some(true),
        };
        assert!(hang_predicate(secs(600), secs(0), &gpu_and_cpu, true));
        let busy = HangSignals {
            output_silent: true,
            io_idle: Some(true),
            cpu_idle: Some(false),
            gpu_idle: Some(true),
        };
        assert!(!hang_predicate(secs(600), secs(0), &busy, true), "cpu veto");
        assert!(
            hang_predicate(secs(600), secs(0), &busy, false),
            "plain vote without the veto"
        );
    }

    #[test]
    fn detector_one_signal_never_fires() {
        // Output stays silent, but io moves every second and cpu is unknown.
        let mut d = HangDetector::new(secs(5), secs(0), true);
        for t in 0..120 {
            let s = HangSample {
                output_bytes: 0,
                io_chars: Some(t * 10),
                cpu_time: None,
                gpu_idle: None,
            };
            let sig = d.observe(secs(t), &s);
            if t >= 5 {
                assert!(sig.output_silent);
            }
            assert_eq!(sig.io_idle, Some(false));
        }
        assert_eq!(d.latched_at(), None);
    }

    #[test]
    fn detector_two_signals_fire_after_grace_not_inside() {
        let mut d = HangDetector::new(secs(5), secs(20), true);
        for t in 0..=30 {
            d.observe(secs(t), &quiet(Duration::ZERO));
            if t < 20 {
                assert_eq!(d.latched_at(), None, "t={t}");
            }
        }
        // Silent/idle since the start: everything is ready by t=5 but grace holds until 20.
        assert_eq!(d.latched_at(), Some(secs(20)));
    }

    #[test]
    fn detector_fires_exactly_at_grace_boundary() {
        let mut d = HangDetector::new(secs(5), secs(10), true);
        d.observe(secs(0), &quiet(Duration::ZERO));
        let sig = d.observe(secs(9), &quiet(Duration::ZERO));
        assert_eq!(sig.idle_votes(), 3, "output, io, cpu idle");
        assert_eq!(d.latched_at(), None);
        d.observe(secs(10), &quiet(Duration::ZERO));
        assert_eq!(d.latched_at(), Some(secs(10)));
    }

    #[test]
    fn detector_window_restarts_on_activity() {
        let mut d = HangDetector::new(secs(5), secs(0), true);
        d.observe(secs(1), &quiet(Duration::ZERO));
        let mut s = quiet(Duration::ZERO);
        s.output_bytes = 10;
        s.io_chars = Some(200);
        d.observe(secs(3), &s);
        // Silent since t=3: not yet at t=7, yes at t=8.
        let sig = d.observe(secs(7), &s);
        assert!(!sig.output_silent && sig.io_idle == Some(false));
        assert_eq!(d.latched_at(), None);
        let sig = d.observe(secs(8), &s);
        assert!(sig.output_silent && sig.io_idle == Some(true));
        assert_eq!(d.latched_at(), Some(secs(8)));
    }

    #[test]
    fn detector_unreadable_io_never_votes_and_restarts() {
        let mut d = HangDetector::new(secs(5), secs(0), true);
        for t in 0..=10 {
            let mut s = quiet(Duration::ZERO);
            s.io_chars = None;
            s.cpu_time = None;
            let sig = d.observe(secs(t), &s);
            assert_eq!(sig.io_idle, None);
        }
        assert_eq!(d.latched_at(), None, "only output_silent could vote");
        // Readable again: the idle stretch counts from the first readable sample (t=15).
        let sig = d.observe(secs(15), &quiet(Duration::ZERO));
        assert_eq!(sig.io_idle, Some(false));
        let sig = d.observe(secs(19), &quiet(Duration::ZERO));
        assert_eq!(sig.io_idle, Some(false));
        let sig = d.observe(secs(20), &quiet(Duration::ZERO));
        assert_eq!(sig.io_idle, Some(true));
    }

    #[test]
    fn detector_cpu_busy_is_not_idle_and_vetoes() {
        let mut d = HangDetector::new(secs(5), secs(0), true);
        for t in 0..=20u64 {
            // Half a core: 500 ms of CPU per second, no output, no io.
            let sig = d.observe(secs(t), &quiet(S * t as u32 / 2));
            if t >= 5 {
                assert_eq!(sig.cpu_idle, Some(false), "t={t}");
                assert!(sig.output_silent && sig.io_idle == Some(true));
            } else {
                assert_eq!(sig.cpu_idle, None, "not a full window of history yet");
            }
        }
        assert_eq!(d.latched_at(), None);
        // The same with the veto off is the plain vote: output + io → hang.
        let mut d = HangDetector::new(secs(5), secs(0), false);
        for t in 0..=20u64 {
            d.observe(secs(t), &quiet(S * t as u32 / 2));
        }
        assert_eq!(d.latched_at(), Some(secs(5)));
    }

    #[test]
    fn detector_cpu_threshold_is_one_percent_of_window() {
        // Window 10 s → threshold 100 ms of CPU over the window.
        let mut d = HangDetector::new(secs(10), secs(0), true);
        d.observe(secs(0), &quiet(Duration::ZERO));
        let sig = d.observe(secs(10), &quiet(Duration::from_millis(99)));
        assert_eq!(sig.cpu_idle, Some(true));
        let mut d = HangDetector::new(secs(10), secs(0), true);
        d.observe(secs(0), &quiet(Duration::ZERO));
        let sig = d.observe(secs(10), &quiet(Duration::from_millis(100)));
        assert_eq!(sig.cpu_idle, Some(false));
    }

    fn waiting(pid: u32, frames: &[&str]) -> Vec<ProcessStacks> {
        let threads = vec![stacks::ThreadStack {
            tid: u64::from(pid),
            frames: frames.iter().map(|f| f.to_string()).collect(),
        }];
        vec![ProcessStacks {
            proc: ProcId { pid, start_time: 1 },
            sampler: stacks::SamplerKind::PySpy,
            text: frames.join("\n"),
            threads,
        }]
    }

    #[test]
    fn stack_watch_needs_two_samples_a_window_apart() {
        let mut w = StackWatch::default();
        let stuck = || waiting(7, &["all_reduce (train.py:3)", "<module> (train.py:9)"]);
        let mut taken = 0;
        let mut obs = |w: &mut StackWatch, t: u64, suspect: bool| {
            w.observe(secs(t), secs(5), suspect, suspect, || {
                taken += 1;
                stuck()
            })
        };
        assert_eq!(obs(&mut w, 10, true), None, "first sample");
        assert_eq!(obs(&mut w, 12, true), None, "not a window later yet");
        let (ev, text) = obs(&mut w, 15, true).unwrap();
        assert_eq!(ev, "pid 7 thread 7: all_reduce (train.py:3)");
        assert!(
            text.starts_with("=== sample 1 at 10.0 s: pid 7 (py-spy) ===\nall_reduce")
                && text.contains("=== sample 2 at 15.0 s"),
            "{text}"
        );
        assert_eq!(taken, 2, "sampled only at the start and a window later");
    }

    #[test]
    fn stack_watch_restarts_on_activity_and_on_moving_stacks() {
        let mut w = StackWatch::default();
        let at = |l: u32| waiting(7, &[&format!("all_reduce (train.py:{l})")]);
        assert_eq!(w.observe(secs(10), secs(5), true, true, || at(3)), None);
        // Output moved: the earlier sample is forgotten, the stretch starts over.
        assert_eq!(
            w.observe(secs(12), secs(5), false, false, || unreachable!()),
            None
        );
        assert_eq!(w.observe(secs(13), secs(5), true, true, || at(3)), None);
        // A window later the stack moved: no evidence, and the newer sample is the reference.
        assert_eq!(w.observe(secs(18), secs(5), true, true, || at(4)), None);
        assert!(w.observe(secs(23), secs(5), true, true, || at(4)).is_some());
        // A busy loop's stacks (no wait frame) never make evidence.
        let mut w = StackWatch::default();
        let busy = || waiting(8, &["<module> (loop.py:2)"]);
        for t in [10, 15, 20, 25] {
            assert_eq!(w.observe(secs(t), secs(5), true, true, busy), None);
        }
        // Nothing sampled (a sampler that failed): no reference is kept.
        let mut w = StackWatch::default();
        assert_eq!(w.observe(secs(10), secs(5), true, true, Vec::new), None);
        assert_eq!(
            w.observe(secs(15), secs(5), true, true, || at(3)),
            None,
            "this is the first usable sample"
        );
    }

    #[test]
    fn a_sample_from_early_in_the_quiet_stretch_lets_the_first_suspect_poll_decide() {
        let mut w = StackWatch::default();
        let stuck = || waiting(7, &["all_reduce (train.py:3)"]);
        // Quiet from 2.5 s (a quarter window): sampled, but not suspect before a window of
        // silence, so no evidence yet even a window later.
        assert_eq!(w.observe(secs(3), secs(10), true, false, stuck), None);
        assert_eq!(
            w.observe(secs(8), secs(10), true, false, || unreachable!()),
            None
        );
        // At 13 s the tree is suspect and the first sample is a window old: decided now.
        let (ev, _) = w.observe(secs(13), secs(10), true, true, stuck).unwrap();
        assert!(ev.contains("all_reduce"), "{ev}");
        // Without suspicion a window later, the newer sample becomes the reference instead.
        let mut w = StackWatch::default();
        assert_eq!(w.observe(secs(3), secs(10), true, false, stuck), None);
        assert_eq!(w.observe(secs(13), secs(10), true, false, stuck), None);
        assert!(w.observe(secs(23), secs(10), true, true, stuck).is_some());
    }

    #[test]
    fn latch_from_outside_and_quiet_since() {
        let mut d = HangDetector::new(secs(5), secs(0), true);
        let mut s = quiet(Duration::ZERO);
        s.output_bytes = 10;
        d.observe(secs(3), &s);
        assert_eq!(d.quiet_since(), secs(3));
        d.latch(secs(9));
        d.latch(secs(12));
        assert_eq!(d.latched_at(), Some(secs(9)), "the first latch stays");
    }
}
