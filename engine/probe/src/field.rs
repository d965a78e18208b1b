//! `aorta env probe --field a.b.c`: one value by dotted path, with AORTA 0.2.1's error
//! messages (spec §1.3.1). Arrays may also be indexed by number (`gpu.devices.0.name`), which
//! AORTA could not do; type names are JSON's (`string`, `array`, …).

use crate::schema::Snapshot;
use serde_json::Value;

/// Why a `--field` path does not resolve. `Display` is the message the CLI prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    Empty,
    /// Descending into `key` at `prefix`, where the value is `null`.
    Null {
        key: String,
        prefix: String,
    },
    /// Descending into `key` at `prefix`, where the value is a scalar (or a non-numeric key
    /// into an array).
    NotObject {
        key: String,
        prefix: String,
        kind: &'static str,
    },
    Missing {
        key: String,
        prefix: String,
        available: Vec<String>,
    },
    OutOfRange {
        index: String,
        prefix: String,
        len: usize,
    },
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldError::Empty => write!(f, "Field path is empty"),
            FieldError::Null { key, prefix } => write!(
                f,
                "Cannot descend into '{key}' at '{prefix}': value is null"
            ),
            FieldError::NotObject { key, prefix, kind } => write!(
                f,
                "Cannot descend into '{key}' at '{prefix}': value is {kind}, not an object"
            ),
            FieldError::Missing {
                key,
                prefix,
                available,
            } => {
                let shown: Vec<&str> = available.iter().take(10).map(String::as_str).collect();
                write!(
                    f,
                    "Key '{key}' not found at '{prefix}'. Available keys: {}",
                    shown.join(", ")
                )?;
                if available.len() > 10 {
                    write!(f, " (+ {} more)", available.len() - 10)?;
                }
                Ok(())
            }
            FieldError::OutOfRange { index, prefix, len } => write!(
                f,
                "Index {index} out of range at '{prefix}': the array has {len} element(s)"
            ),
        }
    }
}

impl std::error::Error for FieldError {}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Looks `path` up in any JSON value.
pub fn lookup<'a>(root: &'a Value, path: &str) -> Result<&'a Value, FieldError> {
    if path.trim().is_empty() {
        return Err(FieldError::Empty);
    }
    let mut cur = root;
    let mut prefix = String::from("<root>");
    for (i, key) in path.split('.').enumerate() {
        let next = match cur {
            Value::Null => {
                return Err(FieldError::Null {
                    key: key.into(),
                    prefix,
                })
            }
            Value::Object(m) => m.get(key).ok_or_else(|| {
                let mut available: Vec<String> = m.keys().cloned().collect();
                available.sort();
                FieldError::Missing {
                    key: key.into(),
                    prefix: prefix.clone(),
                    available,
                }
            })?,
            Value::Array(a) => match key.parse::<usize>() {
                Ok(n) => a.get(n).ok_or_else(|| FieldError::OutOfRange {
                    index: key.into(),
                    prefix: prefix.clone(),
                    len: a.len(),
                })?,
                Err(_) => {
                    return Err(FieldError::NotObject {
                        key: key.into(),
                        prefix,
                        kind: "array",
                    })
                }
            },
            other => {
                return Err(FieldError::NotObject {
                    key: key.into(),
                    prefix,
                    kind: kind(other),
                })
            }
        };
        prefix = if i == 0 {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        };
        cur = next;
    }
    Ok(cur)
}

impl Snapshot {
    /// The value at a dotted path (`--field`); print it with `serde_json::to_string`.
    pub fn field(&self, path: &str) -> Result<Value, FieldError> {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        lookup(&v, path).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        let v = serde_json::json!({"a": {"b": 1, "n": null, "l": [{"x": 2}]}, "k0": 0, "k1": 0, "k2": 0, "k3": 0, "k4": 0, "k5": 0, "k6": 0, "k7": 0, "k8": 0, "k9": 0});
        assert_eq!(lookup(&v, "a.b").unwrap(), &serde_json::json!(1));
        assert_eq!(lookup(&v, "a.l.0.x").unwrap(), &serde_json::json!(2));
        assert_eq!(
            lookup(&v, "").unwrap_err().to_string(),
            "Field path is empty"
        );
        assert_eq!(
            lookup(&v, "a.n.z").unwrap_err().to_string(),
            "Cannot descend into 'z' at 'a.n': value is null"
        );
        assert_eq!(
            lookup(&v, "a.b.c").unwrap_err().to_string(),
            "Cannot descend into 'c' at 'a.b': value is number, not an object"
        );
        assert_eq!(
            lookup(&v, "a.zz").unwrap_err().to_string(),
            "Key 'zz' not found at 'a'. Available keys: b, l, n"
        );
        assert_eq!(lookup(&v, "nope").unwrap_err().to_string(), "Key 'nope' not found at '<root>'. Available keys: a, k0, k1, k2, k3, k4, k5, k6, k7, k8 (+ 1 more)");
        assert_eq!(
            lookup(&v, "a.l.3").unwrap_err().to_string(),
            "Index 3 out of range at 'a.l': the array has 1 element(s)"
        );
        assert_eq!(
            lookup(&v, "a.l.x").unwrap_err().to_string(),
            "Cannot descend into 'x' at 'a.l': value is array, not an object"
        );
    }
}
