//! Reading a workload's `config` object with AORTA's key names and defaults (spec §8.2–8.4):
//! every value is type- and range-checked, all problems are reported at once with the key's
//! full path, and keys nobody read are returned so each workload can apply its own policy
//! (training warns, inference errors, llm_determinism ignores — as AORTA does).

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{Map, Value};
use tch::Kind;

use crate::protocol::SetupError;

#[derive(Default)]
struct Shared {
    errors: Vec<String>,
    unknown: Vec<String>,
}

/// A cursor over one config object; `sub` gives one over a nested object.
pub struct Reader {
    prefix: String,
    map: Map<String, Value>,
    shared: Rc<RefCell<Shared>>,
}

impl Reader {
    pub fn new(map: Map<String, Value>) -> Self {
        Reader {
            prefix: String::new(),
            map,
            shared: Rc::default(),
        }
    }

    fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn err(&self, key: &str, msg: String) {
        let p = self.path(key);
        self.shared.borrow_mut().errors.push(format!("{p}: {msg}"));
    }

    /// Takes a key (marking it known); `null` counts as absent.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    /// Accepts a key and drops it (documented as ignored).
    pub fn ignore(&mut self, key: &str) {
        self.map.remove(key);
    }

    pub fn uint(&mut self, key: &str, default: u64, min: u64) -> u64 {
        match self.take(key) {
            None => default,
            Some(v) => match v.as_u64() {
                Some(n) if n >= min => n,
                _ => {
                    self.err(key, format!("{v} is not an integer >= {min}"));
                    default
                }
            },
        }
    }

    pub fn float(&mut self, key: &str, default: f64) -> f64 {
        self.opt_float(key).unwrap_or(default)
    }

    pub fn opt_float(&mut self, key: &str) -> Option<f64> {
        let v = self.take(key)?;
        let f = v.as_f64().filter(|f| f.is_finite());
        if f.is_none() {
            self.err(key, format!("{v} is not a number"));
        }
        f
    }

    pub fn boolean(&mut self, key: &str, default: bool) -> bool {
        match self.take(key) {
            None => default,
            Some(Value::Bool(b)) => b,
            Some(v) => {
                self.err(key, format!("{v} is not true or false"));
                default
            }
        }
    }

    pub fn opt_str(&mut self, key: &str) -> Option<String> {
        match self.take(key)? {
            Value::String(s) => Some(s),
            v => {
                self.err(key, format!("{v} is not a string"));
                None
            }
        }
    }

    /// One of `allowed` (compared lower-case); returns the canonical spelling.
    pub fn choice(&mut self, key: &str, default: &str, allowed: &[&str]) -> String {
        match self.opt_str(key) {
            None => default.to_string(),
            Some(s) => match allowed.iter().find(|a| a.eq_ignore_ascii_case(&s)) {
                Some(a) => a.to_string(),
                None => {
                    self.err(key, format!("{s:?} is not one of {}", allowed.join("|")));
                    default.to_string()
                }
            },
        }
    }

    pub fn pair(&mut self, key: &str, default: (f64, f64)) -> (f64, f64) {
        match self.take(key) {
            None => default,
            Some(v) => match v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<_>>())
            {
                Some(p) if p.len() == 2 => (p[0], p[1]),
                _ => {
                    self.err(key, format!("{v} is not a pair of numbers"));
                    default
                }
            },
        }
    }

    /// A nested object (absent → empty); its unknown keys are reported with the full path.
    pub fn sub(&mut self, key: &str) -> Reader {
        let map = match self.take(key) {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(v) => {
                self.err(key, format!("{v} is not a mapping"));
                Map::new()
            }
        };
        Reader {
            prefix: format!("{}.", self.path(key)),
            map,
            shared: self.shared.clone(),
        }
    }

    /// Records a rule violation found after reading (e.g. hidden % heads).
    pub fn invalid(&self, key: &str, msg: impl Into<String>) {
        self.err(key, msg.into());
    }

    /// Ends reading this object: its unread keys become "unknown".
    pub fn done(self) {
        let unknown: Vec<String> = self
            .map
            .keys()
            .filter(|k| !k.starts_with("_aorta_"))
            .map(|k| self.path(k))
            .collect();
        self.shared.borrow_mut().unknown.extend(unknown);
    }

    /// Ends the top-level object: all errors as one SetupError, else the unknown keys.
    pub fn finish(self, hint: &str) -> Result<Vec<String>, SetupError> {
        let shared = self.shared.clone();
        self.done();
        let s = shared.borrow();
        if s.errors.is_empty() {
            Ok(s.unknown.clone())
        } else {
            Err(SetupError::config(
                format!("invalid workload_config: {}", s.errors.join("; ")),
                hint,
            ))
        }
    }
}

/// AORTA's dtype spellings.
pub fn parse_dtype(s: &str) -> Option<Kind> {
    match s.to_ascii_lowercase().as_str() {
        "bfloat16" | "bf16" => Some(Kind::BFloat16),
        "float16" | "fp16" | "half" => Some(Kind::Half),
        "float32" | "fp32" | "float" => Some(Kind::Float),
        _ => None,
    }
}

pub const DTYPES: &[&str] = &["bfloat16", "bf16", "float16", "fp16", "float32", "fp32"];

pub fn dtype_name(k: Kind) -> &'static str {
    match k {
        Kind::BFloat16 => "bfloat16",
        Kind::Half => "float16",
        _ => "float32",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reader(v: Value) -> Reader {
        Reader::new(v.as_object().unwrap().clone())
    }

    #[test]
    fn defaults_and_values() {
        let mut r = reader(json!({"a": 3, "b": true, "m": {"kind": "MLP"}}));
        assert_eq!(r.uint("a", 1, 1), 3);
        assert_eq!(r.uint("missing", 7, 1), 7);
        assert!(r.boolean("b", false));
        let mut m = r.sub("m");
        assert_eq!(
            m.choice("kind", "transformer", &["mlp", "transformer"]),
            "mlp"
        );
        m.done();
        assert_eq!(r.finish("h").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn all_errors_at_once_with_paths() {
        let mut r = reader(json!({"a": 0, "m": {"kind": "cnn", "x": 1}, "b": "yes"}));
        r.uint("a", 1, 1);
        r.boolean("b", false);
        let mut m = r.sub("m");
        m.choice("kind", "mlp", &["mlp"]);
        m.done();
        let e = r.finish("see docs").unwrap_err();
        assert_eq!(e.kind, "config");
        assert!(
            e.error.contains("a: 0 is not an integer >= 1"),
            "{}",
            e.error
        );
        assert!(
            e.error.contains("m.kind: \"cnn\" is not one of mlp"),
            "{}",
            e.error
        );
        assert!(
            e.error.contains("b: \"yes\" is not true or false"),
            "{}",
            e.error
        );
        assert_eq!(e.hint, "see docs");
    }

    #[test]
    fn unknown_keys_reported_with_path_and_aorta_keys_skipped() {
        let mut r = reader(json!({"zz": 1, "_aorta_x": 2, "m": {"y": 1}}));
        r.sub("m").done();
        assert_eq!(
            r.finish("").unwrap(),
            vec!["m.y".to_string(), "zz".to_string()]
        );
    }

    #[test]
    fn dtypes() {
        assert_eq!(parse_dtype("bf16"), Some(Kind::BFloat16));
        assert_eq!(parse_dtype("float16"), Some(Kind::Half));
        assert_eq!(parse_dtype("fp32"), Some(Kind::Float));
        assert_eq!(parse_dtype("int8"), None);
    }
}
