//! Zeller and Hildebrandt's ddmin ("Simplifying and Isolating Failure-Inducing Input", TSE
//! 2002): a 1-minimal subset of the changes that still shows the property. Generic over the
//! oracle, so the engine-backed probe and the simulation run the same search.
//!
//! An `Undecided` probe counts as not showing the property (Zeller's "unresolved"): the search
//! only ever narrows to a subset it saw fail, so what it returns was observed, never assumed.
//! Worst case: (n² + 7n)/2 oracle calls for n changes ([`worst_case_probes`]); subsets are
//! memoised, so a subset asked again (a complement that equals a half) costs nothing.

use std::collections::BTreeMap;

/// What a probe of one subset showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The property holds (for `bisect env`: the run fails; for `reduce`: the stack fixes).
    Hit,
    /// The property does not hold.
    Miss,
    /// No decision within the probe's trial cap.
    Undecided,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minimal {
    /// Indices into the changes, ascending.
    pub subset: Vec<usize>,
    /// Distinct subsets the oracle was asked about.
    pub probes: usize,
}

/// Zeller's bound on the probes ddmin makes for `n` changes.
pub fn worst_case_probes(n: usize) -> usize {
    (n * n + 7 * n) / 2
}

/// A memoising wrapper: each distinct subset reaches the oracle once.
struct Memo<F> {
    oracle: F,
    seen: BTreeMap<Vec<usize>, Outcome>,
}

impl<F, E> Memo<F>
where
    F: FnMut(&[usize]) -> Result<Outcome, E>,
{
    fn test(&mut self, subset: &[usize]) -> Result<Outcome, E> {
        if let Some(o) = self.seen.get(subset) {
            return Ok(*o);
        }
        let o = (self.oracle)(subset)?;
        self.seen.insert(subset.to_vec(), o);
        Ok(o)
    }
}

/// `n` nearly equal, contiguous parts of `c`.
fn split(c: &[usize], n: usize) -> Vec<Vec<usize>> {
    let mut parts = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (c.len() - start) / (n - i);
        parts.push(c[start..end].to_vec());
        start = end;
    }
    parts
}

/// A 1-minimal subset of `0..n` with the property, given that the whole set has it (the
/// caller checked: the endpoint) and the empty set does not. `oracle` gets ascending indices.
pub fn ddmin<E>(
    n: usize,
    oracle: impl FnMut(&[usize]) -> Result<Outcome, E>,
) -> Result<Minimal, E> {
    let mut memo = Memo {
        oracle,
        seen: BTreeMap::new(),
    };
    // The endpoints are known: they are not probes of the search.
    memo.seen.insert((0..n).collect(), Outcome::Hit);
    memo.seen.insert(Vec::new(), Outcome::Miss);
    let known = memo.seen.len();
    let mut c: Vec<usize> = (0..n).collect();
    let mut granularity = 2;
    while c.len() >= 2 {
        let parts = split(&c, granularity.min(c.len()));
        let mut reduced = false;
        for part in &parts {
            if memo.test(part)? == Outcome::Hit {
                c = part.clone();
                granularity = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && parts.len() > 2 {
            for part in &parts {
                let complement: Vec<usize> =
                    c.iter().copied().filter(|i| !part.contains(i)).collect();
                if memo.test(&complement)? == Outcome::Hit {
                    c = complement;
                    granularity = (parts.len() - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if parts.len() >= c.len() {
                break;
            }
            granularity = (2 * parts.len()).min(c.len());
        }
    }
    Ok(Minimal {
        subset: c,
        probes: memo.seen.len() - known,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Fails when every index of one of `causes` is present (a disjunction of conjunctions).
    fn planted(causes: &[BTreeSet<usize>]) -> impl Fn(&[usize]) -> Outcome + '_ {
        move |s: &[usize]| {
            let s: BTreeSet<usize> = s.iter().copied().collect();
            if causes.iter().any(|c| c.is_subset(&s)) {
                Outcome::Hit
            } else {
                Outcome::Miss
            }
        }
    }

    fn run(n: usize, causes: &[BTreeSet<usize>]) -> Minimal {
        let f = planted(causes);
        ddmin::<()>(n, |s| Ok(f(s))).unwrap()
    }

    #[test]
    fn finds_a_planted_pair_among_40() {
        let causes = [BTreeSet::from([7, 31])];
        let m = run(40, &causes);
        assert_eq!(m.subset, vec![7, 31]);
        assert!(m.probes <= worst_case_probes(40), "{}", m.probes);
    }

    #[test]
    fn a_single_change_needs_about_log_n_probes() {
        let m = run(64, &[BTreeSet::from([37])]);
        assert_eq!(m.subset, vec![37]);
        assert!(m.probes <= 2 * 6 + 2, "{}", m.probes);
    }

    #[test]
    fn undecided_never_narrows() {
        let m = ddmin::<()>(8, |_| Ok(Outcome::Undecided)).unwrap();
        assert_eq!(m.subset, (0..8).collect::<Vec<_>>());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// The result has the property, removing any one element loses it (1-minimal), and the
        /// probes stay within Zeller's bound.
        #[test]
        fn one_minimal_and_within_the_bound(
            n in 1usize..24,
            raw in proptest::collection::vec(proptest::collection::btree_set(0usize..24, 1..4), 1..4),
        ) {
            let causes: Vec<BTreeSet<usize>> = raw
                .into_iter()
                .map(|c| c.into_iter().map(|i| i % n).collect())
                .collect();
            let f = planted(&causes);
            let m = run(n, &causes);
            prop_assert_eq!(f(&m.subset), Outcome::Hit);
            for i in 0..m.subset.len() {
                let mut less = m.subset.clone();
                less.remove(i);
                prop_assert_eq!(f(&less), Outcome::Miss, "{:?} minus {}", m.subset, m.subset[i]);
            }
            prop_assert!(m.probes <= worst_case_probes(n), "{} > {}", m.probes, worst_case_probes(n));
        }
    }
}
