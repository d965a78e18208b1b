//! What a diagnostic shows of its file: the lines around its labels, each cut to a window of
//! at most [`MAX_LINE_CHARS`] characters.
//!
//! miette's renderer is handed this excerpt, never the whole file. That bounds the work of
//! rendering (a 40 MB one-line file used to cost ~0.7 s per MB), and it keeps every rendered
//! column small: miette 7.6 panics on a label whose column is past 65,535 (a 64 KiB
//! one-line JSON recipe with an unknown key did that). Lines no longer than the window and
//! labels close to each other render exactly as miette renders the full file.

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};
use std::ops::Range;

/// The longest line, in characters, a diagnostic quotes; longer lines are cut to a window of
/// this many characters around the label, with `…` where text was left out.
pub const MAX_LINE_CHARS: usize = 160;
/// How many characters of a long line are kept before a label that sits on it.
const LEAD_CHARS: usize = 40;
/// Lines kept around each label (miette shows one).
const CONTEXT_LINES: usize = 2;
/// Labels this many lines apart or closer share one excerpt segment (and one rendered box).
const JOIN_GAP: usize = 40;
/// A label spanning more lines than this is shortened to its first line.
const MAX_LABEL_LINES: usize = 40;
const ELLIPSIS: &str = "…";

/// One kept line: where it sits in the excerpt, and what was cut from it.
#[derive(Debug, Clone)]
struct KeptLine {
    /// 0-based line number in the file.
    number: usize,
    /// Excerpt offset of the line's first byte (a leading `…` when cut on the left).
    start: usize,
    /// File offset of the first byte kept.
    orig_start: usize,
    /// Bytes of the file kept (the newline included when the line was not cut on the right).
    kept: usize,
    /// Bytes of `…` written before the kept text (0 or 3).
    prefix: usize,
    /// Bytes of the line cut on the left.
    left_cut: usize,
}

/// Consecutive kept lines; segments are rendered independently so their line numbers are right.
#[derive(Debug, Clone)]
struct Segment {
    range: Range<usize>,
    lines: Vec<KeptLine>,
}

/// The excerpt of one file for one diagnostic, with the labels mapped into it.
#[derive(Debug, Clone)]
pub(crate) struct Excerpt {
    name: String,
    text: String,
    segments: Vec<Segment>,
    pub(crate) labels: Vec<(Range<usize>, String)>,
}

// memchr rather than str searches: these run over whole files of up to tens of megabytes,
// and memchr is fast in debug builds too (dependencies are optimised there).

/// A line of `text` starting at `start`: its end (before `\n`) and the next line's start.
fn line_at(text: &str, start: usize) -> (usize, usize) {
    match memchr::memchr(b'\n', &text.as_bytes()[start..]) {
        Some(i) => (start + i, start + i + 1),
        None => (text.len(), text.len()),
    }
}

fn line_start_of(text: &str, offset: usize) -> usize {
    memchr::memrchr(b'\n', &text.as_bytes()[..offset]).map_or(0, |i| i + 1)
}

fn newlines(text: &str) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes()).count()
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The byte offset `n` characters before `offset`, not before `floor`.
fn back_chars(text: &str, offset: usize, floor: usize, n: usize) -> usize {
    text[floor..offset]
        .char_indices()
        .rev()
        .take(n)
        .last()
        .map_or(offset, |(i, _)| floor + i)
}

/// The byte offset `n` characters after `offset`, not past `ceil`.
fn forward_chars(text: &str, offset: usize, ceil: usize, n: usize) -> usize {
    text[offset..ceil]
        .char_indices()
        .nth(n)
        .map_or(ceil, |(i, _)| offset + i)
}

