//! "Did you mean": the one edit distance and the one rule for when a name is close enough to
//! suggest, shared by every input layer (recipe keys and cell names, registry names and sidecar
//! keys, BUCK targets and rule attributes), so a typo gets the same hint wherever it is made.
//!
//! - **Distance**: optimal string alignment ([`strsim::osa_distance`]) over the lowercased names:
//!   an insertion, a deletion, a substitution or a swap of two adjacent characters each cost one,
//!   and case is free. A swap is the commonest typo (`trails` for `trials`); plain Levenshtein
//!   charges it two, which let short swapped names fall out of reach.
//! - **Reach** ([`max_distance`]): a third of the typed name's characters, at least one, the rule
//!   rustc uses for its own suggestions. It scales with what the user typed, not with the
//!   candidate, so a short query cannot be "corrected" to an unrelated long name, and one slip
//!   in a name of one or two characters still gets a hint. Within that reach most of the name is
//!   still right; beyond it the suggestion is more often a different word than a typo.
//! - **Order**: closest first, ties by name, so hints are stable and lead with the likely fix.
//!   A candidate equal to the query is never suggested (suggesting the name that failed helps
//!   nobody).

/// The edit distance between two names: optimal string alignment over characters, case-insensitive.
pub fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(&a.to_lowercase(), &b.to_lowercase())
}

/// The largest [`distance`] at which a candidate is still offered for `query`: a third of the
/// query's characters, at least one.
pub fn max_distance(query: &str) -> usize {
    query.chars().count().max(3) / 3
}

/// Every candidate within [`max_distance`] of `query`, closest first (ties by name, duplicates
/// and `query` itself dropped). Callers show as many as suit their message.
pub fn close_matches<'a>(
    query: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let limit = max_distance(query);
    let len = query.chars().count();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| *c != query)
        // The distance is at least the difference in length: hopeless pairs are skipped
        // unscored, so a 20 MB "name" costs one pass, not a 20 MB × candidate table.
        .filter(|c| len.abs_diff(c.chars().count()) <= limit)
        .map(|c| (distance(query, c), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort_unstable();
    scored.dedup();
    scored.into_iter().map(|(_, c)| c).collect()
}

/// The closest candidate within reach of `query` (the first of [`close_matches`]), if any.
pub fn did_you_mean<'a>(
    query: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    close_matches(query, candidates).into_iter().next()
}

/// All candidates, however far, closest to `query` first (ties by name, duplicates dropped): for
/// listings that show everything but lead with the likely fix.
pub fn by_distance<'a>(query: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (distance(query, c), c))
        .collect();
    scored.sort_unstable();
    scored.dedup();
    scored.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits_swaps_and_ignores_case() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("tf32_of", "tf32_off"), 1);
        assert_eq!(
            distance("trails", "trials"),
            1,
            "an adjacent swap is one edit"
        );
        assert_eq!(distance("TF32_OFF", "tf32_off"), 0);
        assert_eq!(distance("naïve", "naive"), 1, "characters, not bytes");
    }

    #[test]
    fn reach_is_a_third_of_the_query_at_least_one() {
        assert_eq!(max_distance(""), 1);
        assert_eq!(max_distance("ab"), 1);
        assert_eq!(max_distance("abc"), 1);
        assert_eq!(max_distance("abcde"), 1);
        assert_eq!(max_distance("abcdef"), 2);
        assert_eq!(max_distance("baseline_cel"), 4);
        assert_eq!(max_distance("ééé"), 1, "characters, not bytes");
    }

    #[test]
    fn suggests_typos_only() {
        let keys = ["threshold", "baseline_cell", "trials", "cells"];
        assert_eq!(did_you_mean("baseline_cel", keys), Some("baseline_cell"));
        assert_eq!(did_you_mean("trails", keys), Some("trials"));
        assert_eq!(did_you_mean("Trials", keys), Some("trials"));
        assert_eq!(did_you_mean("cels", keys), Some("cells"));
        assert_eq!(did_you_mean("zzz", keys), None);
        // Two edits in a three-letter name make a different word, not a typo.
        assert_eq!(distance("nun", "none"), 2);
        assert_eq!(did_you_mean("nun", ["none", "local"]), None);
        assert_eq!(did_you_mean("lokal", ["none", "local"]), Some("local"));
        // The reach follows the query: a short query is not stretched to a long candidate.
        assert_eq!(did_you_mean("x", ["xnack_extra_long"]), None);
        assert_eq!(did_you_mean("x", ["xy"]), Some("xy"));
    }

    #[test]
    fn closest_first_ties_by_name_without_the_query_itself() {
        let names = [
            "tf32_off",
            "xnack",
            "none",
            "hsa_no_sdma",
            "tf32_of",
            "tf32_on",
        ];
        assert_eq!(close_matches("tf32_of", names), ["tf32_off", "tf32_on"]);
        assert_eq!(close_matches("ab", ["ac", "ab", "aa", "ac"]), ["aa", "ac"]);
        assert!(close_matches("completely_different", names).is_empty());
    }

    #[test]
    fn by_distance_orders_everything() {
        assert_eq!(
            by_distance("quikstart", ["race_smoke", "quickstart", "abc", "abc"]),
            ["quickstart", "abc", "race_smoke"]
        );
    }
}
