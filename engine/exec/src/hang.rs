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

use crate::procfs;
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
        [Some(self.output_silent), self.io_idle, self.cpu_idle, self.gpu_idle]
            .into_iter()
            .filter(|s| *s == Some(true))
            .count()
    }
}

/// The hang predicate, pure: `elapsed < grace` → false; else at least two idle votes, and,
/// with `cpu_veto`, the tree not measurably busy on CPU.
pub fn hang_predicate(elapsed: Duration, grace: Duration, signals: &HangSignals, cpu_veto: bool) -> bool {
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

        let signals = HangSignals { output_silent, io_idle, cpu_idle, gpu_idle: sample.gpu_idle };
        if self.latched_at.is_none() && hang_predicate(elapsed, self.grace, &signals, self.cpu_veto) {
            self.latched_at = Some(elapsed);
        }
        signals
    }

    /// When the hang latched, if it did.
    pub fn latched_at(&self) -> Option<Duration> {
        self.latched_at
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
        Sampler { io_prev: HashMap::new(), cpu_prev: HashMap::new(), io_total: 0, cpu_ticks_total: 0 }
    }

    fn sample(&mut self, tree: &Tree, outputs: &[PathBuf], gpu: Option<&GpuIdleFn>) -> HangSample {
        tree.refresh(procfs::SHARED_SCAN_AGE);
        let mut io_unknown = false;
        for p in tree.live() {
            let Some(st) = procfs::read_stat(p.pid as i32).filter(|s| s.start_time == p.start_time) else { continue };
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
        let output_bytes = outputs.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
        let tck = procfs::clock_ticks_per_sec();
        HangSample {
            output_bytes,
            io_chars: (!io_unknown).then_some(self.io_total),
            cpu_time: Some(Duration::from_micros(self.cpu_ticks_total.saturating_mul(1_000_000) / tck)),
            gpu_idle: gpu.and_then(|f| f()),
        }
    }
}

/// A running monitor thread.
pub(crate) struct Monitor {
    stop: Arc<(Mutex<bool>, Condvar)>,
    latched: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<()>>,
    join_budget: Duration,
}

impl Monitor {
    pub fn start(cfg: &HangConfig, tree: Arc<Tree>, outputs: Vec<PathBuf>, spawned_at: Instant) -> Monitor {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let latched = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let cfg2 = cfg.clone();
        let (stop2, latched2) = (Arc::clone(&stop), Arc::clone(&latched));
        let poll = cfg.poll.max(Duration::from_millis(10));
        let handle = std::thread::Builder::new()
            .name("aorta-hang".into())
            .spawn(move || {
                let mut det = HangDetector::from_config(&cfg2);
                let mut sampler = Sampler::new();
                // Nothing can latch before the grace period ends, and a signal needs one window
                // of history: sleep until then, so short trials never pay for /proc scans.
                let quiet = cfg2.grace.saturating_sub(cfg2.window);
                if !quiet.is_zero() {
                    let (lock, cv) = &*stop2;
                    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (guard, _) = cv.wait_timeout_while(guard, quiet, |stopped| !*stopped).unwrap_or_else(|p| p.into_inner());
                    if *guard {
                        let _ = tx.send(());
                        return;
                    }
                }
                loop {
                    let sample = sampler.sample(&tree, &outputs, cfg2.gpu_idle.as_ref());
                    det.observe(spawned_at.elapsed(), &sample);
                    if det.latched_at().is_some() {
                        latched2.store(true, Ordering::SeqCst);
                        break;
                    }
                    let (lock, cv) = &*stop2;
                    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (guard, _) = cv.wait_timeout_while(guard, poll, |stopped| !*stopped).unwrap_or_else(|p| p.into_inner());
                    if *guard {
                        break;
                    }
                }
                let _ = tx.send(());
            })
            .ok();
        Monitor { stop, latched, done: rx, handle, join_budget: poll + Duration::from_secs(1) }
    }

    pub fn latched(&self) -> bool {
        self.latched.load(Ordering::SeqCst)
    }

    /// Stops the thread and returns whether a hang latched. A thread stuck in the GPU callback
    /// is waited for at most one poll plus a second, then left to finish on its own.
    pub fn stop(mut self) -> bool {
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
        self.latched()
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
        HangSample { output_bytes: 0, io_chars: Some(100), cpu_time: Some(cpu), gpu_idle: None }
    }

    #[test]
    fn predicate_grace_and_votes() {
        let two = HangSignals { output_silent: true, io_idle: Some(true), cpu_idle: None, gpu_idle: None };
        let one = HangSignals { output_silent: true, io_idle: Some(false), cpu_idle: None, gpu_idle: None };
        assert!(!hang_predicate(secs(59), secs(60), &two, true), "inside grace nothing fires");
        assert!(hang_predicate(secs(60), secs(60), &two, true), "fires exactly at elapsed == grace");
        assert!(hang_predicate(secs(61), secs(60), &two, true));
        assert!(!hang_predicate(secs(600), secs(60), &one, true), "one signal never fires");
        let unknowns = HangSignals { output_silent: true, io_idle: None, cpu_idle: None, gpu_idle: None };
        assert!(!hang_predicate(secs(600), secs(0), &unknowns, true), "unknown never votes idle");
        let gpu_and_cpu = HangSignals { output_silent: false, io_idle: Some(false), cpu_idle: Some(true), gpu_idle: Some(true) };
        assert!(hang_predicate(secs(600), secs(0), &gpu_and_cpu, true));
        let busy = HangSignals { output_silent: true, io_idle: Some(true), cpu_idle: Some(false), gpu_idle: Some(true) };
        assert!(!hang_predicate(secs(600), secs(0), &busy, true), "cpu veto");
        assert!(hang_predicate(secs(600), secs(0), &busy, false), "plain vote without the veto");
    }

    #[test]
    fn detector_one_signal_never_fires() {
        // Output stays silent, but io moves every second and cpu is unknown.
        let mut d = HangDetector::new(secs(5), secs(0), true);
        for t in 0..120 {
            let s = HangSample { output_bytes: 0, io_chars: Some(t * 10), cpu_time: None, gpu_idle: None };
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
}
