//! One diagnostic type for every bad input: message, field path, location and hint.

use crate::excerpt::Excerpt;
use crate::{FieldPath, SourceFile};
use miette::{Diagnostic, LabeledSpan, SourceCode};
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

/// The most characters of a message or hint a diagnostic carries; the middle of longer text
/// (a quoted 40 MB value) is left out.
pub const MAX_MESSAGE_CHARS: usize = 1_000;
/// The most characters of a field path shown (paths quote keys from the file).
const MAX_PATH_CHARS: usize = 200;
/// The most characters of a label.
const MAX_LABEL_CHARS: usize = 200;

/// `text` if it has at most `max` characters; else its start and end with the middle left out.
pub fn shorten(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    // Cheap test first: a short byte length means a short character count.
    if text.len() <= max || text.chars().count() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let total = text.chars().count();
    let head_chars = max * 2 / 3;
    let tail_chars = max.saturating_sub(head_chars).saturating_sub(1).max(1);
    // Walk from each end: the middle of a 40 MB text is never iterated.
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .rev()
        .nth(tail_chars - 1)
        .map_or(head_end, |(i, _)| i)
        .max(head_end);
    let left_out = total - head_chars - tail_chars;
    std::borrow::Cow::Owned(format!(
        "{}…[{left_out} characters left out]…{}",
        &text[..head_end],
        &text[tail_start..]
    ))
}

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
    /// Input beyond one of aorta's size limits (file size, planned trials).
    Limit,
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
            DiagKind::Limit => "aorta::limit",
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
    source: Option<SourceFile>,
    /// Byte ranges in `source`, the primary label first.
    labels: Vec<(Range<usize>, String)>,
    /// What the renderer is shown of `source`: built on first use, reset when labels change.
    excerpt: OnceLock<Excerpt>,
}

impl Diag {
    pub fn new(kind: DiagKind, message: impl Into<String>) -> Self {
        let message = bounded(message.into(), MAX_MESSAGE_CHARS);
        Diag {
            kind,
            message,
            path: None,
            help: None,
            source: None,
            labels: Vec::new(),
            excerpt: OnceLock::new(),
        }
    }

    pub fn with_path(mut self, path: &FieldPath) -> Self {
        if !path.is_root() {
            self.path = Some(path.clone());
        }
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(bounded(help.into(), MAX_MESSAGE_CHARS));
        self
    }

    /// Points the diagnostic at `span` of `file` with a short label.
    pub fn at(mut self, file: &SourceFile, span: Range<usize>, label: impl Into<String>) -> Self {
        self.source = Some(file.clone());
        self.labels
            .push((span, bounded(label.into(), MAX_LABEL_CHARS)));
        self.excerpt = OnceLock::new();
        self
    }

    /// Adds a second location in the same file (e.g. where a duplicate was first defined).
    pub fn also_at(mut self, span: Range<usize>, label: impl Into<String>) -> Self {
        self.labels
            .push((span, bounded(label.into(), MAX_LABEL_CHARS)));
        self.excerpt = OnceLock::new();
        self
    }

    pub fn file_name(&self) -> Option<&str> {
        self.source.as_ref().map(SourceFile::name)
    }

    /// 1-based line and column (in characters) of the primary label, if it has one.
    pub fn line_col(&self) -> Option<(usize, usize)> {
        let (file, span) = (self.source.as_ref()?, self.primary_span()?);
        Some(file.line_col(span.start))
    }

    fn excerpt(&self) -> Option<&Excerpt> {
        let file = self.source.as_ref()?;
        Some(
            self.excerpt
                .get_or_init(|| Excerpt::new(file.name(), file.text(), &self.labels)),
        )
    }

    /// The first labelled span, for tests and machine-readable output.
    pub fn primary_span(&self) -> Option<Range<usize>> {
        self.labels.first().map(|(r, _)| r.clone())
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(
                f,
                "{}: {}",
                shorten(p.as_str(), MAX_PATH_CHARS),
                self.message
            ),
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
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.excerpt().map(|e| e as &dyn SourceCode)
    }

    /// Spans in the excerpt (see [`Excerpt`]), not in the file.
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        let excerpt = self.excerpt()?;
        Some(Box::new(excerpt.labels.iter().enumerate().map(
            |(i, (span, label))| {
                let len = span.end.saturating_sub(span.start);
                let label = (!label.is_empty()).then(|| label.clone());
                if i == 0 {
                    LabeledSpan::new_primary_with_span(label, (span.start, len))
                } else {
                    LabeledSpan::new_with_span(label, (span.start, len))
                }
            },
        )))
    }
}

