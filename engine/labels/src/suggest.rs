//! "Did you mean" helpers: edit distance ordering for target and attribute names.

/// Levenshtein distance over chars; names are short so the O(n·m) table is fine.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// All candidates, closest to `query` first (ties alphabetical), so hints lead with the likely fix.
pub(crate) fn closest_first<S: AsRef<str>>(query: &str, candidates: &[S]) -> Vec<String> {
    let mut scored: Vec<(usize, &str)> = candidates
        .iter()
        .map(|c| (distance(query, c.as_ref()), c.as_ref()))
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().map(|(_, c)| c.to_owned()).collect()
}

/// The closest candidate if it is close enough to be a plausible typo.
pub(crate) fn did_you_mean<'a, S: AsRef<str>>(query: &str, candidates: &'a [S]) -> Option<&'a str> {
    let limit = (query.chars().count() / 3).max(2);
    candidates
        .iter()
        .map(|c| (distance(query, c.as_ref()), c.as_ref()))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_distance() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(
            closest_first("quikstart", &["race_smoke", "quickstart", "abc"]),
            ["quickstart", "abc", "race_smoke"]
        );
        assert_eq!(
            did_you_mean("recpie", &["recipe", "labels"]),
            Some("recipe")
        );
        assert_eq!(did_you_mean("zzzzzz", &["recipe", "labels"]), None);
    }
}
