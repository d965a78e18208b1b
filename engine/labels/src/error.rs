//! Errors, as `miette` diagnostics: every failure says where (file, line, column, source
//! snippet) and what to do next (a `help` line), because users meet them at the command line.

use std::fmt;
use std::path::{Path, PathBuf};

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode, SourceSpan};

use crate::label::LabelError;

/// What went wrong while resolving a label. Boxed inside [`LabelsError`] to keep `Result`s small.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum LabelsErrorKind {
    /// The spec was neither a valid label nor a recipe path.
    #[error(transparent)]
    #[diagnostic(transparent)]
    InvalidLabel(#[from] LabelError),

    /// Parsing or evaluating a BUCK / `.bzl` file failed.
    #[error("{}:{line}:{column}: {message}", file.display())]
    #[diagnostic(code(aorta::labels::starlark))]
    Starlark {
        /// The file the error points into (a BUCK file or a loaded `.bzl`).
        file: PathBuf,
        /// 1-based line of the error (1 when starlark gave no location).
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// Starlark's message, without its own snippet rendering.
        message: String,
        #[source_code]
        src: NamedSource<String>,
        #[label("here")]
        span: Option<SourceSpan>,
        #[help]
        help: String,
    },

    /// Neither a BUCK target nor a recipe file matches the label.
    #[error("{message}")]
    #[diagnostic(code(aorta::labels::no_target))]
    NoTarget {
        /// e.g. "no target 'x' in //recipes (BUCK declares 2 recipes) and no file recipes/x.yaml".
        message: String,
        /// Recipe names available in the package, closest to the requested one first.
        available: Vec<String>,
        #[help]
        help: String,
    },

    /// The label names a target, but of another rule than `aorta_recipe`.
    #[error("{label} is a `{rule}` target, not an aorta_recipe")]
    #[diagnostic(code(aorta::labels::not_a_recipe))]
    NotARecipe {
        label: String,
        rule: String,
        #[help]
        help: String,
    },

    /// The label's package directory does not exist.
    #[error("no package {label}: directory {} does not exist", dir.display())]
    #[diagnostic(code(aorta::labels::no_package))]
    NoPackage {
        label: String,
        dir: PathBuf,
        #[help]
        help: String,
    },

    /// A `//pkg/...` pattern matched nothing.
    #[error("{pattern} matches no recipes")]
    #[diagnostic(code(aorta::labels::no_recipes))]
    NoRecipes {
        pattern: String,
        #[help]
        help: String,
    },

    /// Reading a BUCK file, `.bzl` file or directory failed.
    #[error("cannot read {}: {source}", path.display())]
    #[diagnostic(code(aorta::labels::io))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The error type of [`crate::resolve`]: a boxed [`LabelsErrorKind`] that is a full
/// `miette::Diagnostic` (code, help, labels and source code all delegate to the kind).
#[derive(Debug)]
pub struct LabelsError(Box<LabelsErrorKind>);

impl LabelsError {
    /// What went wrong, for callers that want to branch on it.
    pub fn kind(&self) -> &LabelsErrorKind {
        &self.0
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> LabelsError {
        LabelsErrorKind::Io {
            path: path.to_owned(),
            source,
        }
        .into()
    }
}

impl<E: Into<LabelsErrorKind>> From<E> for LabelsError {
    fn from(e: E) -> Self {
        LabelsError(Box::new(e.into()))
    }
}

impl fmt::Display for LabelsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for LabelsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

impl Diagnostic for LabelsError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.code()
    }
    fn severity(&self) -> Option<miette::Severity> {
        self.0.severity()
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.help()
    }
    fn url<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.url()
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.0.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.0.labels()
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        self.0.related()
    }
    fn diagnostic_source(&self) -> Option<&dyn Diagnostic> {
        self.0.diagnostic_source()
    }
}

/// Converts a starlark error into a diagnostic pointing into the file starlark blamed.
///
/// Starlark spans carry their own `CodeMap` (file name + full source), so an error raised inside
/// a loaded `.bzl` points into that file even though we were evaluating a BUCK file. When there
/// is no span (rare: errors raised outside any expression) we blame `fallback` as a whole.
pub(crate) fn from_starlark(
    e: starlark::Error,
    root: &Path,
    fallback: (&Path, &str),
) -> LabelsError {
    let message = format!("{:#}", e.without_diagnostic()).trim().to_owned();
    let help = hint(&e, &message);
    let (file, src, span, line, column) = match e.span() {
        Some(fs) => {
            let resolved = fs.resolve_span();
            let begin = fs.span.begin().get() as usize;
            let span = SourceSpan::new(
                begin.into(),
                (fs.span.end().get() - fs.span.begin().get()) as usize,
            );
            let name = fs.file.filename();
            (
                root.join(name),
                NamedSource::new(name, fs.file.source().to_owned()),
                Some(span),
                resolved.begin.line + 1,
                resolved.begin.column + 1,
            )
        }
        None => {
            let name = fallback
                .0
                .strip_prefix(root)
                .unwrap_or(fallback.0)
                .display()
                .to_string();
            (
                fallback.0.to_owned(),
                NamedSource::new(name, fallback.1.to_owned()),
                None,
                1,
                1,
            )
        }
    };
    LabelsErrorKind::Starlark {
        file,
        line,
        column,
        message,
        src: src.with_language("Python"),
        span,
        help,
    }
    .into()
}

/// A next step tailored to the common failure classes.
fn hint(e: &starlark::Error, message: &str) -> String {
    use starlark::ErrorKind as K;
    match e.kind() {
        K::Parser(_) => "this is a Starlark (Python-like) syntax error; targets look like: aorta_recipe(name = \"x\", recipe = \"x.yaml\")".into(),
        K::Fail(_) => "the file called fail(); fix the condition its message describes".into(),
        _ if message.contains("not found") && message.contains("Variable") => {
            "every name must be built in or loaded: add load(\"//rules:aorta.bzl\", \"aorta_recipe\") at the top of the BUCK file".into()
        }
        _ if message.contains("cannot load") => {
            "load() paths look like \"//pkg:file.bzl\" (from the workspace root) or \":file.bzl\" (same package)".into()
        }
        _ if message.contains("attribute") || message.contains("target name") => {
            "declare recipes as aorta_recipe(name = \"x\", recipe = \"x.yaml\", mitigations_files = [...], labels = [...])".into()
        }
        _ => "fix the BUCK/.bzl file at the location shown; targets look like aorta_recipe(name = \"x\", recipe = \"x.yaml\")".into(),
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Msg(String);

/// A plain-message error raised from Starlark (a rule, an attribute) back to the evaluator.
/// Takes the message as text: starlark prints an error's chain when asked with `{:#}`, and the
/// typed errors here already say their cause inline.
pub(crate) fn err(msg: impl fmt::Display) -> starlark::Error {
    starlark::Error::new_other(Msg(msg.to_string()))
}