impl Excerpt {
    /// Builds the excerpt of `text` that `labels` (file byte ranges) need. A long line's window
    /// is placed around the first label (the primary one) that starts on it.
    pub(crate) fn new(name: &str, text: &str, labels: &[(Range<usize>, String)]) -> Excerpt {
        // Clamp every label to the text and to character boundaries; shorten very long ones.
        let mut spans: Vec<(Range<usize>, usize, usize)> = Vec::with_capacity(labels.len());
        for (r, _) in labels {
            let start = floor_boundary(text, r.start);
            let mut end = floor_boundary(text, r.end.max(r.start)).max(start);
            let first_line = newlines(&text[..start]);
            let mut last_line = first_line
                + newlines(&text[start..floor_boundary(text, end.saturating_sub(1)).max(start)]);
            if last_line - first_line > MAX_LABEL_LINES {
                end = line_at(text, line_start_of(text, start)).0.max(start);
                last_line = first_line;
            }
            spans.push((start..end, first_line, last_line));
        }
        // Line ranges to keep, joined when close; each group is anchored at its first label.
        let mut order: Vec<usize> = (0..spans.len()).collect();
        order.sort_by_key(|&i| spans[i].1);
        let mut groups: Vec<(usize, usize, usize)> = Vec::new(); // (first line, last line, anchor label)
        for i in order {
            let (first, last) = (
                spans[i].1.saturating_sub(CONTEXT_LINES),
                spans[i].2 + CONTEXT_LINES,
            );
            match groups.last_mut() {
                Some(g) if first <= g.1 + JOIN_GAP => g.1 = g.1.max(last),
                _ => groups.push((first, last, i)),
            }
        }
        let mut out = Excerpt {
            name: name.to_string(),
            text: String::new(),
            segments: Vec::new(),
            labels: Vec::new(),
        };
        for (first, last, anchor) in groups {
            // Walk back from the anchor label's line to the segment's first line.
            let mut start = line_start_of(text, spans[anchor].0.start);
            let mut number = spans[anchor].1;
            while number > first && start > 0 {
                start = line_start_of(text, start - 1);
                number -= 1;
            }
            let seg_start = out.text.len();
            let mut lines = Vec::new();
            loop {
                let (end, next) = line_at(text, start);
                let on_line: Vec<&Range<usize>> = spans
                    .iter()
                    .filter(|(r, _, _)| r.start >= start && r.start <= end)
                    .map(|(r, _, _)| r)
                    .collect();
                lines.push(out.keep_line(
                    text,
                    number,
                    start,
                    end,
                    next,
                    on_line.first().map(|r| r.start),
                ));
                if number >= last || next >= text.len() {
                    break;
                }
                start = next;
                number += 1;
            }
            out.segments.push(Segment {
                range: seg_start..out.text.len(),
                lines,
            });
        }
        out.labels = labels
            .iter()
            .zip(&spans)
            .map(|((_, label), (r, _, _))| {
                (
                    out.map(r.start)..out.map(r.end).max(out.map(r.start)),
                    label.clone(),
                )
            })
            .collect();
        out
    }

    /// Appends one line (cut to the window if long) and records how it maps.
    fn keep_line(
        &mut self,
        text: &str,
        number: usize,
        start: usize,
        end: usize,
        next: usize,
        label_at: Option<usize>,
    ) -> KeptLine {
        let chars = text[start..end].chars().count();
        let excerpt_start = self.text.len();
        if chars <= MAX_LINE_CHARS {
            self.text.push_str(&text[start..next]);
            return KeptLine {
                number,
                start: excerpt_start,
                orig_start: start,
                kept: next - start,
                prefix: 0,
                left_cut: 0,
            };
        }
        let from = match label_at {
            Some(at) => back_chars(text, at, start, LEAD_CHARS),
            None => start,
        };
        let to = forward_chars(text, from, end, MAX_LINE_CHARS);
        let prefix = if from > start { ELLIPSIS.len() } else { 0 };
        if prefix > 0 {
            self.text.push_str(ELLIPSIS);
        }
        self.text.push_str(&text[from..to]);
        if to < end {
            self.text.push_str(ELLIPSIS);
        }
        if next > end {
            self.text.push('\n');
        }
        KeptLine {
            number,
            start: excerpt_start,
            orig_start: from,
            kept: to - from,
            prefix,
            left_cut: from - start,
        }
    }

