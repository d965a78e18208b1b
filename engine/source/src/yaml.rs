//! Builds the spanned [`Node`] tree from saphyr-parser's event stream.
//!
//! Behaves like PyYAML's `safe_load`: one document, anchors/aliases and `<<` merge keys,
//! YAML 1.1 scalars, no language-specific tags. JSON files get JSON scalar rules.

use crate::scalar::{resolve_json, resolve_yaml11, ScalarError};
use crate::{Diag, DiagKind, Node, SourceFile, Value};
use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

/// Nesting beyond this is refused, so hostile input cannot exhaust the stack downstream.
const MAX_DEPTH: usize = 200;
/// A document of more nodes than this, aliases expanded, is refused ("billion laughs"). A
/// string counts as one node per 64 bytes of an alias's expansion, so aliases of one long
/// string cannot fill memory either. A 10,000-cell recipe has about 80,000 nodes; 810,000
/// (four levels of 30 aliases) took 6 s to plan in a debug build.
pub const MAX_NODES: usize = 250_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    Yaml,
    Json,
}

impl Syntax {
    /// `.json` files are JSON; everything else is YAML (JSON is valid YAML), as in AORTA.
    pub fn for_path(path: &Path) -> Syntax {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => Syntax::Json,
            _ => Syntax::Yaml,
        }
    }
}

/// Parses exactly one document. An empty document yields a `Null` node.
pub fn parse_document(file: &SourceFile, syntax: Syntax) -> Result<Node, Box<Diag>> {
    if syntax == Syntax::Json {
        check_json_syntax(file)?;
    }
    let offsets = CharOffsets::new(file.text());
    let mut builder = Builder {
        file,
        syntax,
        offsets: &offsets,
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        nodes: 0,
        merge_keys: Default::default(),
    };
    let mut parser = Parser::new_from_str(file.text());
    let mut documents = 0;
    while let Some(item) = parser.next_event() {
        let (event, span) = item.map_err(|e| {
            let at = offsets.byte(e.marker().index());
            Box::new(
                Diag::new(
                    DiagKind::Syntax,
                    format!("{} is not valid YAML: {}", file.name(), e.info()),
                )
                .at(file, at..at, "here")
                .with_help("check indentation, colons and quotes around this line"),
            )
        })?;
        match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    let at = offsets.range(span);
                    return Err(Box::new(
                        Diag::new(
                            DiagKind::Syntax,
                            format!("{} holds more than one YAML document", file.name()),
                        )
                        .at(file, at, "second document starts here")
                        .with_help("a recipe is a single document; remove the extra `---`"),
                    ));
                }
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
            other => builder.event(other, span)?,
        }
    }
    Ok(builder.root.unwrap_or_else(|| Node::new(Value::Null, 0..0)))
}

/// serde_json gives exact line/column for JSON syntax errors; the YAML parser would not.
fn check_json_syntax(file: &SourceFile) -> Result<(), Box<Diag>> {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(file.text()) {
        let at = line_col_to_byte(file.text(), e.line(), e.column());
        return Err(Box::new(
            Diag::new(
                DiagKind::Syntax,
                format!("{} is not valid JSON: {e}", file.name()),
            )
            .at(file, at..at, "here")
            .with_help("JSON needs double quotes, no trailing commas and no comments"),
        ));
    }
    Ok(())
}

fn line_col_to_byte(text: &str, line: usize, col: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let rest = &text[line_start.min(text.len())..];
    let col_bytes: usize = rest
        .chars()
        .take(col.saturating_sub(1))
        .map(char::len_utf8)
        .sum();
    (line_start + col_bytes).min(text.len())
}

/// saphyr reports positions in characters; miette wants bytes.
struct CharOffsets {
    /// Byte offset of each char index; empty when the text is ASCII (identity mapping).
    table: Vec<usize>,
    len: usize,
}

impl CharOffsets {
    fn new(text: &str) -> Self {
        let table = if text.is_ascii() {
            Vec::new()
        } else {
            text.char_indices().map(|(b, _)| b).collect()
        };
        CharOffsets {
            table,
            len: text.len(),
        }
    }

    fn byte(&self, char_index: usize) -> usize {
        if self.table.is_empty() {
            char_index.min(self.len)
        } else {
            self.table.get(char_index).copied().unwrap_or(self.len)
        }
    }

    fn range(&self, span: Span) -> Range<usize> {
        self.byte(span.start.index())..self.byte(span.end.index())
    }
}

enum Frame {
    Seq {
        items: Vec<Node>,
        start: usize,
        anchor: usize,
    },
    Map {
        entries: Vec<(Node, Node)>,
        pending_key: Option<Node>,
        start: usize,
        anchor: usize,
    },
}

