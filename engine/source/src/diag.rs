//! One diagnostic type for every bad input: message, field path, location and hint.

use crate::{FieldPath, SourceFile};
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// What kind of mistake a diagnostic reports; shown as the miette error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagKind {
    /// The file could not be read.
    Io,
    /// Not parseable as YAML/JSON/Starlark.
    Syntax,
    /// Shape, type, unknown key, version problems (AORTA's `RecipeSchemaError`).
    Schema,
    /// Semantic cell problems: duplicates, reserved names, collisions (`RecipeCellError`).
    Cell,
    /// A name not found in a registry (`UnknownMitigationError` / `UnknownEnvironmentError`).
    UnknownName,
    /// Registry files that conflict or are malformed (`RegistryError`).
    Registry,
    /// Command-line flags that do not fit together.
    Usage,
}

impl DiagKind {
    fn code(self) -> &'static str {
        match self {
            DiagKind::Io => "aorta::io",
            DiagKind::Syntax => "aorta::syntax",
            DiagKind::Schema => "aorta::schema",
            DiagKind::Cell => "aorta::cell",
            DiagKind::UnknownName => "aorta::unknown_name",
            DiagKind::Registry => "aorta::registry",
            DiagKind::Usage => "aorta::usage",
        }
    }
}

/// A located, explained error. Display is `path: message`, so it reads well without colour too.
#[derive(Debug, Clone)]
pub struct Diag {
    pub kind: DiagKind,
    pub message: String,
    pub path: Option<FieldPath>,
    pub help: Option<String>,
    source: Option<NamedSource<Arc<str>>>,
    labels: Vec<(Range<usize>, String)>,
}

impl Diag {
    pub fn new(kind: DiagKind, message: impl Into<String>) -> Self {
        Diag { kind, message: message.into(), path: None, help: None, source: None, labels: Vec::new() }
    }

    pub fn with_path(mut self, path: &FieldPath) -> Self {
        if !path.is_root() {
            self.path = Some(path.clone());
        }
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Points the diagnostic at `span` of `file` with a short label.
    pub fn at(mut self, file: &SourceFile, span: Range<usize>, label: impl Into<String>) -> Self {
        self.source = Some(file.named_source());
        self.labels.push((span, label.into()));
        self
    }

    /// Adds a second location in the same file (e.g. where a duplicate was first defined).
    pub fn also_at(mut self, span: Range<usize>, label: impl Into<String>) -> Self {
        self.labels.push((span, label.into()));
        self
    }

    pub fn file_name(&self) -> Option<&str> {
        self.source.as_ref().map(|s| s.name())
    }

    /// The first labelled span, for tests and machine-readable output.
    pub fn primary_span(&self) -> Option<Range<usize>> {
        self.labels.first().map(|(r, _)| r.clone())
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{p}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Diag {}

impl Diagnostic for Diag {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.kind.code()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source.as_ref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() || self.source.is_none() {
            return None;
        }
        Some(Box::new(self.labels.iter().enumerate().map(|(i, (span, label))| {
            let len = span.end.saturating_sub(span.start);
            let label = (!label.is_empty()).then(|| label.clone());
            if i == 0 {
                LabeledSpan::new_primary_with_span(label, (span.start, len))
            } else {
                LabeledSpan::new_with_span(label, (span.start, len))
            }
        })))
    }
}
