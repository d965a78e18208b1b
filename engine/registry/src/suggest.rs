//! "Did you mean" hints: a typo in a recipe should name the intended entry, not just dump
//! the list (AORTA only listed every name; we keep the full list after the suggestion).
//! Which names are close enough is [`aorta_source::suggest`]'s rule, shared with recipes and labels.

use aorta_source::suggest;

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
    let close = suggest::close_matches(name, candidates);
    let close = &close[..close.len().min(MAX_SUGGESTIONS)];
    if close.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = close.iter().map(|c| format!("'{c}'")).collect();
    format!("did you mean {}? ", quoted.join(" or "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_closest_first() {
        let names = ["tf32_off", "xnack", "none", "hsa_no_sdma"];
        assert_eq!(
            did_you_mean("tf32_of", names.iter().copied()),
            "did you mean 'tf32_off'? "
        );
        assert_eq!(
            did_you_mean("TF32_OFF", names.iter().copied()),
            "did you mean 'tf32_off'? "
        );
        assert_eq!(
            did_you_mean("completely_different", names.iter().copied()),
            ""
        );
        let huge = "x".repeat(20 << 20);
        let t0 = std::time::Instant::now();
        assert_eq!(did_you_mean(&huge, names.iter().copied()), "");
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t0.elapsed()
        );
        let many = ["ab", "ac", "ad", "ae", "af"];
        assert_eq!(
            did_you_mean("aa", many.iter().copied()),
            "did you mean 'ab' or 'ac' or 'ad'? "
        );
        let h = hint("xnak", names.iter().copied());
        assert!(
            h.starts_with("did you mean 'xnack'? available: hsa_no_sdma, none, tf32_off, xnack;"),
            "{h}"
        );
    }
}
