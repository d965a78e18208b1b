//! Cancellation: a token every running trial watches, and the Ctrl-C / SIGTERM handler that
//! trips it.

use crate::tree;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A shared cancellation flag with two levels.
///
/// - [`cancel`](Self::cancel): stop — every [`run`](crate::run) watching the token tears its
///   trial down gracefully (SIGTERM, `kill_grace`, SIGKILL) and returns `cancelled: true`;
///   no new trial is launched.
/// - [`force`](Self::force): stop now — graceful waits are cut short and trees are SIGKILLed.
///
/// Cloning shares the flag. Waiting is on a condvar, so a cancel wakes waiters at once.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Inner>);

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    forced: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests a graceful stop.
    pub fn cancel(&self) {
        self.set(false);
    }

    /// Requests an immediate stop (implies [`cancel`](Self::cancel)).
    pub fn force(&self) {
        self.set(true);
    }

    fn set(&self, force: bool) {
        let _g = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.0.cancelled.store(true, Ordering::SeqCst);
        if force {
            self.0.forced.store(true, Ordering::SeqCst);
        }
        self.0.cv.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    pub fn is_forced(&self) -> bool {
        self.0.forced.load(Ordering::SeqCst)
    }

    /// Sleeps up to `timeout`, waking early on cancel; returns whether the token is cancelled.
    pub fn wait_cancelled(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.is_cancelled())
    }

    /// Sleeps up to `timeout`, waking early on force; returns whether the token is forced.
    pub fn wait_forced(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.is_forced())
    }

    fn wait_until(&self, timeout: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if done() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = self
                .0
                .cv
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .field("forced", &self.is_forced())
            .finish()
    }
}

/// Installs the process-wide SIGINT/SIGTERM handler and returns its token (the same token on
/// every call).
///
/// - 1st signal: the token is cancelled; each running trial's tree is torn down
///   SIGTERM → `kill_grace` → SIGKILL and its `run` returns `cancelled: true`.
/// - 2nd signal: the token is forced and every live trial tree is SIGKILLed at once
///   ([`kill_all_trials`]).
/// - 3rd signal: aorta exits with status 130 (escape hatch if the caller stopped polling).
///
/// Trials run in their own sessions, so the terminal's Ctrl-C reaches only aorta; this handler
/// is what forwards it to them. Handling runs on a helper thread, not in signal context.
pub fn install_interrupt_handler() -> io::Result<CancelToken> {
    static INSTALLED: Mutex<Option<CancelToken>> = Mutex::new(None);
    let mut slot = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(token) = slot.as_ref() {
        return Ok(token.clone());
    }
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])?;
    crate::spawn::forget_signals_to_reset();
    let token = CancelToken::new();
    let t = token.clone();
    std::thread::Builder::new()
        .name("aorta-interrupt".into())
        .spawn(move || {
            let mut count = 0u32;
            for _sig in signals.forever() {
                count += 1;
                match count {
                    1 => t.cancel(),
                    2 => {
                        t.force();
                        kill_all_trials();
                    }
                    _ => std::process::exit(130),
                }
            }
        })?;
    *slot = Some(token.clone());
    Ok(token)
}

/// SIGKILLs every live trial tree of this process now (freeze with SIGSTOP, rescan, SIGKILL).
/// Each trial's `run` then reaps its processes and returns. Returns how many trees it hit.
pub fn kill_all_trials() -> usize {
    let trees = tree::registered();
    for t in &trees {
        t.freeze_and_kill();
    }
    trees.len()
}

/// How many trials of this process are running now.
pub fn live_trials() -> usize {
    tree::registered().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_levels_and_wakeup() {
        let t = CancelToken::new();
        assert!(!t.is_cancelled() && !t.is_forced());
        assert!(!t.wait_cancelled(Duration::from_millis(10)));
        let t2 = t.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            t2.cancel();
        });
        let start = Instant::now();
        assert!(t.wait_cancelled(Duration::from_secs(10)));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!t.is_forced());
        assert!(!t.wait_forced(Duration::from_millis(10)));
        t.force();
        assert!(t.wait_forced(Duration::from_secs(1)));
        h.join().unwrap();
    }
}
