//! A seeded bootstrap interval for the step-time ratio (cell mean / baseline mean).
//!
//! AORTA compared two means and nothing else (§12.4): one slow outlier trial could flip a
//! tag. Here each side is resampled in two stages — trials with replacement, then steps with
//! replacement within each drawn trial — because steps of one process share its clocks,
//! allocator and placement and are not independent draws. With one trial per side this is
//! the plain step bootstrap. The 2.5th/97.5th percentiles of the resampled ratios form the
//! interval.
//!
//! The generator is a self-contained SplitMix64 seeded from the cell and baseline names, not
//! a `rand` engine: a dependency upgrade that changes a sampling algorithm would otherwise
//! change intervals of old runs, and reruns must give byte-identical matrices.

use crate::stats::percentile_sorted;

/// Resamples drawn per interval.
pub const RESAMPLES: usize = 2000;
/// Two-sided confidence level of the interval.
pub const LEVEL: f64 = 0.95;
/// Fewer step-time samples than this on either side: no interval.
pub const MIN_SAMPLES: usize = 2;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, passes BigCrush, fully specified.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform index below `n` by multiply-shift; the bias (n / 2^64) is far below what
    /// 2000 resamples can see.
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// FNV-1a over a versioned label, so the seed is stable across platforms and releases.
fn seed(cell: &str, baseline: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "aorta-bootstrap/1\0"
        .bytes()
        .chain(cell.bytes())
        .chain([0u8])
        .chain(baseline.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Mean of one two-stage resample of `groups` (trials of step-time samples).
fn resample_mean(groups: &[Vec<f64>], rng: &mut SplitMix64) -> f64 {
    let (mut sum, mut count) = (0.0, 0usize);
    for _ in 0..groups.len() {
        let g = &groups[rng.below(groups.len())];
        for _ in 0..g.len() {
            sum += g[rng.below(g.len())];
        }
        count += g.len();
    }
    if count == 0 {
        f64::NAN
    } else {
        sum / count as f64
    }
}

/// 95% percentile interval of `mean(cell) / mean(baseline)`, deterministic for given names and
/// samples. `None` when either side has fewer than [`MIN_SAMPLES`] samples, or when most
/// resamples have no positive baseline mean.
pub fn ratio_ci(
    cell: &[Vec<f64>],
    baseline: &[Vec<f64>],
    cell_name: &str,
    baseline_name: &str,
) -> Option<(f64, f64)> {
    let clean = |groups: &[Vec<f64>]| -> Vec<Vec<f64>> {
        groups.iter().filter(|g| !g.is_empty()).cloned().collect()
    };
    let (c, b) = (clean(cell), clean(baseline));
    let count = |g: &[Vec<f64>]| g.iter().map(Vec::len).sum::<usize>();
    if count(&c) < MIN_SAMPLES || count(&b) < MIN_SAMPLES {
        return None;
    }
    let mut rng = SplitMix64(seed(cell_name, baseline_name));
    let mut ratios = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let mc = resample_mean(&c, &mut rng);
        let mb = resample_mean(&b, &mut rng);
        let r = mc / mb;
        if mb > 0.0 && r.is_finite() {
            ratios.push(r);
        }
    }
    if ratios.len() < RESAMPLES / 2 {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    Some((
        percentile_sorted(&ratios, tail),
        percentile_sorted(&ratios, 1.0 - tail),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // First outputs for seed 0 (reference implementation by Vigna).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64(7);
        for n in [1usize, 2, 3, 10, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }

    #[test]
    fn seeds_differ_by_name() {
        assert_ne!(seed("a", "b"), seed("b", "a"));
        assert_ne!(seed("ab", ""), seed("a", "b"));
    }
}
