//! Naming rules: cell names (they become directory names), probe cell synthesis, and the
//! deterministic auto-names of inline docker environments.

use blake2::digest::{Update, VariableOutput};

/// Cell names are used verbatim as directory components.
pub fn valid_cell_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Names that would clash with files the engine writes next to cell directories.
pub const RESERVED_CELL_NAMES: &[&str] = &[".", "..", "matrix.md", "matrix.json"];

/// AORTA's `seg`: characters outside `[A-Za-z0-9_.-]` become `_`; a leading `.`/`-` or an
/// empty result gets a `_` prefix. Used to build probe cell names `<m>-<d>`.
pub fn segment(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') || s.starts_with('-') {
        format!("_{s}")
    } else {
        s
    }
}

/// AORTA's `safe_slug` for directory components: unsafe characters → `_`, `.`/`..` → `_`.
pub fn safe_slug(name: &str) -> String {
    if name == "." || name == ".." || name.is_empty() {
        return "_".into();
    }
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `_inline_<8 hex>` from a BLAKE2b digest of 4 bytes (not a truncated 64-byte one), exactly
/// as AORTA derives it, so both tools name the same image the same way.
pub fn inline_environment_name(docker_ref: &str) -> String {
    let mut hasher = blake2::Blake2bVar::new(4).expect("4 is a valid BLAKE2b output size");
    hasher.update(docker_ref.as_bytes());
    let mut out = [0u8; 4];
    hasher
        .finalize_variable(&mut out)
        .expect("buffer matches the output size");
    format!(
        "_inline_{}",
        out.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_names() {
        for ok in ["PROJ-1.fix", "a_b.c-d", "_x", "0"] {
            assert!(valid_cell_name(ok), "{ok}");
        }
        for bad in ["../x", "a/b", "-x", ".x", "", "a b"] {
            assert!(!valid_cell_name(bad), "{bad}");
        }
    }

    #[test]
    fn segments() {
        assert_eq!(segment("tf32_off"), "tf32_off");
        assert_eq!(segment("a/b"), "a_b");
        assert_eq!(segment("-x"), "_-x");
        assert_eq!(segment(""), "_");
        assert_eq!(safe_slug(".."), "_");
        assert_eq!(safe_slug("a:b"), "a_b");
    }

    #[test]
    fn inline_names_are_deterministic_blake2b_4() {
        let a = inline_environment_name("rocm/pytorch:latest");
        assert_eq!(a, inline_environment_name("rocm/pytorch:latest"));
        // Python: hashlib.blake2b(b"rocm/pytorch:latest", digest_size=4).hexdigest()
        assert_eq!(a, "_inline_982a8846");
        assert_ne!(a, inline_environment_name("rocm/pytorch:other"));
    }
}
