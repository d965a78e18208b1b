//! A small block-style YAML writer with exact control over key order and quoting.
//!
//! The reader is aorta-source (PyYAML's YAML 1.1 resolution), so every scalar is written in
//! a form that reads back as the same type: strings that could be mistaken for booleans,
//! nulls or numbers are double-quoted, floats always carry a dot and a signed exponent.

use serde_json::Value;

/// A YAML document node. Scalars are pre-rendered by the constructors below.
#[derive(Debug, Clone)]
pub(crate) enum Y {
    Scalar(String),
    Seq(Vec<Y>),
    Map(Vec<(String, Y)>),
}

impl Y {
    pub fn str(s: &str) -> Y {
        Y::Scalar(quote(s))
    }

    pub fn int(i: impl Into<i64>) -> Y {
        Y::Scalar(i.into().to_string())
    }

    pub fn float(x: f64) -> Y {
        Y::Scalar(float(x))
    }

    pub fn bool(b: bool) -> Y {
        Y::Scalar(if b { "true" } else { "false" }.into())
    }

    pub fn null() -> Y {
        Y::Scalar("null".into())
    }

    pub fn strs<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Y {
        Y::Seq(items.into_iter().map(|s| Y::str(s.as_ref())).collect())
    }

    /// A JSON value (workload_config), keeping int/float distinct and key order.
    pub fn json(v: &Value) -> Y {
        match v {
            Value::Null => Y::null(),
            Value::Bool(b) => Y::bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Y::int(i),
                (None, Some(u)) => Y::Scalar(u.to_string()),
                _ => Y::float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Y::str(s),
            Value::Array(a) => Y::Seq(a.iter().map(Y::json).collect()),
            Value::Object(m) => Y::Map(m.iter().map(|(k, v)| (k.clone(), Y::json(v))).collect()),
        }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Y::Scalar(_))
    }
}

/// Renders a top-level mapping.
pub(crate) fn render(entries: &[(String, Y)]) -> String {
    let mut out = String::new();
    map(&mut out, entries, 0);
    out
}

fn map(out: &mut String, entries: &[(String, Y)], indent: usize) {
    for (i, (k, v)) in entries.iter().enumerate() {
        // The first key of a mapping inside a list item sits on the `- ` line.
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&quote(k));
        out.push(':');
        value(out, v, indent);
    }
}

/// Writes the part after `key:` — inline for scalars, flow lists and empty containers,
/// otherwise a nested block on the following lines.
fn value(out: &mut String, v: &Y, indent: usize) {
    match v {
        Y::Scalar(s) => {
            out.push(' ');
            out.push_str(s);
            out.push('\n');
        }
        Y::Seq(items) if items.is_empty() => out.push_str(" []\n"),
        Y::Map(entries) if entries.is_empty() => out.push_str(" {}\n"),
        Y::Seq(items) if items.iter().all(Y::is_scalar) && flow_len(items) <= 80 => {
            let parts: Vec<&str> = items
                .iter()
                .map(|i| if let Y::Scalar(s) = i { s.as_str() } else { "" })
                .collect();
            out.push_str(&format!(" [{}]\n", parts.join(", ")));
        }
        Y::Seq(items) => {
            out.push('\n');
            seq(out, items, indent + 2);
        }
        Y::Map(entries) => {
            out.push('\n');
            map(out, entries, indent + 2);
        }
    }
}

fn flow_len(items: &[Y]) -> usize {
    items
        .iter()
        .map(|i| if let Y::Scalar(s) = i { s.len() + 2 } else { 0 })
        .sum()
}

fn seq(out: &mut String, items: &[Y], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Y::Scalar(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Y::Seq(inner) if inner.is_empty() => out.push_str("[]\n"),
            Y::Map(entries) if entries.is_empty() => out.push_str("{}\n"),
            Y::Map(entries) => map(out, entries, indent + 2),
            Y::Seq(inner) => {
                out.push('\n');
                seq(out, inner, indent + 2);
            }
        }
    }
}

/// Words YAML 1.1 (PyYAML) would not read as a string when unquoted.
const RESERVED: &[&str] = &[
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~",
];

/// A string as a YAML scalar: plain when it is an identifier-like word that PyYAML reads as
/// the same string, double-quoted with escapes otherwise.
pub(crate) fn quote(s: &str) -> String {
    let plain = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str());
    if plain {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xFF => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// YAML's printable set (c-printable), minus the BOM and the line/paragraph separators that
/// some readers treat as line breaks.
fn printable(c: char) -> bool {
    let u = c as u32;
    matches!(u, 0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
        && !matches!(u, 0xFEFF | 0x2028 | 0x2029)
}

/// A float PyYAML reads back as the same float: a dot in the mantissa, a signed exponent.
pub(crate) fn float(x: f64) -> String {
    if x.is_nan() {
        return ".nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    let s = format!("{x:?}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let mantissa = if mantissa.contains('.') {
                mantissa.to_string()
            } else {
                format!("{mantissa}.0")
            };
            let exp = if exp.starts_with('-') {
                exp.to_string()
            } else {
                format!("+{exp}")
            };
            format!("{mantissa}e{exp}")
        }
        None if s.contains('.') => s,
        None => format!("{s}.0"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_keep_their_type() {
        assert_eq!(float(1.15), "1.15");
        assert_eq!(float(1800.0), "1800.0");
        assert_eq!(float(1e-7), "1.0e-7");
        assert_eq!(float(2.5e20), "2.5e+20");
        assert_eq!(float(-0.0), "-0.0");
        assert_eq!(float(f64::NEG_INFINITY), "-.inf");
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("tf32_off"), "tf32_off");
        assert_eq!(quote("det_capture/baseline"), "det_capture/baseline");
        assert_eq!(quote("yes"), "\"yes\"");
        assert_eq!(quote("Null"), "\"Null\"");
        assert_eq!(quote("1.5"), "\"1.5\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a: b"), "\"a: b\"");
        assert_eq!(quote("x\u{0}y\u{85}\u{2028}"), "\"x\\x00y\\x85\\u2028\"");
    }
}