struct Builder<'a> {
    file: &'a SourceFile,
    syntax: Syntax,
    offsets: &'a CharOffsets,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    nodes: usize,
    /// Source offsets of plain `<<` keys: only those are YAML merge keys (a quoted "<<" is text).
    merge_keys: std::collections::HashSet<usize>,
}

impl Builder<'_> {
    fn error(&self, span: Range<usize>, message: String, help: &str) -> Box<Diag> {
        Box::new(
            Diag::new(DiagKind::Syntax, message)
                .at(self.file, span, "here")
                .with_help(help),
        )
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), Box<Diag>> {
        let range = self.offsets.range(span);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = self.scalar(&text, style, tag.as_deref(), range.clone())?;
                if style == ScalarStyle::Plain && tag.is_none() && text == "<<" {
                    self.merge_keys.insert(range.start);
                }
                self.push(Node::new(value, range), anchor)
            }
            Event::Alias(id) => {
                let Some(anchored) = self.anchors.get(&id) else {
                    return Err(self.error(
                        range,
                        "alias refers to an unknown anchor".into(),
                        "define the `&anchor` before using `*anchor`",
                    ));
                };
                // Counted before it is copied: the copy is what must not happen.
                self.nodes += count_nodes(anchored);
                if self.nodes > MAX_NODES {
                    return Err(self.error(
                        range,
                        format!("aliases expand to too many nodes (more than {MAX_NODES})"),
                        "do not nest aliases of aliases",
                    ));
                }
                let node = anchored.clone();
                self.push(
                    Node {
                        span: range,
                        ..node
                    },
                    0,
                )
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag)
                if tag.as_deref().is_some_and(|t| !is_collection_tag(t)) =>
            {
                let _ = anchor;
                let tag = tag.as_deref().map(show_tag).unwrap_or_default();
                Err(self.error(
                    range,
                    format!("unsupported tag {tag}"),
                    "recipes are plain data; remove the tag",
                ))
            }
            Event::SequenceStart(anchor, _) => {
                self.enter(range.clone())?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    start: range.start,
                    anchor,
                });
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                self.enter(range.clone())?;
                self.stack.push(Frame::Map {
                    entries: Vec::new(),
                    pending_key: None,
                    start: range.start,
                    anchor,
                });
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq {
                    items,
                    start,
                    anchor,
                }) => {
                    let end = items.last().map_or(range.end, |n| n.span.end.max(start));
                    self.push(Node::new(Value::Seq(items), start..end.max(start)), anchor)
                }
                _ => Err(self.error(range, "unbalanced sequence".into(), "check the brackets")),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Map {
                    entries,
                    start,
                    anchor,
                    ..
                }) => {
                    let start = entries
                        .first()
                        .map_or(start, |(k, _)| k.span.start.min(start.max(k.span.start)));
                    let end = entries
                        .last()
                        .map_or(range.end, |(_, v)| v.span.end.max(start));
                    let entries = apply_merge_keys(self.file, entries, &self.merge_keys)?;
                    self.push(Node::new(Value::Map(entries), start..end), anchor)
                }
                _ => Err(self.error(range, "unbalanced mapping".into(), "check the braces")),
            },
            _ => Ok(()),
        }
    }

    fn enter(&self, range: Range<usize>) -> Result<(), Box<Diag>> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.error(
                range,
                format!("nesting deeper than {MAX_DEPTH} levels"),
                "flatten the structure",
            ));
        }
        Ok(())
    }

    fn scalar(
        &self,
        text: &str,
        style: ScalarStyle,
        tag: Option<&Tag>,
        range: Range<usize>,
    ) -> Result<Value, Box<Diag>> {
        let resolve = |s: &str| match self.syntax {
            Syntax::Yaml => resolve_yaml11(s),
            Syntax::Json => resolve_json(s),
        };
        let value = match tag {
            Some(t) if !is_core(t) => Err(ScalarError::UnsupportedTag(show_tag(t))),
            Some(t) => match t.suffix.as_str() {
                "str" => Ok(Value::Str(text.to_string())),
                "null" | "bool" | "int" | "float" => resolve_yaml11(text).and_then(|v| {
                    let ok = matches!(
                        (t.suffix.as_str(), &v),
                        ("null", Value::Null)
                            | ("bool", Value::Bool(_))
                            | ("int", Value::Int(_))
                            | ("float", Value::Float(_))
                    );
                    match (ok, t.suffix.as_str(), &v) {
                        (true, _, _) => Ok(v),
                        (false, "float", Value::Int(i)) => Ok(Value::Float(*i as f64)),
                        _ => Err(ScalarError::NotTagged {
                            text: text.to_string(),
                            tag: t.suffix.clone(),
                        }),
                    }
                }),
                other => Err(ScalarError::UnsupportedTag(format!("!!{other}"))),
            },
            None if style == ScalarStyle::Plain => resolve(text),
            None => Ok(Value::Str(text.to_string())),
        };
        value.map_err(|m| {
            self.error(
                range,
                m.to_string(),
                "quote the value to make it a string, or fix the number",
            )
        })
    }

    fn push(&mut self, node: Node, anchor: usize) -> Result<(), Box<Diag>> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error(
                node.span,
                format!("the document has too many values (more than {MAX_NODES})"),
                "a recipe or registry this large is not one aorta can plan; split it",
            ));
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                pending_key,
                ..
            }) => match pending_key.take() {
                None => *pending_key = Some(node),
                Some(key) => entries.push((key, node)),
            },
        }
        Ok(())
    }
}

