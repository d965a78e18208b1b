//! The evidence a cell's trials give against the baseline's: failure counts, their Wilson
//! interval, and Fisher's exact test. One implementation for the matrix's verdict, report.html
//! and `aorta agent`'s sequential search.

use serde::{Deserialize, Serialize};

/// Failures among the valid trials of one cell (trials whose verdict is `error` are neither
/// evidence for nor against, as in the matrix's failure rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counts {
    pub failed: u32,
    pub trials: u32,
}

impl Counts {
    pub fn new(failed: u32, trials: u32) -> Counts {
        Counts {
            failed: failed.min(trials),
            trials,
        }
    }

    pub fn rate(self) -> f64 {
        if self.trials == 0 {
            0.0
        } else {
            f64::from(self.failed) / f64::from(self.trials)
        }
    }

    /// The Wilson score interval for the failure rate at `confidence` (two-sided).
    pub fn wilson(self, confidence: f64) -> (f64, f64) {
        if self.trials == 0 {
            return (0.0, 1.0);
        }
        let n = f64::from(self.trials);
        let p = self.rate();
        let z = probit(0.5 + confidence / 2.0);
        let z2 = z * z;
        let denom = 1.0 + z2 / n;
        let centre = (p + z2 / (2.0 * n)) / denom;
        let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
        ((centre - half).max(0.0), (centre + half).min(1.0))
    }
}

/// ln(n!) for n below this comes from a table (the sequential test calls Fisher's test after
/// every trial); larger n by summation.
const LN_FACTORIAL_TABLE: usize = 4096;

/// ln(n!): the counts here are at most a few thousand.
fn ln_factorial(n: u32) -> f64 {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = Vec::with_capacity(LN_FACTORIAL_TABLE);
        let mut acc = 0.0;
        t.push(0.0);
        for i in 1..LN_FACTORIAL_TABLE {
            acc += (i as f64).ln();
            t.push(acc);
        }
        t
    });
    match table.get(n as usize) {
        Some(v) => *v,
        None => (2..=n).map(|i| f64::from(i).ln()).sum(),
    }
}

fn ln_choose(n: u32, k: u32) -> f64 {
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

/// One-sided Fisher exact p-value for "the candidate fails less often than the baseline":
/// P(X ≤ observed candidate failures) under the hypergeometric law of the table's margins.
pub fn fisher_less(baseline: Counts, candidate: Counts) -> f64 {
    let (nb, nc) = (baseline.trials, candidate.trials);
    let total = nb + nc;
    let failures = baseline.failed + candidate.failed;
    if nc == 0 || nb == 0 {
        return 1.0;
    }
    let lo = nc.saturating_sub(total - failures);
    let hi = candidate.failed.min(failures);
    let denom = ln_choose(total, nc);
    let p: f64 = (lo..=hi)
        .map(|x| (ln_choose(failures, x) + ln_choose(total - failures, nc - x) - denom).exp())
        .sum();
    p.min(1.0)
}

/// The inverse of the standard normal CDF (Acklam's rational approximation, relative error
/// below 1.2e-9): z for the Wilson interval at any confidence.
pub fn probit(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fisher_matches_hand_computed_tables() {
        // 8/8 baseline failures, 0/4 candidate failures: 1 / C(12, 4).
        let p = fisher_less(Counts::new(8, 8), Counts::new(0, 4));
        assert!((p - 1.0 / 495.0).abs() < 1e-12, "{p}");
        // Equal tables are far from significant.
        assert!(fisher_less(Counts::new(3, 10), Counts::new(3, 10)) > 0.5);
        // A candidate failing more is never evidence.
        assert!(fisher_less(Counts::new(1, 10), Counts::new(9, 10)) > 0.99);
        // R: fisher.test(matrix(c(1,9,7,3),2), alternative="less")$p.value = 0.009883
        let p = fisher_less(Counts::new(7, 10), Counts::new(1, 10));
        assert!((p - 0.009_883).abs() < 1e-5, "{p}");
    }

    #[test]
    fn probit_and_wilson_match_tables() {
        assert!((probit(0.975) - 1.959_964).abs() < 1e-5);
        assert!((probit(0.5)).abs() < 1e-12);
        assert!((probit(0.005) + 2.575_829).abs() < 1e-5);
        // Wilson 95% for 3/10: [0.1078, 0.6032].
        let (lo, hi) = Counts::new(3, 10).wilson(0.95);
        assert!(
            (lo - 0.1078).abs() < 1e-3 && (hi - 0.6032).abs() < 1e-3,
            "{lo} {hi}"
        );
    }

    proptest! {
        #[test]
        fn fisher_is_a_probability_and_monotone(
            nb in 1u32..80, nc in 1u32..80, fb in 0u32..80, fc in 0u32..80
        ) {
            let (b, c) = (Counts::new(fb.min(nb), nb), Counts::new(fc.min(nc), nc));
            let p = fisher_less(b, c);
            prop_assert!((0.0..=1.0 + 1e-9).contains(&p));
            // One more candidate failure never makes the evidence stronger.
            if c.failed < nc {
                prop_assert!(fisher_less(b, Counts::new(c.failed + 1, nc)) >= p - 1e-12);
            }
        }

        #[test]
        fn wilson_contains_the_estimate(n in 1u32..500, f in 0u32..500, conf in 0.5f64..0.999) {
            let c = Counts::new(f.min(n), n);
            let (lo, hi) = c.wilson(conf);
            prop_assert!(lo <= c.rate() + 1e-12 && c.rate() <= hi + 1e-12);
            prop_assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi));
        }

    }
}
