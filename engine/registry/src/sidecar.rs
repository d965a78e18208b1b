//! One sidecar / project-registry JSON file, validated against AORTA's format (spec §4.5):
//!
//! ```json
//! {"version": 1,
//!  "mitigations":  {"<name>": {"ENV": "value"}},
//!  "environments": {"<name>": {"docker": "...", "venv": "...", "buck_target": null}}}
//! ```
//!
//! The file is parsed into the spanned tree of `aorta-source` and checked by hand, so every
//! error names the file, the line:column of the offending key or value, its field path and a
//! hint. Two checks go beyond AORTA: env var names must be POSIX names and values must not
//! contain NUL (both used to fail late, inside the child's environment), and a key repeated
//! within one object is an error instead of JSON's silent last-one-wins.

use crate::{is_posix_env_name, suggest, Environment, Mitigation, Source};
use aorta_source::{parse_document, Diag, DiagKind, FieldPath, Node, SourceFile, Syntax, Value};
use std::collections::BTreeMap;
use std::ops::Range;

/// A mitigation's payload: env var name to value.
type EnvBundle = BTreeMap<String, String>;

const TOP_KEYS: &[&str] = &["version", "mitigations", "environments"];
const ENV_KEYS: &[&str] = &["docker", "venv", "buck_target"];

/// An entry together with the span of its name, for collision diagnostics.
pub(crate) struct Entry<T> {
    pub item: T,
    pub key_span: Range<usize>,
}

/// The validated content of one file.
pub(crate) struct Parsed {
    pub file: SourceFile,
    pub mitigations: Vec<Entry<Mitigation>>,
    pub environments: Vec<Entry<Environment>>,
}

/// Validates `file` (already read) as a registry file whose entries come from `source`.
pub(crate) fn parse(file: SourceFile, source: &Source) -> Result<Parsed, Box<Diag>> {
    let root = parse_document(&file, Syntax::Json)
        .map_err(|e| unquoted_unless_registry_shaped(&file, e))?;
    let cx = Cx { file: &file };
    let top = cx.object(
        &root,
        &FieldPath::root(),
        "the top level",
        "a sidecar is a JSON object: {\"version\": 1, \"mitigations\": {...}}",
    )?;
    for (key, _) in top {
        let name = cx.key_str(key, &FieldPath::root())?;
        if !TOP_KEYS.contains(&name) {
            let help = format!(
                "{}allowed top-level keys: {}",
                suggest::did_you_mean(name, TOP_KEYS.iter().copied()),
                TOP_KEYS.join(", ")
            );
            return Err(cx.err(
                &FieldPath::root().key(name),
                key.span.clone(),
                format!("unknown top-level key \"{name}\""),
                "not a sidecar key",
                help,
            ));
        }
    }
    cx.version(&root)?;

    let mut mitigations = Vec::new();
    if let Some(section) = root.get("mitigations") {
        let path = FieldPath::root().key("mitigations");
        for (key, payload) in cx.object(
            section,
            &path,
            "\"mitigations\"",
            "map each mitigation name to its env vars: {\"my_flag\": {\"MY_FLAG\": \"1\"}}",
        )? {
            let name = cx.key_str(key, &path)?;
            let env = cx.env_bundle(payload, &path.key(name))?;
            let item = Mitigation {
                name: name.to_string(),
                env,
                description: String::new(),
                source: source.clone(),
            };
            mitigations.push(Entry {
                item,
                key_span: key.span.clone(),
            });
        }
    }

    let mut environments = Vec::new();
    if let Some(section) = root.get("environments") {
        let path = FieldPath::root().key("environments");
        for (key, payload) in cx.object(
            section,
            &path,
            "\"environments\"",
            "map each environment name to {\"docker\": ..., \"venv\": ..., \"buck_target\": ...}",
        )? {
            let name = cx.key_str(key, &path)?;
            let item = cx.environment(name, payload, &path.key(name), source)?;
            environments.push(Entry {
                item,
                key_span: key.span.clone(),
            });
        }
    }
    Ok(Parsed {
        file,
        mitigations,
        environments,
    })
}

