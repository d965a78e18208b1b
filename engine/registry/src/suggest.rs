//! "Did you mean" hints: a typo in a recipe should name the intended entry, not just dump
//! the list (AORTA only listed every name; we keep the full list after the suggestion).

/// At most this many suggestions are offered.
const MAX_SUGGESTIONS: usize = 3;

/// The full hint for an unknown registry name: suggestions, every name (sorted), and
/// where new names come from.
pub(crate) fn hint<'a>(name: &str, names: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut all: Vec<&str> = names.clone().collect();
    all.sort_unstable();
    format!(
        "{}available: {}; define new names in a sidecar JSON file (--mitigations-file) or in aorta-registry.json next to the recipe",
        did_you_mean(name, names),
        all.join(", ")
    )
}

/// `did you mean 'a' or 'b'? ` (with a trailing space) or an empty string.
pub(crate) fn did_you_mean<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> String {
    let close = closest(name, candidates);
    if close.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = close.iter().map(|c| format!("'{c}'")).collect();
    format!("did you mean {}? ", quoted.join(" or "))
}

/// Candidates within a typo's reach of `name`, closest first (ties by name).
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted = name.to_lowercase();
    let len = wanted.chars().count();
    let limit = (len / 3).max(1);
    let mut scored: Vec<(usize, &str)> = candidates
        .filter(|c| *c != name)
        // The distance is at least the difference in length: skip hopeless pairs unscored, so
        // a 20 MB "name" costs one pass, not a 20 MB × candidate table.
        .filter(|c| len.abs_diff(c.chars().count()) <= limit)
        .map(|c| (levenshtein(&wanted, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort_unstable();
    scored.into_iter().take(MAX_SUGGESTIONS).map(|(_, c)| c).collect()
}

/// Edit distance (insertions, deletions, substitutions) over characters.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(levenshtein("tf32_of", "tf32_off"), 1);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
    }

    #[test]
    fn suggests_closest_first() {
        let names = ["tf32_off", "xnack", "none", "hsa_no_sdma"];
        assert_eq!(did_you_mean("tf32_of", names.iter().copied()), "did you mean 'tf32_off'? ");
        assert_eq!(did_you_mean("TF32_OFF", names.iter().copied()), "did you mean 'tf32_off'? ");
        assert_eq!(did_you_mean("completely_different", names.iter().copied()), "");
        let huge = "x".repeat(20 << 20);
        let t0 = std::time::Instant::now();
        assert_eq!(did_you_mean(&huge, names.iter().copied()), "");
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{:?}", t0.elapsed());
        let h = hint("xnak", names.iter().copied());
        assert!(h.starts_with("did you mean 'xnack'? available: hsa_no_sdma, none, tf32_off, xnack;"), "{h}");
    }
}
