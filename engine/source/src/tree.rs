//! The spanned value tree: YAML/JSON data with the byte span of every node.

use std::ops::Range;

/// About how many characters of a value [`Node::repr`] shows.
pub const MAX_REPR_CHARS: usize = 120;

fn has_room(out: &str) -> bool {
    out.len() <= MAX_REPR_CHARS || out.chars().count() <= MAX_REPR_CHARS
}

/// A parsed value. Mappings keep document order and duplicate keys (last one wins on lookup,
/// as in PyYAML, which AORTA recipes are written for).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    /// Byte range in the source text.
    pub span: Range<usize>,
}

impl Node {
    pub fn new(value: Value, span: Range<usize>) -> Self {
        Node { value, span }
    }

    /// A node not backed by a file (CLI values, defaults); its span is empty.
    pub fn synthetic(value: Value) -> Self {
        Node { value, span: 0..0 }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// Looks up a string key in a mapping; the last duplicate wins.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.get_entry(key).map(|(_, v)| v)
    }

    /// The key node and value node of `key`, for diagnostics that point at the key.
    pub fn get_entry(&self, key: &str) -> Option<(&Node, &Node)> {
        self.as_map()?
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(k, v)| (k, v))
    }

    /// A short span to point at for "this whole mapping" problems: its first line.
    pub fn head_span(&self) -> Range<usize> {
        match &self.value {
            Value::Map(m) if !m.is_empty() => m[0].0.span.clone(),
            Value::Seq(s) if !s.is_empty() && self.span.is_empty() => s[0].span.clone(),
            _ => self.span.clone(),
        }
    }

    /// How the value is described in messages ("expected a list, got a string").
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    /// A compact, Python-like rendering of the value for messages (`'abc'`, `3`, `[1, 2]`),
    /// at most about [`MAX_REPR_CHARS`] characters: longer values end in `…`.
    pub fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    /// Appends the rendering to `out`; `false` once `out` is full (and ends in `…`).
    fn write_repr(&self, out: &mut String) -> bool {
        let room = MAX_REPR_CHARS.saturating_sub(out.chars().count());
        match &self.value {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(&b.to_string()),
            Value::Int(i) => out.push_str(&i.to_string()),
            Value::Float(f) => out.push_str(&f.to_string()),
            Value::Str(s) => {
                let cut = s.char_indices().nth(room).map(|(i, _)| i);
                match cut {
                    None => out.push_str(&format!("{s:?}")),
                    Some(i) => {
                        let quoted = format!("{:?}", &s[..i]);
                        out.push_str(&quoted[..quoted.len() - 1]);
                        out.push_str("…\"");
                        return false;
                    }
                }
            }
            Value::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if !item.write_repr(out) || !has_room(out) {
                        out.push_str("…]");
                        return false;
                    }
                }
                out.push(']');
            }
            Value::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let full = k.write_repr(out) && {
                        out.push_str(": ");
                        v.write_repr(out)
                    };
                    if !full || !has_room(out) {
                        out.push_str("…}");
                        return false;
                    }
                }
                out.push('}');
            }
        }
        has_room(out)
    }

    /// [`repr`](Self::repr) without the length bound, for JSON keys (never for messages).
    fn full_repr(&self) -> String {
        match &self.value {
            Value::Str(s) => format!("{s:?}"),
            Value::Seq(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Node::full_repr)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Value::Map(entries) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{}: {}", k.full_repr(), v.full_repr()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => self.repr(),
        }
    }

    /// Converts to JSON (mapping keys become strings). Used for config payloads.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    let key = k.as_str().map_or_else(|| k.full_repr(), str::to_string);
                    map.insert(key, v.to_json());
                }
                J::Object(map)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Node {
        Node::synthetic(Value::Str(text.into()))
    }

    #[test]
    fn repr_is_python_like_and_bounded() {
        let small = Node::synthetic(Value::Seq(vec![Node::synthetic(Value::Int(1)), s("a\"b")]));
        assert_eq!(small.repr(), "[1, \"a\\\"b\"]");
        let map = Node::synthetic(Value::Map(vec![(s("k"), Node::synthetic(Value::Null))]));
        assert_eq!(map.repr(), "{\"k\": null}");
        let long = s(&"é".repeat(1_000_000));
        let r = long.repr();
        assert!(
            r.chars().count() <= MAX_REPR_CHARS + 3 && r.ends_with("…\""),
            "{r}"
        );
        let many = Node::synthetic(Value::Seq(
            (0..100_000)
                .map(|i| Node::synthetic(Value::Int(i)))
                .collect(),
        ));
        let r = many.repr();
        assert!(r.len() <= MAX_REPR_CHARS + 20 && r.ends_with("…]"), "{r}");
        let nested = Node::synthetic(Value::Map(vec![(s("k"), many.clone())]));
        assert!(nested.repr().ends_with("…]…}"), "{}", nested.repr());
        // JSON keys are never shortened.
        let keyed = Node::synthetic(Value::Map(vec![(many, Node::synthetic(Value::Null))]));
        let json = keyed.to_json();
        assert!(json.as_object().unwrap().keys().next().unwrap().len() > 100_000);
    }
}
