//! The machine's capacity for trials: how many at once ([`Slots`]), which GPUs each may use
//! ([`Lease`]), and the device bookkeeping the [`crate::Pool`] schedules with.

use crate::run::ProcessSpec;
use std::collections::BTreeMap;

/// The machine's capacity: how many trials at once, and which GPU ids exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    jobs: usize,
    gpus: Vec<String>,
    trials_per_gpu: usize,
}

impl Slots {
    /// `jobs` (at least 1) concurrent trials; `gpus` the device ids to hand out (duplicates
    /// dropped). GPUs are exclusive: one trial per device.
    pub fn new(jobs: usize, gpus: Vec<String>) -> Self {
        let mut unique: Vec<String> = Vec::with_capacity(gpus.len());
        for g in gpus {
            if !unique.contains(&g) {
                unique.push(g);
            }
        }
        Slots {
            jobs: jobs.max(1),
            gpus: unique,
            trials_per_gpu: 1,
        }
    }

    /// Shared mode: up to `trials_per_gpu` (at least 1) trials may use one device at once.
    /// A trial still never gets the same device twice.
    pub fn share_gpus(mut self, trials_per_gpu: usize) -> Self {
        self.trials_per_gpu = trials_per_gpu.max(1);
        self
    }

    pub fn jobs(&self) -> usize {
        self.jobs
    }

    pub fn gpus(&self) -> &[String] {
        &self.gpus
    }

    pub fn trials_per_gpu(&self) -> usize {
        self.trials_per_gpu
    }

    /// Whether `request` can ever be granted.
    pub fn check(&self, request: SlotRequest) -> Result<(), SlotError> {
        if request.gpus > self.gpus.len() {
            return Err(SlotError::TooManyGpus {
                requested: request.gpus,
                available: self.gpus.len(),
            });
        }
        Ok(())
    }
}

/// What one trial needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotRequest {
    /// Devices (0 for a CPU trial).
    pub gpus: usize,
}

impl SlotRequest {
    pub fn cpu() -> Self {
        SlotRequest { gpus: 0 }
    }

    pub fn gpus(n: usize) -> Self {
        SlotRequest { gpus: n }
    }
}

/// A request that can never be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error("a trial asks for {requested} GPU(s) but only {available} are configured")]
    TooManyGpus { requested: usize, available: usize },
}

/// What a running trial was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) slot: usize,
    pub(crate) gpus: Vec<String>,
}

impl Lease {
    /// The worker slot (0..jobs) running the trial; unique among running trials (handy for
    /// per-slot ports or scratch directories).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The device ids granted, in the order configured.
    pub fn gpus(&self) -> &[String] {
        &self.gpus
    }

    /// `CUDA_VISIBLE_DEVICES` and `HIP_VISIBLE_DEVICES` (comma-joined ids) for a GPU trial;
    /// empty for a CPU trial, which keeps whatever visibility it inherits.
    pub fn env(&self) -> BTreeMap<String, String> {
        if self.gpus.is_empty() {
            return BTreeMap::new();
        }
        let ids = self.gpus.join(",");
        ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
            .into_iter()
            .map(|k| (k.to_string(), ids.clone()))
            .collect()
    }

    /// Merges [`env`](Self::env) into the spec; the lease wins over a cell's own value.
    pub fn apply(&self, spec: &mut ProcessSpec) {
        spec.env.extend(self.env());
    }
}

/// Device bookkeeping: how many trials use each device, up to `cap`.
#[derive(Debug)]
pub(crate) struct Devices {
    load: Vec<usize>,
    cap: usize,
}

impl Devices {
    pub(crate) fn new(devices: usize, cap: usize) -> Self {
        Devices {
            load: vec![0; devices],
            cap,
        }
    }

    /// Whether `n` devices have room.
    pub(crate) fn fits(&self, n: usize) -> bool {
        self.load.iter().filter(|&&l| l < self.cap).count() >= n
    }

    /// The `n` least-loaded devices with room, or `None`.
    pub(crate) fn acquire(&mut self, n: usize) -> Option<Vec<usize>> {
        let mut free: Vec<usize> = (0..self.load.len())
            .filter(|&i| self.load[i] < self.cap)
            .collect();
        if free.len() < n {
            return None;
        }
        free.sort_by_key(|&i| (self.load[i], i));
        free.truncate(n);
        free.sort_unstable();
        for &i in &free {
            self.load[i] += 1;
        }
        Some(free)
    }

    pub(crate) fn release(&mut self, ids: &[usize]) {
        for &i in ids {
            self.load[i] = self.load[i].saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_exclusive_and_least_loaded() {
        let mut d = Devices {
            load: vec![0; 3],
            cap: 1,
        };
        assert_eq!(d.acquire(2), Some(vec![0, 1]));
        assert_eq!(d.acquire(2), None);
        assert_eq!(d.acquire(1), Some(vec![2]));
        d.release(&[0]);
        assert_eq!(d.acquire(1), Some(vec![0]));
        let mut shared = Devices {
            load: vec![0; 2],
            cap: 2,
        };
        assert_eq!(shared.acquire(1), Some(vec![0]));
        assert_eq!(shared.acquire(1), Some(vec![1]));
        assert_eq!(shared.acquire(2), Some(vec![0, 1]));
        assert_eq!(shared.acquire(1), None);
    }

    #[test]
    fn lease_env() {
        let l = Lease {
            slot: 0,
            gpus: vec!["2".into(), "5".into()],
        };
        let env = l.env();
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "2,5");
        assert_eq!(env["HIP_VISIBLE_DEVICES"], "2,5");
        assert!(Lease {
            slot: 1,
            gpus: vec![]
        }
        .env()
        .is_empty());
        let mut spec = ProcessSpec::new(["true"], "/dev/null", "/dev/null");
        spec.env.insert("CUDA_VISIBLE_DEVICES".into(), "7".into());
        l.apply(&mut spec);
        assert_eq!(spec.env["CUDA_VISIBLE_DEVICES"], "2,5");
    }

    #[test]
    fn slots_dedupe_and_clamp() {
        let s = Slots::new(0, vec!["0".into(), "0".into(), "1".into()]);
        assert_eq!(s.jobs(), 1);
        assert_eq!(s.gpus(), ["0", "1"]);
        assert_eq!(
            s.check(SlotRequest::gpus(3)),
            Err(SlotError::TooManyGpus {
                requested: 3,
                available: 2
            })
        );
    }
}
