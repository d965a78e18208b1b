//! The first bad point of an ordered list (versions, images, commits of a dependency), when the
//! first point passes and the last fails, flaky failures included. A binary search whose every
//! point is a [`Judge::call`] against the two ends (so a bad point may take several trials to
//! show its failure, and a good one enough trials to show it fails less than the bad end);
//! then the boundary is re-checked: the last good and the first bad points run again with at
//! least twice the trials their calls rested on, and a reversed call moves the search.
//!
//! Points probed: the two ends plus ⌈log2(n−1)⌉ midpoints when no call reverses (the re-check
//! adds trials, not points). The boundary's confidence is 1 − (p of "the last good point
//! passes" + p of "the first bad point fails"), the union bound over the two calls it rests on
//! (an end counts 0: it is the reference).

use crate::judge::{Call, Judge, Trials, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the search found.
#[derive(Debug, Clone, Serialize)]
pub struct Boundary {
    /// The first bad point (an index), or `None` when a call stayed undecided; then the
    /// boundary lies in `(last_good, first_bad_bound]`.
    pub first_bad: Option<usize>,
    pub last_good: usize,
    /// The lowest point known bad (the last point if none other).
    pub first_bad_bound: usize,
    /// Each point's latest call, by index.
    pub calls: BTreeMap<usize, Verdict>,
    /// Distinct points that ran trials, the two ends included.
    pub points_probed: usize,
    /// 1 − the sum of the boundary calls' p-values (0 when undecided).
    pub confidence: f64,
    /// Calls a re-check reversed.
    pub reversals: u32,
}

/// Searches `0..n` (`n` ≥ 2; the caller checked the ends with [`Judge::check_endpoints`],
/// `point(0)` being the judge's good end and `point(n-1)` its bad one).
pub fn first_bad<T: Trials>(
    judge: &mut Judge<T::Config>,
    trials: &mut T,
    n: usize,
    point: impl Fn(usize) -> T::Config,
) -> Result<Boundary, T::Error> {
    let mut calls: BTreeMap<usize, Verdict> = BTreeMap::new();
    let mut rechecked: BTreeMap<usize, bool> = BTreeMap::new();
    let mut reversals = 0;
    let (mut lo, mut hi) = (0usize, n - 1);
    let done = |calls: BTreeMap<usize, Verdict>, lo, hi, first_bad, reversals| {
        let p = |i: usize| match calls.get(&i) {
            Some(v) if i != 0 && i != n - 1 => v.p,
            _ => 0.0,
        };
        let confidence = match first_bad {
            Some(_) => (1.0 - p(lo) - p(hi)).max(0.0),
            None => 0.0,
        };
        Boundary {
            first_bad,
            last_good: lo,
            first_bad_bound: hi,
            points_probed: calls.keys().filter(|&&i| i != 0 && i != n - 1).count() + 2,
            calls,
            confidence,
            reversals,
        }
    };
    loop {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let v = judge.call(trials, &point(mid))?;
            calls.insert(mid, v);
            match v.call {
                Call::Fails => hi = mid,
                Call::Passes => lo = mid,
                Call::Undecided => return Ok(done(calls, lo, hi, None, reversals)),
            }
        }
        // Re-check the boundary's inner points, each once.
        let mut moved = false;
        for (i, expect) in [(lo, Call::Passes), (hi, Call::Fails)] {
            if i == 0 || i == n - 1 || rechecked.contains_key(&i) {
                continue;
            }
            rechecked.insert(i, true);
            let before = calls[&i].counts.trials;
            let v = judge.call_from(trials, &point(i), before.saturating_mul(2))?;
            calls.insert(i, v);
            if v.call == expect {
                continue;
            }
            reversals += 1;
            if v.call == Call::Undecided {
                return Ok(done(calls, lo, hi, None, reversals));
            }
            // A reversed call: the nearest calls on each side that still stand bound it.
            moved = true;
            if expect == Call::Passes {
                hi = i;
                lo = calls
                    .range(..i)
                    .rev()
                    .find(|(_, v)| v.call == Call::Passes)
                    .map_or(0, |(&j, _)| j);
            } else {
                lo = i;
                hi = calls
                    .range(i + 1..)
                    .find(|(_, v)| v.call == Call::Fails)
                    .map_or(n - 1, |(&j, _)| j);
            }
            break;
        }
        if !moved {
            return Ok(done(calls, lo, hi, Some(hi), reversals));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Trials;
    use aorta_report::sequential::Outcome;

    /// Points from `first` on fail every other trial; point `late` fails only from trial 16 on.
    struct Planted {
        first: usize,
        late: usize,
    }

    impl Trials for Planted {
        type Config = usize;
        type Error = ();
        fn first(&mut self, wanted: &[(usize, u32)]) -> Result<Vec<Vec<Outcome>>, ()> {
            Ok(wanted
                .iter()
                .map(|&(p, n)| {
                    (0..n)
                        .map(|i| {
                            Some((p >= self.first && i % 2 == 0) || (p == self.late && i >= 16))
                        })
                        .collect()
                })
                .collect())
        }
    }

    #[test]
    fn a_reversed_re_check_moves_the_boundary() {
        let mut t = Planted {
            first: 37,
            late: 36,
        };
        let mut judge = Judge::new(0.95, 64, 0, 63);
        judge.check_endpoints(&mut t).unwrap().unwrap();
        let b = first_bad(&mut judge, &mut t, 64, |i| i).unwrap();
        // 36 passed its first 16 trials, then failed on re-check (32): the boundary moved to it.
        assert_eq!(b.first_bad, Some(36), "{b:?}");
        assert_eq!(b.reversals, 1);
        assert_eq!(b.calls[&36].call, Call::Fails);
        assert!(b.points_probed <= 6 + 3, "{}", b.points_probed);
    }

    #[test]
    fn no_reversal_probes_the_ends_and_log2_midpoints() {
        let mut t = Planted {
            first: 37,
            late: 99,
        };
        let mut judge = Judge::new(0.95, 64, 0, 63);
        judge.check_endpoints(&mut t).unwrap().unwrap();
        let b = first_bad(&mut judge, &mut t, 64, |i| i).unwrap();
        assert_eq!(b.first_bad, Some(37));
        assert_eq!((b.reversals, b.points_probed), (0, 2 + 6));
        assert!(b.confidence > 0.99, "{}", b.confidence);
    }
}