    /// Maps a file offset (on a kept line) to the excerpt, clamped to the kept text.
    fn map(&self, offset: usize) -> usize {
        let line = self
            .segments
            .iter()
            .flat_map(|s| &s.lines)
            .rev()
            .find(|l| l.orig_start - l.left_cut <= offset);
        match line {
            Some(l) => {
                l.start + l.prefix + offset.clamp(l.orig_start, l.orig_start + l.kept)
                    - l.orig_start
            }
            None => 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let offset = span.offset();
        let (i, seg) = self
            .segments
            .iter()
            .enumerate()
            .find(|(_, s)| s.range.start <= offset && offset <= s.range.end)
            .ok_or(MietteError::OutOfBounds)?;
        let local = &self.text.as_bytes()[seg.range.clone()];
        let local_offset = offset - seg.range.start;
        let local_len = span.len().min(seg.range.end - offset);
        let c = local.read_span(
            &SourceSpan::new(local_offset.into(), local_len),
            before,
            after,
        )?;
        // A segment's lines are consecutive; an offset at its very end can be one line past them.
        let first = seg.lines.first().map_or(0, |l| l.number);
        let line = first + c.line();
        let (prefix, left_cut) = seg
            .lines
            .get(c.line())
            .map_or((0, 0), |l| (l.prefix, l.left_cut));
        let column = if before == 0 {
            c.column().saturating_sub(prefix) + left_cut
        } else {
            0
        };
        // miette joins two labels' boxes when `line + line_count` reaches the other's line;
        // keep that decision within a segment, never across (line numbers would be wrong).
        let mut line_count = first + c.line_count();
        if let Some(next) = self.segments.get(i + 1).and_then(|s| s.lines.first()) {
            line_count = line_count.min(next.number.saturating_sub(line + 1));
        }
        let start = seg.range.start + c.span().offset();
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            c.data(),
            SourceSpan::new(start.into(), c.data().len()),
            line,
            column,
            line_count,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(e: &Excerpt, i: usize) -> &str {
        &e.text()[e.labels[i].0.clone()]
    }

    #[test]
    fn long_lines_are_cut_around_their_label() {
        let line = format!("{}NEEDLE{}", "a".repeat(100_000), "é".repeat(100_000));
        let text = format!("first: 1\n{line}\nlast: 2\n");
        let at = text.find("NEEDLE").unwrap();
        let e = Excerpt::new("t", &text, &[(at..at + 6, "x".into()), (0..5, "y".into())]);
        assert_eq!(labelled(&e, 0), "NEEDLE");
        assert_eq!(labelled(&e, 1), "first");
        assert!(e.text().len() < 1_000, "{}", e.text().len());
        let cut = e.text().lines().nth(1).unwrap();
        assert!(
            cut.starts_with('…') && cut.ends_with('…') && cut.chars().count() == MAX_LINE_CHARS + 2,
            "{cut}"
        );
        // A label longer than the window is clipped to it.
        let e = Excerpt::new("t", &text, &[(9..9 + line.len(), "whole line".into())]);
        assert!(
            labelled(&e, 0).starts_with("aaa") && labelled(&e, 0).chars().count() == MAX_LINE_CHARS
        );
    }

    #[test]
    fn far_apart_labels_get_separate_segments_and_long_spans_shrink() {
        let text: String = (0..1_000).map(|i| format!("line {i}\n")).collect();
        let at = |i: usize| text.find(&format!("line {i}\n")).unwrap();
        let e = Excerpt::new(
            "t",
            &text,
            &[
                (at(900)..at(900) + 8, "a".into()),
                (at(10)..at(10) + 7, "b".into()),
            ],
        );
        assert_eq!(e.segments.len(), 2);
        assert_eq!(labelled(&e, 0), "line 900");
        assert_eq!(labelled(&e, 1), "line 10");
        assert_eq!(e.segments[1].lines[0].number, 900 - CONTEXT_LINES);
        let e = Excerpt::new("t", &text, &[(at(5)..at(500), "huge".into())]);
        assert_eq!(labelled(&e, 0), "line 5", "shortened to its first line");
        assert!(e.text().lines().count() <= 1 + 2 * CONTEXT_LINES);
    }
}
