//! Small numeric helpers with AORTA's exact definitions, kept in one place so the matrix, the
//! confound detector and the bootstrap agree on what "p90" or "rounded" means.

/// Arithmetic mean; 0.0 for no samples (AORTA reports zeros, never NaN).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Population standard deviation (divides by n, not n−1): 0.0 for one sample, as in AORTA.
pub fn population_std(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64).sqrt()
}

/// A rate as a whole percentage (`0.4` → `40%`): how every page and line shows a rate.
pub fn pct(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

/// Percentile of already-sorted samples by linear interpolation at `k = (n−1)·q`.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let k = (n - 1) as f64 * q;
            let lo = k.floor() as usize;
            let hi = k.ceil() as usize;
            if lo == hi {
                sorted[lo]
            } else {
                sorted[lo] + (sorted[hi] - sorted[lo]) * (k - lo as f64)
            }
        }
    }
}

/// Sorts a copy with a total order (step times are finite; NaN would sort last).
pub fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Python's `round(x)`: nearest integer, ties to even. AORTA's `speed (+P%)` and `NN%`
/// depend on it (`round(12.5) == 12`), so a Rust `round()` (ties away) would disagree.
pub fn round_half_even(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// Python's `"%.1f" % x` / `f"{x:.1f}"`: ties on the exact binary value go to even, which is
/// also what Rust's formatter does, so this is a plain `{:.1}` with a name that says why.
pub fn fmt_1(x: f64) -> String {
    format!("{x:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_linearly() {
        let s = sorted(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(percentile_sorted(&s, 0.5), 2.5);
        assert!((percentile_sorted(&s, 0.9) - 3.7).abs() < 1e-12);
        assert_eq!(percentile_sorted(&s, 0.0), 1.0);
        assert_eq!(percentile_sorted(&s, 1.0), 4.0);
        assert_eq!(percentile_sorted(&[], 0.5), 0.0);
        assert_eq!(percentile_sorted(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn std_is_population() {
        assert_eq!(
            population_std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            2.0
        );
        assert_eq!(population_std(&[3.0]), 0.0);
    }

    #[test]
    fn rounding_matches_python() {
        assert_eq!(round_half_even(12.5), 12);
        assert_eq!(round_half_even(13.5), 14);
        assert_eq!(round_half_even(24.999), 25);
        assert_eq!(round_half_even(-0.5), 0);
        // Python: "%.1f" % 0.25 == '0.2', "%.1f" % 0.35 == '0.3' (0.35 is below the tie in binary)
        assert_eq!(fmt_1(0.25), "0.2");
        assert_eq!(fmt_1(0.35), "0.3");
        assert_eq!(fmt_1(412.35), "412.4");
    }
}
