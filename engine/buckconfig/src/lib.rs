//! The project settings aorta reads from the workspace's `.buckconfig`: its `[aorta]` section
//! (remote cache, Slurm executor), in Buck2's INI dialect, so one file configures `buck2` and
//! `aorta` alike.
//!
//! Only what aorta's settings need: `[section]` headers, `key = value` lines (the value trimmed,
//! an empty value is unset), `#` and `;` comment lines. A later line for the same key wins, as in
//! Buck2. No includes, no `$(config …)` interpolation, no line continuations: a value using them
//! is taken literally.

use std::collections::BTreeMap;
use std::path::Path;

/// The non-empty `key = value` pairs of `[section]` in `<root>/.buckconfig`; empty when the
/// file or the section is missing or unreadable (settings then come from flags and env).
pub fn section(root: &Path, section: &str) -> BTreeMap<String, String> {
    std::fs::read_to_string(root.join(".buckconfig"))
        .map(|text| parse_section(&text, section))
        .unwrap_or_default()
}

/// [`section`] on text.
pub fn parse_section(text: &str, section: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            inside = line.trim_start_matches('[').trim_end_matches(']').trim() == section;
            continue;
        }
        let Some((k, v)) = line.split_once('=').filter(|_| inside) else {
            continue;
        };
        let v = v.trim();
        if v.is_empty() {
            out.remove(k.trim());
        } else {
            out.insert(k.trim().to_owned(), v.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_named_section() {
        let text =
            "[repositories]\nroot = .\n\n[aorta]\n# comment\n; another\n executor = slurm \n\
                    slurm_partition=gpu\nempty =\n[other]\nexecutor = local\n";
        let s = parse_section(text, "aorta");
        assert_eq!(s.get("executor").map(String::as_str), Some("slurm"));
        assert_eq!(s.get("slurm_partition").map(String::as_str), Some("gpu"));
        assert!(!s.contains_key("empty") && !s.contains_key("root"));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn a_later_line_wins_and_an_empty_one_unsets() {
        let s = parse_section("[aorta]\nx = 1\nx = 2\ny = 3\ny =\n", "aorta");
        assert_eq!(s.get("x").map(String::as_str), Some("2"));
        assert!(!s.contains_key("y"));
    }

    #[test]
    fn a_missing_file_is_an_empty_section() {
        let dir = tempfile::tempdir().unwrap();
        assert!(section(dir.path(), "aorta").is_empty());
        std::fs::write(dir.path().join(".buckconfig"), "[aorta]\nk = v = w\n").unwrap();
        assert_eq!(section(dir.path(), "aorta")["k"], "v = w");
    }
}