/// A file that is not JSON and does not even start like a registry (`{`) is most likely not
/// one at all: a path mix-up, or a project registry symlinked to a system file. Its syntax
/// error would quote its first lines, so say where and what instead, without the text.
fn unquoted_unless_registry_shaped(file: &SourceFile, e: Box<Diag>) -> Box<Diag> {
    let first = file.text().trim_start_matches('\u{feff}').trim_start();
    if first.is_empty() || first.starts_with('{') {
        return e;
    }
    let at = e
        .line_col()
        .map(|(l, c)| format!(" (at {l}:{c})"))
        .unwrap_or_default();
    Box::new(
        Diag::new(DiagKind::Registry, format!("{} is not a registry file: it is not JSON{at} and does not start with '{{'; its contents are not shown", file.name()))
            .with_help("a registry is a JSON object: {\"version\": 1, \"mitigations\": {...}}; check the path (and where a symlink points)"),
    )
}

struct Cx<'a> {
    file: &'a SourceFile,
}

impl Cx<'_> {
    fn err(
        &self,
        path: &FieldPath,
        span: Range<usize>,
        message: String,
        label: &str,
        help: impl Into<String>,
    ) -> Box<Diag> {
        Box::new(
            Diag::new(
                DiagKind::Registry,
                format!("{message} (in {})", self.file.name()),
            )
            .with_path(path)
            .at(self.file, span, label)
            .with_help(help),
        )
    }

    /// The entries of a JSON object, refusing other types and keys repeated in it.
    fn object<'n>(
        &self,
        node: &'n Node,
        path: &FieldPath,
        what: &str,
        help: &str,
    ) -> Result<&'n [(Node, Node)], Box<Diag>> {
        let Some(entries) = node.as_map() else {
            let msg = format!("{what} must be a JSON object, got {}", node.type_name());
            return Err(self.err(path, value_span(node), msg, "expected an object here", help));
        };
        let mut seen: std::collections::HashMap<&str, &Node> = std::collections::HashMap::new();
        for (i, (key, _)) in entries.iter().enumerate() {
            let earlier = match key.as_str() {
                Some(k) => seen.insert(k, key).map(|first| (first, ())),
                None => entries[..i]
                    .iter()
                    .find(|(k, _)| k.value == key.value)
                    .map(|(k, _)| (k, ())),
            };
            if let Some((first, _)) = earlier {
                let shown = key.as_str().map_or_else(|| key.repr(), str::to_string);
                let e = self.err(
                    &path.key(&shown),
                    key.span.clone(),
                    format!("key \"{shown}\" appears twice"),
                    "repeated here",
                    "JSON would silently keep only the last one; remove or rename one of them",
                );
                return Err(Box::new(
                    e.also_at(first.span.clone(), "first defined here"),
                ));
            }
        }
        Ok(entries)
    }

    /// JSON keys are always strings; this only guards the tree type.
    fn key_str<'n>(&self, key: &'n Node, path: &FieldPath) -> Result<&'n str, Box<Diag>> {
        key.as_str().ok_or_else(|| {
            self.err(
                path,
                key.span.clone(),
                format!("key {} must be a string", key.repr()),
                "not a string",
                "quote the key",
            )
        })
    }

    /// `version` is required and must be 1. A boolean is refused although Python's
    /// `True == 1`; `1.0` is accepted because AORTA's `!= 1` accepts it too.
    fn version(&self, root: &Node) -> Result<(), Box<Diag>> {
        let path = FieldPath::root().key("version");
        let Some(v) = root.get("version") else {
            return Err(self.err(
                &path,
                root.head_span(),
                "missing \"version\"".into(),
                "this object has no \"version\" key",
                "add \"version\": 1 at the top level",
            ));
        };
        match v.value {
            Value::Int(1) => Ok(()),
            Value::Float(1.0) => Ok(()),
            Value::Int(_) | Value::Float(_) => Err(self.err(
                &path,
                v.span.clone(),
                format!("unsupported sidecar version {}", v.repr()),
                "unsupported version",
                "this aorta reads version 1 sidecars; set \"version\": 1",
            )),
            _ => Err(self.err(
                &path,
                v.span.clone(),
                format!("\"version\" must be the integer 1, got {}", v.type_name()),
                "expected 1",
                "write \"version\": 1 (a number, not a string or boolean)",
            )),
        }
    }

    fn env_bundle(&self, payload: &Node, path: &FieldPath) -> Result<EnvBundle, Box<Diag>> {
        let entries = self.object(
            payload,
            path,
            "a mitigation payload",
            "a mitigation is an object of env var names to string values: {\"MY_FLAG\": \"1\"}",
        )?;
        let mut env = BTreeMap::new();
        for (key, value) in entries {
            let var = self.key_str(key, path)?;
            let here = path.key(var);
            if !is_posix_env_name(var) {
                return Err(self.err(&here, key.span.clone(), format!("\"{}\" is not a valid env var name", var.escape_debug()), "invalid name", "env var names must match ^[A-Za-z_][A-Za-z0-9_]*$ (letters, digits, underscores; no '=' or spaces)"));
            }
            let Some(text) = value.as_str() else {
                let msg = format!("value of {var} must be a string, got {}", value.type_name());
                return Err(self.err(
                    &here,
                    value_span(value),
                    msg,
                    "expected a string",
                    format!("quote it: \"{var}\": \"{}\"", unquoted(value)),
                ));
            };
            if text.contains('\0') {
                return Err(self.err(
                    &here,
                    value.span.clone(),
                    format!("value of {var} contains a NUL character"),
                    "NUL in value",
                    "environment values cannot contain NUL (\\u0000); remove it",
                ));
            }
            env.insert(var.to_string(), text.to_string());
        }
        Ok(env)
    }

    fn environment(
        &self,
        name: &str,
        payload: &Node,
        path: &FieldPath,
        source: &Source,
    ) -> Result<Environment, Box<Diag>> {
        let entries = self.object(payload, path, "an environment payload", "an environment is an object with optional \"docker\", \"venv\" and \"buck_target\" strings")?;
        let mut fields: [Option<String>; 3] = Default::default();
        for (key, value) in entries {
            let field = self.key_str(key, path)?;
            let here = path.key(field);
            let Some(slot) = ENV_KEYS.iter().position(|k| *k == field) else {
                let help = format!(
                    "{}allowed keys: {}",
                    suggest::did_you_mean(field, ENV_KEYS.iter().copied()),
                    ENV_KEYS.join(", ")
                );
                return Err(self.err(
                    &here,
                    key.span.clone(),
                    format!("unknown environment key \"{field}\""),
                    "not an environment key",
                    help,
                ));
            };
            fields[slot] = match &value.value {
                Value::Null => None,
                Value::Str(s) => Some(s.clone()),
                _ => {
                    let msg = format!(
                        "\"{field}\" must be a string or null, got {}",
                        value.type_name()
                    );
                    return Err(self.err(
                        &here,
                        value_span(value),
                        msg,
                        "expected a string or null",
                        "quote the value, or use null to leave it unset",
                    ));
                }
            };
        }
        let [docker, venv, buck_target] = fields;
        Ok(Environment {
            name: name.to_string(),
            docker,
            venv,
            buck_target,
            description: String::new(),
            source: source.clone(),
        })
    }
}

