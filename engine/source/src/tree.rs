//! The spanned value tree: YAML/JSON data with the byte span of every node.

use std::ops::Range;

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
        self.as_map()?.iter().rev().find(|(k, _)| k.as_str() == Some(key)).map(|(k, v)| (k, v))
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

    /// A compact, Python-like rendering of the value for messages (`'abc'`, `3`, `[1, 2]`).
    pub fn repr(&self) -> String {
        match &self.value {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Str(s) => format!("{s:?}"),
            Value::Seq(items) => {
                let inner: Vec<String> = items.iter().map(Node::repr).collect();
                format!("[{}]", inner.join(", "))
            }
            Value::Map(entries) => {
                let inner: Vec<String> =
                    entries.iter().map(|(k, v)| format!("{}: {}", k.repr(), v.repr())).collect();
                format!("{{{}}}", inner.join(", "))
            }
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
                    let key = k.as_str().map_or_else(|| k.repr(), str::to_string);
                    map.insert(key, v.to_json());
                }
                J::Object(map)
            }
        }
    }
}