fn bounded(text: String, max: usize) -> String {
    match shorten(&text, max) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(short) => short,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_LINE_CHARS;
    use miette::{
        GraphicalReportHandler, GraphicalTheme, MietteDiagnostic, NamedSource, ReportHandler,
    };
    use std::time::{Duration, Instant};

    fn render(d: &dyn Diagnostic) -> String {
        struct Show<'a>(&'a dyn Diagnostic);
        impl fmt::Debug for Show<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
                    .with_width(100)
                    .with_links(false)
                    .debug(self.0, f)
            }
        }
        format!("{:?}", Show(d))
    }

    /// What miette renders for the same labels over the whole file (the old behaviour).
    fn render_whole(d: &Diag, file: &SourceFile) -> String {
        let labels = d.labels.iter().enumerate().map(|(i, (r, l))| {
            let l = (!l.is_empty()).then(|| l.clone());
            if i == 0 {
                LabeledSpan::new_primary_with_span(l, (r.start, r.end - r.start))
            } else {
                LabeledSpan::new_with_span(l, (r.start, r.end - r.start))
            }
        });
        let mut m = MietteDiagnostic::new(d.to_string())
            .with_code(d.kind.code())
            .with_labels(labels);
        if let Some(h) = &d.help {
            m = m.with_help(h.clone());
        }
        let report = miette::Report::new(m)
            .with_source_code(NamedSource::new(file.name(), file.text().to_string()));
        render(report.as_ref())
    }

    #[test]
    fn short_lines_render_as_miette_renders_the_whole_file() {
        let text: String = (1..=120)
            .map(|i| format!("key{i}: [value {i}, 'é', other]\n"))
            .collect();
        let file = SourceFile::new("r.yaml", text.clone());
        let at = |line: usize, word: &str| {
            let start: usize = text
                .split_inclusive('\n')
                .take(line - 1)
                .map(str::len)
                .sum();
            let off = start + text[start..].find(word).unwrap();
            off..off + word.len()
        };
        let cases = vec![
            Diag::new(DiagKind::Schema, "one label").at(&file, at(1, "value"), "here"),
            Diag::new(DiagKind::Schema, "two on a line")
                .at(&file, at(7, "value"), "a")
                .also_at(at(7, "other"), "b"),
            Diag::new(DiagKind::Schema, "near")
                .at(&file, at(20, "key20"), "again")
                .also_at(at(17, "key17"), "first"),
            Diag::new(DiagKind::Schema, "deep, near")
                .at(&file, at(90, "key90"), "again")
                .also_at(at(70, "key70"), "first"),
            Diag::new(DiagKind::Cell, "empty span")
                .at(&file, at(5, "é").start..at(5, "é").start, "")
                .with_help("a hint"),
            Diag::new(DiagKind::Cell, "multi-line").at(
                &file,
                at(3, "value").start..at(6, "other").end,
                "spans lines",
            ),
            Diag::new(DiagKind::Syntax, "at the end").at(&file, text.len()..text.len(), "end"),
        ];
        for d in &cases {
            assert_eq!(render(d), render_whole(d, &file), "{d}");
        }
    }

    #[test]
    fn a_column_past_65535_renders_without_panicking() {
        // The reproduction: a 65,540-character `ticket:` line, then an error after it.
        let long = format!("ticket: {}\n", "x".repeat(65_540));
        let text = format!("schema_version: 1\n{long}x: y\n");
        let file = SourceFile::new("r.yaml", text.clone());
        let key = text.find("x: y").unwrap();
        let d = Diag::new(DiagKind::Schema, "unknown key 'x'").at(&file, key..key + 1, "");
        let out = render(&d);
        assert!(
            out.contains("[r.yaml:3:1]") && out.contains("x: y"),
            "{out}"
        );
        // A label far into the long line itself: a window around it, the true column in the header.
        let off = 18 + 8 + 65_000;
        let d = Diag::new(DiagKind::Syntax, "bad")
            .at(&file, off..off + 3, "here")
            .also_at(0..14, "start");
        let out = render(&d);
        assert!(out.contains("[r.yaml:2:65009]"), "{out}");
        assert!(out.contains("…xxxx") && out.contains("here"), "{out}");
        assert!(
            out.lines().all(|l| l.chars().count() < MAX_LINE_CHARS + 40),
            "{out}"
        );
        // One line of 64 KiB + JSON with the error at its end.
        let json = format!(
            "{{\"schema_version\": 1, \"ticket\": \"{}\", \"nope\": 1}}",
            "y".repeat(70_000)
        );
        let file = SourceFile::new("r.json", json.clone());
        let at = json.find("\"nope\"").unwrap();
        let out =
            render(&Diag::new(DiagKind::Schema, "unknown key 'nope'").at(&file, at..at + 6, ""));
        assert!(
            out.contains(&format!("[r.json:1:{}]", at + 1)) && out.contains("\"nope\": 1}"),
            "{out}"
        );
    }

    #[test]
    fn a_40_mb_line_is_quoted_in_bounded_time_and_size() {
        let text = format!("a: '{}'\nb: 1\n", "z".repeat(40 << 20));
        let file = SourceFile::new("big.yaml", text.clone());
        let t0 = Instant::now();
        let d = Diag::new(
            DiagKind::Schema,
            format!("must be a number, got {}", &text[3..]),
        )
        .at(&file, 3..text.len() - 6, "this value")
        .with_help(text.clone());
        let out = render(&d);
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t0.elapsed()
        );
        assert!(out.len() < 8_000, "{} bytes", out.len());
        assert!(out.contains("characters left out"), "{out}");
        assert!(d.to_string().chars().count() <= MAX_MESSAGE_CHARS + 40);
    }

    #[test]
    fn shorten_keeps_head_and_tail() {
        assert_eq!(shorten("abc", 10), "abc");
        let long = "é".repeat(50);
        let s = shorten(&long, 20);
        assert!(
            s.starts_with("éééé") && s.ends_with('é') && s.contains("left out"),
            "{s}"
        );
    }

    #[test]
    fn spans_past_the_end_or_inside_a_character_do_not_panic() {
        let file = SourceFile::new("t.yaml", "é: 1\n");
        for span in [0..1, 1..2, 3..100, 100..200, 5..5] {
            let _ = render(&Diag::new(DiagKind::Schema, "x").at(&file, span, "l"));
        }
        let empty = SourceFile::new("e.yaml", "");
        let _ = render(&Diag::new(DiagKind::Schema, "x").at(&empty, 0..0, "l"));
    }
}