/// Where to point for "wrong type" errors. Sequences are pointed at by their `[`: the tree's
/// container spans stop at the last item, so a partial highlight would only confuse.
fn value_span(node: &Node) -> Range<usize> {
    match node.value {
        Value::Seq(_) => node.span.start..node.span.start + 1,
        _ => node.span.clone(),
    }
}

/// A scalar's text for a "quote it" hint (`1` → `1`, `true` → `true`).
fn unquoted(node: &Node) -> String {
    match &node.value {
        Value::Seq(_) | Value::Map(_) => "...".into(),
        _ => node.repr(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Parsed, Box<Diag>> {
        parse(
            SourceFile::new("t.json", text),
            &Source::Sidecar {
                path: "t.json".into(),
            },
        )
    }

    /// The text a diagnostic points at.
    fn pointed(text: &str) -> (String, String) {
        let e = parse_text(text).err().expect("should fail");
        let span = e.primary_span().expect("located");
        (
            text[span].to_string(),
            e.path.as_ref().map(ToString::to_string).unwrap_or_default(),
        )
    }

    #[test]
    fn sections_are_optional_and_may_be_empty() {
        let p = parse_text(r#"{"version": 1}"#).unwrap();
        assert!(p.mitigations.is_empty() && p.environments.is_empty());
        let p = parse_text(r#"{"version": 1.0, "mitigations": {}, "environments": {"e": {}}}"#)
            .unwrap();
        assert_eq!(p.environments[0].item.docker, None);
    }

    #[test]
    fn entries_keep_order_and_key_spans() {
        let text = r#"{"version": 1, "mitigations": {"b": {"B": "1"}, "a": {}}}"#;
        let p = parse_text(text).unwrap();
        let names: Vec<_> = p.mitigations.iter().map(|e| e.item.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(&text[p.mitigations[0].key_span.clone()], "\"b\"");
        assert!(p.mitigations[1].item.env.is_empty());
    }

    #[test]
    fn errors_point_at_the_offending_node() {
        assert_eq!(
            pointed(r#"{"version": "1"}"#),
            ("\"1\"".into(), "version".into())
        );
        assert_eq!(
            pointed(r#"{"version": 1, "mitigations": null}"#),
            ("null".into(), "mitigations".into())
        );
        assert_eq!(
            pointed(r#"{"version": 1, "mitigations": {"m": {"": "1"}}}"#),
            ("\"\"".into(), "mitigations.m.".into())
        );
        assert_eq!(
            pointed(r#"{"version": 1, "mitigations": {"m": {"A B": "1"}}}"#),
            ("\"A B\"".into(), "mitigations.m.A B".into())
        );
        assert_eq!(
            pointed(r#"{"version": 1, "mitigations": {"m": {"A": null}}}"#),
            ("null".into(), "mitigations.m.A".into())
        );
        assert_eq!(
            pointed(r#"{"version": 1, "environments": {"e": "img"}}"#),
            ("\"img\"".into(), "environments.e".into())
        );
        assert_eq!(
            pointed(r#"{"version": 1, "environments": {"e": {"venv": false}}}"#),
            ("false".into(), "environments.e.venv".into())
        );
        assert_eq!(pointed("{}"), ("{}".into(), "version".into()));
        assert_eq!(pointed("\"text\""), ("\"text\"".into(), String::new()));
    }

    #[test]
    fn an_empty_file_is_not_an_object() {
        let e = parse_text("").err().unwrap();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
    }

    #[test]
    fn typo_hints() {
        let e = parse_text(r#"{"version": 1, "enviroments": {}}"#)
            .err()
            .unwrap();
        assert!(
            e.help
                .as_deref()
                .unwrap()
                .starts_with("did you mean 'environments'?"),
            "{:?}",
            e.help
        );
        let e = parse_text(r#"{"version": 1, "environments": {"e": {"dokcer": "x"}}}"#)
            .err()
            .unwrap();
        assert!(
            e.help
                .as_deref()
                .unwrap()
                .starts_with("did you mean 'docker'?"),
            "{:?}",
            e.help
        );
    }
}
