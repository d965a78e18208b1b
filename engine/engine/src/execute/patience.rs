//! Slurm's controller goes away now and then (a restart, an upgrade, a failover, a busy
//! moment answered with "Socket timed out"): while tasks live on the cluster that is never a
//! reason to end a build. Calls that fail so are tried again after the poll interval, doubling
//! up to `max_backoff` (default 60 s; submitit goes to 600 s, Snakemake's Slurm plugin 180 s),
//! with one line when the outage starts, one a minute while it lasts, one when it ends.

use aorta_exec::CancelToken;
use aorta_slurm::{SlurmConfig, SlurmError};
use std::time::{Duration, Instant};

/// The state of an outage, across calls (the line that ends it is said by whichever call
/// gets through first).
#[derive(Default)]
pub(crate) struct Patience {
    outage: Option<Outage>,
}

struct Outage {
    since: Instant,
    said: Instant,
}

impl Patience {
    /// `call` until it answers, fails for good (`transient` says no), or Ctrl-C (`Ok(None)`).
    /// `call` gets the number of the try, from 0.
    pub fn call<T>(
        &mut self,
        cfg: &SlurmConfig,
        cancel: &CancelToken,
        what: &str,
        transient: impl Fn(&SlurmError) -> bool,
        mut call: impl FnMut(u32) -> Result<T, SlurmError>,
    ) -> Result<Option<T>, SlurmError> {
        let mut delay = cfg.poll_interval;
        for attempt in 0.. {
            match call(attempt) {
                Ok(v) => {
                    if let Some(o) = self.outage.take() {
                        eprintln!(
                            "aorta: Slurm answers again, after {:.0} s",
                            o.since.elapsed().as_secs_f64()
                        );
                    }
                    return Ok(Some(v));
                }
                Err(e) if transient(&e) => {
                    let now = Instant::now();
                    match &mut self.outage {
                        None => {
                            eprintln!(
                                "aorta: Slurm does not answer ({what}: {e}); trying again, every {} s at most, until it does (Ctrl-C stops)",
                                cfg.max_backoff.as_secs_f64()
                            );
                            self.outage = Some(Outage {
                                since: now,
                                said: now,
                            });
                        }
                        Some(o) if now.duration_since(o.said) >= Duration::from_secs(60) => {
                            eprintln!(
                                "aorta: Slurm still does not answer after {:.0} s ({what}: {e})",
                                o.since.elapsed().as_secs_f64()
                            );
                            o.said = now;
                        }
                        Some(_) => {}
                    }
                    let until = now + delay;
                    while Instant::now() < until {
                        if cancel.is_cancelled() {
                            return Ok(None);
                        }
                        std::thread::sleep(Duration::from_millis(50).min(delay));
                    }
                    delay = (delay * 2).min(cfg.max_backoff);
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop above only ends by returning")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SlurmConfig {
        let mut c = aorta_slurm::Settings::default().resolve().unwrap();
        c.poll_interval = Duration::from_millis(10);
        c.max_backoff = Duration::from_millis(40);
        c
    }

    fn down() -> SlurmError {
        SlurmError::Failed {
            command: "squeue".into(),
            status: "exit status: 1".into(),
            stderr: "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
                .into(),
        }
    }

    #[test]
    fn transient_failures_back_off_and_the_answer_comes_through() {
        let cancel = CancelToken::default();
        let mut p = Patience::default();
        let t0 = Instant::now();
        let got = p
            .call(&cfg(), &cancel, "squeue", SlurmError::is_transient, |n| {
                if n < 4 {
                    Err(down())
                } else {
                    Ok(n)
                }
            })
            .unwrap();
        assert_eq!(got, Some(4));
        // 10 + 20 + 40 + 40 ms: doubled, then capped.
        assert!(
            t0.elapsed() >= Duration::from_millis(110),
            "{:?}",
            t0.elapsed()
        );
        assert!(p.outage.is_none());
    }

    #[test]
    fn a_refusal_ends_at_once_and_ctrl_c_ends_the_wait() {
        let cancel = CancelToken::default();
        let mut p = Patience::default();
        let refused = p.call(&cfg(), &cancel, "sbatch", SlurmError::is_transient, |_| {
            Err::<(), _>(SlurmError::NoJobId(String::new()))
        });
        assert!(refused.is_err());
        cancel.cancel();
        let stopped = p.call(
            &cfg(),
            &cancel,
            "squeue",
            |_| true,
            |_| Err::<(), _>(down()),
        );
        assert!(matches!(stopped, Ok(None)));
    }
}
