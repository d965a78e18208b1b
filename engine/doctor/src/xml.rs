//! A small element tree over quick-xml, enough for `nvidia-smi -q -x`: elements with their
//! attributes, children and trimmed text. The document is a few hundred elements per GPU.

use quick_xml::events::Event;
use quick_xml::Reader;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid XML at byte {position}: {message}")]
pub struct XmlError {
    pub position: u64,
    pub message: String,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child named `name`.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The element at a `/`-separated path of child names.
    pub fn at(&self, path: &str) -> Option<&Element> {
        path.split('/').try_fold(self, |e, name| e.child(name))
    }

    /// The trimmed text at `path`, `None` when the element is missing.
    pub fn text_at(&self, path: &str) -> Option<&str> {
        self.at(path).map(|e| e.text.trim())
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn entity(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => None,
    }
}

/// Parses a whole document; the root element is returned.
pub fn parse(text: &str) -> Result<Element, XmlError> {
    let mut reader = Reader::from_str(text);
    let err = |r: &Reader<&[u8]>, m: String| XmlError {
        position: r.buffer_position(),
        message: m,
    };
    let mut stack: Vec<Element> = vec![Element::default()];
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| err(&reader, e.to_string()))?;
        let is_empty = matches!(ev, Event::Empty(_));
        match ev {
            Event::Start(s) | Event::Empty(s) => {
                let mut el = Element {
                    name: String::from_utf8_lossy(s.name().as_ref()).into_owned(),
                    ..Default::default()
                };
                for a in s.attributes().flatten() {
                    el.attrs.push((
                        String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                        String::from_utf8_lossy(&a.value).into_owned(),
                    ));
                }
                if is_empty {
                    if let Some(top) = stack.last_mut() {
                        top.children.push(el);
                    }
                } else {
                    stack.push(el);
                }
            }
            Event::End(_) => {
                if stack.len() < 2 {
                    return Err(err(&reader, "unbalanced end tag".into()));
                }
                let done = stack.pop().expect("checked");
                if let Some(top) = stack.last_mut() {
                    top.children.push(done);
                }
            }
            Event::Text(t) => {
                let t = t.decode().map_err(|e| err(&reader, e.to_string()))?;
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t);
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&String::from_utf8_lossy(&t));
                }
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(&r).into_owned();
                if let Some(top) = stack.last_mut() {
                    match entity(&name) {
                        Some(c) => top.text.push(c),
                        None => {
                            top.text.push('&');
                            top.text.push_str(&name);
                            top.text.push(';');
                        }
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err(err(&reader, "unclosed element at end of input".into()));
    }
    let mut doc = stack.pop().expect("one");
    doc.children
        .pop()
        .ok_or_else(|| err(&reader, "no root element".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_tree_with_attributes_and_text() {
        let doc = parse(
            "<?xml version=\"1.0\" ?>\n<!DOCTYPE a SYSTEM \"x.dtd\">\n<a><b id=\"7\"> x &amp; y </b><c/><b>2</b></a>",
        )
        .unwrap();
        assert_eq!(doc.name, "a");
        assert_eq!(doc.child("b").unwrap().attr("id"), Some("7"));
        assert_eq!(doc.text_at("b"), Some("x & y"));
        assert_eq!(doc.children_named("b").count(), 2);
        assert!(doc.at("c").is_some());
        assert!(doc.at("b/z").is_none());
        assert!(parse("<a><b></a>").is_err());
        assert!(parse("<a>").is_err());
    }
}
