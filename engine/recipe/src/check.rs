//! Typed reads of the spanned tree. Each returns a located [`Diag`] on mismatch, so the
//! schema code reads like the rules it enforces.

use aorta_source::{suggest, Diag, DiagKind, FieldPath, Node, SourceFile, Value};
use std::collections::BTreeMap;

pub(crate) type Res<T> = Result<T, Box<Diag>>;

/// The file being validated; every error points into it.
pub(crate) struct Ctx<'a> {
    pub file: &'a SourceFile,
}

impl Ctx<'_> {
    pub fn err(
        &self,
        kind: DiagKind,
        node: &Node,
        path: &FieldPath,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Box<Diag> {
        let mut d = Diag::new(kind, message).with_path(path);
        let help = help.into();
        if !help.is_empty() {
            d = d.with_help(help);
        }
        if node.span.end > node.span.start || !self.file.text().is_empty() {
            d = d.at(self.file, node.span.clone(), "");
        }
        Box::new(d)
    }

    pub fn schema(
        &self,
        node: &Node,
        path: &FieldPath,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Box<Diag> {
        self.err(DiagKind::Schema, node, path, message, help)
    }

    fn wrong_type(&self, node: &Node, path: &FieldPath, expected: &str, help: &str) -> Box<Diag> {
        self.schema(
            node,
            path,
            format!(
                "must be {expected}, got {} {}",
                node.type_name(),
                node.repr()
            ),
            help,
        )
    }

    pub fn map<'n>(&self, node: &'n Node, path: &FieldPath, help: &str) -> Res<&'n [(Node, Node)]> {
        node.as_map()
            .ok_or_else(|| self.wrong_type(node, path, "a mapping", help))
    }

    pub fn list<'n>(&self, node: &'n Node, path: &FieldPath, help: &str) -> Res<&'n [Node]> {
        node.as_seq()
            .ok_or_else(|| self.wrong_type(node, path, "a list", help))
    }

    pub fn string<'n>(&self, node: &'n Node, path: &FieldPath, help: &str) -> Res<&'n str> {
        node.as_str()
            .ok_or_else(|| self.wrong_type(node, path, "a string", help))
    }

    pub fn non_empty_string<'n>(
        &self,
        node: &'n Node,
        path: &FieldPath,
        help: &str,
    ) -> Res<&'n str> {
        let s = self.string(node, path, help)?;
        if s.trim().is_empty() {
            return Err(self.schema(node, path, "must be a non-empty string", help));
        }
        Ok(s)
    }

    /// A mapping key that must be a string (YAML allows `1: x`; recipes do not).
    pub fn key_string<'n>(&self, key: &'n Node, path: &FieldPath) -> Res<&'n str> {
        key.as_str().ok_or_else(|| {
            self.schema(
                key,
                path,
                format!(
                    "keys must be strings, got {} {}",
                    key.type_name(),
                    key.repr()
                ),
                "quote the key",
            )
        })
    }

    /// A real boolean: `"false"` (a string) is refused, as AORTA does.
    pub fn boolean(&self, node: &Node, path: &FieldPath) -> Res<bool> {
        match node.value {
            Value::Bool(b) => Ok(b),
            _ => Err(self.wrong_type(
                node,
                path,
                "true or false",
                "write true or false without quotes",
            )),
        }
    }

    /// An integer ≥ `min`; booleans and floats are refused (Python's `isinstance(x, int)` minus bool).
    pub fn int_at_least(&self, node: &Node, path: &FieldPath, min: i64) -> Res<i64> {
        match node.value {
            Value::Int(i) if i >= min => Ok(i),
            Value::Int(i) => Err(self.schema(
                node,
                path,
                format!("must be an integer >= {min}, got {i}"),
                format!("write a whole number such as {}", min.max(1)),
            )),
            _ => Err(self.wrong_type(
                node,
                path,
                &format!("an integer >= {min}"),
                &format!(
                    "write a whole number such as {} (no quotes, no decimal point)",
                    min.max(1)
                ),
            )),
        }
    }

    pub fn positive_u32(&self, node: &Node, path: &FieldPath) -> Res<u32> {
        let v = self.int_at_least(node, path, 1)?;
        u32::try_from(v).map_err(|_| {
            self.schema(
                node,
                path,
                format!("{v} is too large"),
                "use at most 4294967295",
            )
        })
    }

    /// A number (int or float, not bool).
    pub fn number(&self, node: &Node, path: &FieldPath) -> Res<f64> {
        match node.value {
            Value::Int(i) => Ok(i as f64),
            Value::Float(f) => Ok(f),
            _ => Err(self.wrong_type(
                node,
                path,
                "a number",
                "write a number such as 1.5 (no quotes)",
            )),
        }
    }

    pub fn positive_number(&self, node: &Node, path: &FieldPath) -> Res<f64> {
        let v = self.number(node, path)?;
        if v <= 0.0 || !v.is_finite() {
            return Err(self.schema(
                node,
                path,
                format!("must be a number > 0, got {}", node.repr()),
                "write a positive number such as 1.5",
            ));
        }
        Ok(v)
    }

    pub fn string_list(&self, node: &Node, path: &FieldPath, help: &str) -> Res<Vec<String>> {
        let items = self.list(node, path, help)?;
        items
            .iter()
            .enumerate()
            .map(|(i, n)| self.string(n, &path.index(i), help).map(str::to_string))
            .collect()
    }

    /// A string→string mapping, e.g. `extra_env`.
    pub fn string_map(
        &self,
        node: &Node,
        path: &FieldPath,
        help: &str,
    ) -> Res<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for (k, v) in self.map(node, path, help)? {
            let key = self.key_string(k, path)?;
            let val = self.string(v, &path.key(key), "quote the value, e.g. \"1\"")?;
            out.insert(key.to_string(), val.to_string());
        }
        Ok(out)
    }

    /// Rejects keys outside `allowed`, pointing at the first offending key (in document order).
    pub fn only_keys(
        &self,
        entries: &[(Node, Node)],
        path: &FieldPath,
        allowed: &[&str],
        what: &str,
    ) -> Res<()> {
        for (k, _) in entries {
            let ok = k.as_str().is_some_and(|s| allowed.contains(&s));
            if !ok {
                let shown = k.as_str().map_or_else(|| k.repr(), |s| format!("'{s}'"));
                let mut msg = format!("unknown key {shown} in {what}");
                if let Some(s) = k
                    .as_str()
                    .and_then(|s| suggest::did_you_mean(s, allowed.iter().copied()))
                {
                    msg.push_str(&format!(" (did you mean '{s}'?)"));
                }
                return Err(self.schema(
                    k,
                    path,
                    msg,
                    format!("allowed keys: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }
}
