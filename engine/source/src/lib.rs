//! Loaded source files, a spanned value tree, and diagnostics that point into them.
//!
//! Every user-facing input of aorta (recipes, sidecar registries, BUCK files) must be able to
//! say *where* it is wrong: file, line:column, field path and a hint. Serde-derived models
//! lose positions, so inputs are first parsed into a [`Node`] tree that keeps the byte span of
//! every key and value, and the typed layers validate that tree by hand.

mod diag;
mod excerpt;
mod path;
mod scalar;
pub mod suggest;
mod tree;
mod yaml;

pub use diag::{shorten, Diag, DiagKind, MAX_MESSAGE_CHARS};
pub use excerpt::MAX_LINE_CHARS;
pub use path::FieldPath;
pub use tree::{Node, Value, MAX_REPR_CHARS};
pub use yaml::{parse_document, Syntax, MAX_NODES};

use std::path::Path;
use std::sync::Arc;

/// A file's display name and its full text, shared cheaply between diagnostics.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: Arc<str>,
    text: Arc<str>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile {
            name: Arc::from(name.into()),
            text: Arc::from(text.into()),
        }
    }

    /// Reads a file as UTF-8. Errors are diagnostics naming the file.
    pub fn read(path: &Path) -> Result<Self, Box<Diag>> {
        Self::read_limited(path, u64::MAX, "")
    }

    /// [`read`](Self::read), refusing a file of more than `max_bytes` (checked while reading,
    /// so a growing file or a device cannot get past it either). `what` names the kind of
    /// file in the message ("recipe").
    pub fn read_limited(path: &Path, max_bytes: u64, what: &str) -> Result<Self, Box<Diag>> {
        use std::io::Read;
        let name = path.display().to_string();
        let io_error = |e: std::io::Error| {
            Box::new(
                Diag::new(DiagKind::Io, format!("cannot read {name}: {e}"))
                    .with_help("check the path and its permissions"),
            )
        };
        let file = std::fs::File::open(path).map_err(io_error)?;
        let mut bytes = Vec::new();
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
        if bytes.len() as u64 > max_bytes {
            let what = if what.is_empty() { "file" } else { what };
            return Err(Box::new(
                Diag::new(
                    DiagKind::Limit,
                    format!("{name} is larger than {max_bytes} bytes, the limit for a {what}"),
                )
                .with_help(format!(
                    "aorta refuses a {what} this large before parsing it; is it the right file?"
                )),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let offset = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let file = SourceFile::new(name.clone(), lossy);
            Box::new(
                Diag::new(DiagKind::Syntax, format!("{name} is not valid UTF-8"))
                    .at(&file, offset..offset + 1, "invalid byte here")
                    .with_help("save the file as UTF-8"),
            )
        })?;
        Ok(SourceFile::new(name, text))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
