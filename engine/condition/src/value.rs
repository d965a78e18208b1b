//! Runtime values and the Python notions attached to them (type names,
//! truthiness, the int/float numeric view).
//!
//! Python ints are unbounded; here they are `i128`. Literals are capped at
//! 10^9 and `int()` refuses strings over 4300 digits, so 128 bits keep every
//! realistic result exact; anything beyond raises [`EvalError::Overflow`]
//! (a "did not fire", never a panic or a silently wrong number).
//!
//! [`EvalError::Overflow`]: crate::EvalError::Overflow

use crate::validate::Func;
use std::borrow::Cow;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Cow<'a, str>),
    /// The `capture` dict itself (`len(capture)`, `not capture`).
    Dict(&'a BTreeMap<String, String>),
    /// `float`, `int` or `len` named without being called.
    Builtin(Func),
}

/// The numeric view of a value: bool is an int subtype in Python.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    /// Python's int-to-float conversion (round to nearest, ties to even);
    /// cannot overflow for 128-bit ints.
    pub fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl Value<'_> {
    /// Python's `type(x).__name__`, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Dict(_) => "dict",
            Value::Builtin(Func::Float | Func::Int) => "type",
            Value::Builtin(_) => "builtin_function_or_method",
        }
    }

    /// Python truthiness: 0, 0.0, '', None, False and empty dicts are false.
    pub fn truthy(&self) -> bool {
        match self {
            Value::None => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            // NaN is truthy in Python, and `!=` says so too.
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Dict(d) => !d.is_empty(),
            Value::Builtin(_) => true,
        }
    }

    pub fn num(&self) -> Option<Num> {
        match self {
            Value::Bool(b) => Some(Num::Int(i128::from(*b))),
            Value::Int(i) => Some(Num::Int(*i)),
            Value::Float(f) => Some(Num::Float(*f)),
            _ => None,
        }
    }
}

/// Python-style `repr` of a string for error messages, shortened so that a
/// huge capture does not flood the log.
pub(crate) fn repr_str(s: &str) -> String {
    const MAX: usize = 80;
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for (i, c) in s.chars().enumerate() {
        if i == MAX {
            out.push_str("...");
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
