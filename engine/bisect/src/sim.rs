//! A simulated [`Trials`]: each configuration fails with a given probability, trial by trial,
//! from a seeded hash, so a run is reproducible and a trial's outcome does not depend on when
//! it is asked for (as a stored trial does not). Tests and `bench/bisect` measure the searches'
//! probe counts and error rates with it.

use crate::judge::Trials;
use aorta_report::sequential::Outcome;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

pub struct Sim<C, F> {
    pub seed: u64,
    /// The failure probability of a configuration.
    pub rate: F,
    /// Trials run so far, by configuration (the most asked for).
    pub ran: BTreeMap<C, u32>,
}

impl<C: Clone + Ord + Hash + std::fmt::Debug, F: Fn(&C) -> f64> Sim<C, F> {
    pub fn new(seed: u64, rate: F) -> Sim<C, F> {
        Sim {
            seed,
            rate,
            ran: BTreeMap::new(),
        }
    }

    /// Every trial run, over all configurations.
    pub fn total_trials(&self) -> u64 {
        self.ran.values().map(|&n| u64::from(n)).sum()
    }

    fn draw(&self, c: &C, index: u32) -> f64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.seed, c, index).hash(&mut h);
        // splitmix64's finaliser over SipHash: uniform in [0, 1).
        let mut z = h.finish().wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl<C: Clone + Ord + Hash + std::fmt::Debug, F: Fn(&C) -> f64> Trials for Sim<C, F> {
    type Config = C;
    type Error = std::convert::Infallible;

    fn first(&mut self, wanted: &[(C, u32)]) -> Result<Vec<Vec<Outcome>>, Self::Error> {
        Ok(wanted
            .iter()
            .map(|(c, n)| {
                let ran = self.ran.entry(c.clone()).or_insert(0);
                *ran = (*ran).max(*n);
                let p = (self.rate)(c);
                (0..*n).map(|i| Some(self.draw(c, i) < p)).collect()
            })
            .collect())
    }
}