fn is_core(tag: &Tag) -> bool {
    tag.is_yaml_core_schema() || tag.handle == "!!"
}

/// `!!python/tuple` rather than saphyr's expanded `tag:yaml.org,2002:` form.
fn show_tag(tag: &Tag) -> String {
    if is_core(tag) {
        format!("!!{}", tag.suffix)
    } else {
        tag.to_string()
    }
}

/// Tags `safe_load` builds plain lists and mappings from; `!!python/tuple` and friends are not.
fn is_collection_tag(tag: &Tag) -> bool {
    is_core(tag) && matches!(tag.suffix.as_str(), "seq" | "map" | "set")
}

fn count_nodes(node: &Node) -> usize {
    1 + match &node.value {
        Value::Str(s) => s.len() / 64,
        Value::Seq(items) => items.iter().map(count_nodes).sum(),
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| count_nodes(k) + count_nodes(v))
            .sum(),
        _ => 0,
    }
}

/// YAML 1.1 merge keys: `<<: *base` (or a list of them) adds entries not already present.
/// A merge value that is not a mapping (or list of mappings) is an error, as in PyYAML.
fn apply_merge_keys(
    file: &SourceFile,
    entries: Vec<(Node, Node)>,
    merge_keys: &std::collections::HashSet<usize>,
) -> Result<Vec<(Node, Node)>, Box<Diag>> {
    let is_merge = |k: &Node| k.as_str() == Some("<<") && merge_keys.contains(&k.span.start);
    if !entries.iter().any(|(k, _)| is_merge(k)) {
        return Ok(entries);
    }
    let mut own = Vec::new();
    let mut merged = Vec::new();
    for (k, v) in entries {
        if !is_merge(&k) {
            own.push((k, v));
            continue;
        }
        let sources: Vec<&Node> = match &v.value {
            Value::Seq(items) => items.iter().collect(),
            _ => vec![&v],
        };
        for src in sources {
            match src.as_map() {
                Some(m) => merged.extend(m.iter().cloned()),
                None => {
                    return Err(Box::new(
                        Diag::new(
                            DiagKind::Syntax,
                            format!(
                                "a merge key (<<) needs a mapping or a list of mappings, got {}",
                                src.type_name()
                            ),
                        )
                        .at(file, src.span.clone(), "not a mapping")
                        .also_at(k.span.clone(), "merge key")
                        .with_help("write <<: *anchor where the anchor names a mapping"),
                    ))
                }
            }
        }
    }
    let mut out: Vec<(Node, Node)> = Vec::new();
    for (k, v) in merged {
        let shadowed = own.iter().any(|(ok, _)| ok.value == k.value)
            || out.iter().any(|(ok, _)| ok.value == k.value);
        if !shadowed {
            out.push((k, v));
        }
    }
    out.extend(own);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        parse_document(&SourceFile::new("t.yaml", text), Syntax::Yaml).unwrap()
    }

    #[test]
    fn spans_point_at_values() {
        let text = "a: 1\nb:\n  - x\n  - 'y'\n";
        let n = parse(text);
        let b = n.get("b").unwrap().as_seq().unwrap();
        assert_eq!(&text[b[1].span.clone()], "'y'");
        assert_eq!(&text[n.get("a").unwrap().span.clone()], "1");
        assert_eq!(n.get("a").unwrap().value, Value::Int(1));
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let n = parse("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n");
        let other = n.get("other").unwrap();
        assert_eq!(other.get("x").unwrap().value, Value::Int(1));
        assert_eq!(other.get("y").unwrap().value, Value::Int(3));
    }

    #[test]
    fn quoted_merge_key_is_text() {
        let n = parse("a:\n  '<<': x\n");
        assert_eq!(
            n.get("a").unwrap().get("<<").unwrap().value,
            Value::Str("x".into())
        );
        assert!(parse_document(&SourceFile::new("t.yaml", "a:\n  <<: 3\n"), Syntax::Yaml).is_err());
    }

    #[test]
    fn merge_key_errors_are_located() {
        // The reproduction: `confound: {<<: 1}` had no location.
        let text = "schema_version: 1\nconfound: {<<: 1}\n";
        let e = parse_document(&SourceFile::new("t.yaml", text), Syntax::Yaml).unwrap_err();
        let span = e.primary_span().expect("located");
        assert_eq!(&text[span], "1");
        assert_eq!(e.line_col(), Some((2, 16)));
        let text = "a:\n  <<: [{x: 1}, oops]\n";
        let e = parse_document(&SourceFile::new("t.yaml", text), Syntax::Yaml).unwrap_err();
        assert_eq!(&text[e.primary_span().unwrap()], "oops");
    }

    #[test]
    fn aliases_of_long_strings_count_against_the_node_budget() {
        let big = "x".repeat(1 << 20);
        let mut text = format!("a: &a '{big}'\nb: [");
        text.push_str(&"*a, ".repeat(100));
        text.push_str("]\n");
        let e = parse_document(&SourceFile::new("t.yaml", text), Syntax::Yaml).unwrap_err();
        assert!(e.to_string().contains("too many nodes"), "{e}");
    }

    #[test]
    fn documents_of_too_many_values_are_refused() {
        let text = format!("a: [{}]\n", vec!["0"; MAX_NODES].join(","));
        let e = parse_document(&SourceFile::new("t.yaml", text), Syntax::Yaml).unwrap_err();
        assert!(e.to_string().contains("too many values"), "{e}");
        // Four levels of 30 aliases (810,000 nodes) used to parse, then took seconds to plan.
        let mut parts = vec![format!("&l0 [{}]", vec!["lol"; 30].join(", "))];
        for i in 1..4 {
            parts.push(format!(
                "&l{i} [{}]",
                vec![format!("*l{}", i - 1); 30].join(", ")
            ));
        }
        let e = parse_document(
            &SourceFile::new("t.yaml", format!("a: [{}]\n", parts.join(", "))),
            Syntax::Yaml,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("aliases expand to too many nodes"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_keys_last_wins() {
        assert_eq!(parse("a: 1\na: 2\n").get("a").unwrap().value, Value::Int(2));
    }

    #[test]
    fn errors_have_locations() {
        let f = SourceFile::new("bad.yaml", "a: [1, 2\nb: 3\n");
        let e = parse_document(&f, Syntax::Yaml).unwrap_err();
        assert!(e.primary_span().is_some());
        let f = SourceFile::new("bad.json", "{\"a\": 1,}");
        let e = parse_document(&f, Syntax::Json).unwrap_err();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
        let f = SourceFile::new("two.yaml", "a: 1\n---\nb: 2\n");
        assert!(parse_document(&f, Syntax::Yaml).is_err());
    }

    #[test]
    fn language_tags_on_collections_are_refused() {
        for text in [
            "a: !!python/tuple [1, 2]\n",
            "a: !!python/object:os.system {x: 1}\n",
            "a: !custom [1]\n",
        ] {
            assert!(
                parse_document(&SourceFile::new("t.yaml", text), Syntax::Yaml).is_err(),
                "{text}"
            );
        }
        assert_eq!(
            parse("a: !!seq [1]\n")
                .get("a")
                .unwrap()
                .as_seq()
                .unwrap()
                .len(),
            1
        );
        assert!(parse("a: !!map {x: 1}\n")
            .get("a")
            .unwrap()
            .get("x")
            .is_some());
    }

    #[test]
    fn unsupported_tags_are_refused() {
        let f = SourceFile::new("t.yaml", "a: !!python/object:os.system x\n");
        assert!(parse_document(&f, Syntax::Yaml).is_err());
        assert_eq!(
            parse("a: !!str 12\n").get("a").unwrap().value,
            Value::Str("12".into())
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let text = "[".repeat(10_000);
        assert!(parse_document(&SourceFile::new("d.yaml", text), Syntax::Yaml).is_err());
    }

    #[test]
    fn json_numbers_follow_json() {
        let f = SourceFile::new("t.json", "{\"a\": 1e3, \"b\": \"x\"}");
        let n = parse_document(&f, Syntax::Json).unwrap();
        assert_eq!(n.get("a").unwrap().value, Value::Float(1000.0));
    }

    #[test]
    fn non_ascii_spans_are_bytes() {
        let text = "é: 'ü'\nb: x\n";
        let n = parse(text);
        assert_eq!(&text[n.get("b").unwrap().span.clone()], "x");
    }
}
