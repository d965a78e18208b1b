//! Dotted field-path patterns, the language of a recipe's `env_key` rules: segments are
//! names, `*` matches a run of characters within a segment, and `**` any number of segments
//! (`cuda.libraries.*.version`, `pytorch.**`). The recipe checks patterns with [`validate`];
//! the environment probe matches them against every field of a snapshot, so a pattern is
//! split into [`Seg`]ments once and matching allocates nothing.

/// Why a pattern is not one: the message names the pattern and says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("env_key pattern is empty")]
    Empty,
    #[error("env_key pattern '{0}' has an empty segment (write dotted paths such as 'cuda.libraries.*.version')")]
    EmptySegment(String),
    #[error("env_key pattern '{0}': '**' must be a whole segment")]
    PartialGlobstar(String),
    #[error("env_key pattern '{pattern}' contains '{found}'; segments use letters, digits, '_', '-' and '*'")]
    BadChar { pattern: String, found: char },
}

/// One dotted segment of a pattern, told apart once: most are plain names, and a leaf meets
/// every pattern, so a plain one is compared, not searched for `*`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Seg<'a> {
    /// `**`: any number of segments.
    AnyDepth,
    Exact(&'a str),
    /// Holds `*`: any run of characters within the segment.
    Glob(&'a str),
}

impl<'a> Seg<'a> {
    pub fn of(s: &'a str) -> Seg<'a> {
        if s == "**" {
            Seg::AnyDepth
        } else if s.contains('*') {
            Seg::Glob(s)
        } else {
            Seg::Exact(s)
        }
    }

    /// Whether this one-segment pattern matches the segment `s`.
    pub fn matches(self, s: &str) -> bool {
        match self {
            Seg::Exact(p) => p == s,
            Seg::Glob(p) => glob(p, s),
            Seg::AnyDepth => true,
        }
    }
}

/// A pattern's dotted segments.
pub type Segments<'a> = Vec<Seg<'a>>;

/// A pattern split into its segments.
pub fn segments(pattern: &str) -> Segments<'_> {
    pattern.split('.').map(Seg::of).collect()
}

/// Checks one pattern.
pub fn validate(p: &str) -> Result<(), PatternError> {
    if p.is_empty() {
        return Err(PatternError::Empty);
    }
    for seg in p.split('.') {
        if seg.is_empty() {
            return Err(PatternError::EmptySegment(p.to_string()));
        }
        if seg.contains("**") && seg != "**" {
            return Err(PatternError::PartialGlobstar(p.to_string()));
        }
        if let Some(c) = seg
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*')))
        {
            return Err(PatternError::BadChar {
                pattern: p.to_string(),
                found: c,
            });
        }
    }
    Ok(())
}

/// Does `pattern` match `path` or an ancestor of it?
pub fn matches(pattern: &str, path: &[&str]) -> bool {
    match_segs(&segments(pattern), path)
}

/// Calls `f` with the dotted segments of `s`, on the stack for up to 16 of them: key rules are
/// matched against every field of a snapshot, and a report computes one key per cell.
pub fn with_segs<R>(s: &str, f: impl FnOnce(&[&str]) -> R) -> R {
    let mut buf = [""; 16];
    let mut n = 0;
    for seg in s.split('.') {
        if n == buf.len() {
            return f(&s.split('.').collect::<Vec<_>>());
        }
        buf[n] = seg;
        n += 1;
    }
    f(&buf[..n])
}

/// Whether the split pattern matches `path` or an ancestor of it.
pub fn match_segs(pat: &[Seg<'_>], path: &[&str]) -> bool {
    match pat.split_first() {
        None => true,
        Some((Seg::AnyDepth, rest)) => (0..=path.len()).any(|i| match_segs(rest, &path[i..])),
        Some((seg, rest)) => path
            .split_first()
            .is_some_and(|(p, tail)| seg.matches(p) && match_segs(rest, tail)),
    }
}

/// Does `pattern` match `field`, an ancestor of it, or something below it? Segments below the
/// field are map keys (`pytorch.build.flags.USE_CUDA`) or struct fields, so any remaining
/// pattern segments are taken to match.
pub fn reaches(pattern: &str, field: &[&str]) -> bool {
    reach_segs(&segments(pattern), field)
}

/// [`reaches`] for a split pattern.
pub fn reach_segs(pat: &[Seg<'_>], field: &[&str]) -> bool {
    if field.is_empty() {
        return true;
    }
    match pat.split_first() {
        None => true,
        Some((Seg::AnyDepth, rest)) => (0..=field.len()).any(|i| reach_segs(rest, &field[i..])),
        Some((seg, rest)) => seg.matches(field[0]) && reach_segs(rest, &field[1..]),
    }
}

/// `*` within one segment (matched against every leaf: nothing is allocated).
fn glob(pat: &str, s: &str) -> bool {
    let Some((first, after)) = pat.split_once('*') else {
        return pat == s;
    };
    let (mids, last) = match after.rsplit_once('*') {
        Some((mids, last)) => (Some(mids), last),
        None => (None, after),
    };
    let Some(rest) = s.strip_prefix(first) else {
        return false;
    };
    let Some(mut rest) = rest.strip_suffix(last) else {
        return false;
    };
    for mid in mids.into_iter().flat_map(|m| m.split('*')) {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The textbook wildcard match, byte by byte: the oracle for [`glob`].
    fn wildcard(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| wildcard(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && wildcard(rest, &s[1..]),
        }
    }

    proptest! {
        #[test]
        fn glob_is_the_textbook_wildcard_match(pat in "[ab*]{0,7}", s in "[ab]{0,9}") {
            prop_assert_eq!(glob(&pat, &s), wildcard(pat.as_bytes(), s.as_bytes()));
        }

        /// A segment told apart once (plain, `*`, `**`) matches as the wildcard does.
        #[test]
        fn a_classified_segment_matches_as_the_wildcard(pat in "[ab*]{0,5}", s in "[ab]{0,7}") {
            let expected = pat == "**" || wildcard(pat.as_bytes(), s.as_bytes());
            prop_assert_eq!(Seg::of(&pat).matches(&s), expected);
        }
    }

    #[test]
    fn globs_and_subtrees() {
        let p = |s: &str| s.split('.').map(str::to_string).collect::<Vec<_>>();
        let m = |pat: &str, path: &str| {
            matches(pat, &p(path).iter().map(String::as_str).collect::<Vec<_>>())
        };
        assert!(m("host", "host.cpu.model"));
        assert!(!m("host.cpu", "host.cpu_x"));
        assert!(m("gpu.devices.*.uuid", "gpu.devices.7.uuid"));
        assert!(m(
            "env_vars.*_VISIBLE_DEVICES",
            "env_vars.CUDA_VISIBLE_DEVICES"
        ));
        assert!(!m(
            "env_vars.*_VISIBLE_DEVICES",
            "env_vars.CUDA_DEVICE_MAX_CONNECTIONS"
        ));
        assert!(m("**.path", "cuda.libraries.cudnn.files.0.path"));
        assert!(!m("**.path", "env_vars.PATH"));
        assert!(m("cuda.**.blake3", "cuda.libraries.cublas.files.0.blake3"));
        assert!(m("a*b*c", "aXXbYYc") && !m("a*b*c", "aXXc"));
    }
}
