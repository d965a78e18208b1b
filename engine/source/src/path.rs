//! Field paths such as `cells[2].mitigations`, the address every diagnostic carries.

use std::fmt;

/// A path from the document root to a field; cheap to extend while walking a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// The document root (displays as `<root>`), or a named root like `--collect`.
    pub fn root() -> Self {
        FieldPath(String::new())
    }

    pub fn named(name: &str) -> Self {
        FieldPath(name.to_string())
    }

    pub fn key(&self, key: &str) -> Self {
        if self.0.is_empty() {
            FieldPath(key.to_string())
        } else {
            FieldPath(format!("{}.{key}", self.0))
        }
    }

    pub fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{i}]", self.0))
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> &str {
        if self.0.is_empty() {
            "<root>"
        } else {
            &self.0
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_dotted_and_indexed_paths() {
        let p = FieldPath::root().key("cells").index(2).key("mitigations");
        assert_eq!(p.to_string(), "cells[2].mitigations");
        assert_eq!(FieldPath::root().to_string(), "<root>");
        assert_eq!(
            FieldPath::named("--collect").index(0).to_string(),
            "--collect[0]"
        );
    }
}
