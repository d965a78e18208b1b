//! The custom-pattern `condition` sandbox.
//!
//! Recipes may attach a `condition` to a custom regex pattern: a tiny Python
//! expression that decides, after the regex matched, whether the pattern
//! really fires (`float(capture['loss']) > 2.5`). AORTA 0.2.1 evaluated it
//! with Python after an AST allow-list check; we re-implement that contract
//! without ever evaluating user code: the string is tokenised and parsed by
//! our own parser, checked against the same allow-list, and interpreted by a
//! small evaluator that reproduces the Python semantics the allow-list admits.
//!
//! The pipeline is `lexer` → `parser` (a general Python-expression parser,
//! so that syntax errors come first and forbidden constructs get precise
//! messages) → `validate` (the allow-list, producing a checked tree that
//! can only express admitted constructs) → `eval` (Python semantics over
//! `value`, `ops` and `builtins`).

mod builtins;
mod eval;
mod lexer;
mod ops;
mod parser;
mod validate;
mod value;

#[cfg(test)]
mod tests_eval;
#[cfg(test)]
mod tests_parse;

use std::collections::BTreeMap;
use std::ops::Range;

/// Longest accepted condition, in characters of the original string (AORTA's cap).
pub const MAX_LEN: usize = 256;

/// Deepest accepted nesting (parentheses, calls, unary chains...). Bounds the
/// parser's recursion so hostile input cannot overflow the stack.
pub const MAX_DEPTH: usize = 64;

/// The only names a condition may mention.
pub const ALLOWED_NAMES: [&str; 8] = [
    "capture",
    "exit_code",
    "walltime_sec",
    "peak_vram_mib",
    "math",
    "float",
    "int",
    "len",
];

/// A validated condition, ready to be evaluated any number of times.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    expr: validate::Expr,
}

impl Condition {
    /// Parses `source` and validates it against the allow-list.
    ///
    /// Errors carry a byte range into `source` pointing at the offending
    /// token or node, so recipe loading can underline it.
    pub fn parse(source: &str) -> Result<Condition, ConditionError> {
        if source.trim().is_empty() {
            return Err(ConditionError::new("condition is empty", 0..source.len()));
        }
        let chars = source.chars().count();
        if chars > MAX_LEN {
            let cut = source
                .char_indices()
                .nth(MAX_LEN)
                .map_or(source.len(), |(i, _)| i);
            return Err(ConditionError::new(
                format!("condition is longer than {MAX_LEN} characters ({chars})"),
                cut..source.len(),
            ));
        }
        let tokens = lexer::tokenize(source)?;
        let node = parser::parse(source, &tokens)?;
        let expr = validate::check(source, &node)?;
        Ok(Condition {
            source: source.to_owned(),
            expr,
        })
    }

    /// The original condition text, exactly as given to [`Condition::parse`].
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates the condition and applies Python truthiness to the result.
    ///
    /// Any runtime error (missing capture group, bad conversion, division by
    /// zero, type mismatch, overflow) is returned as `Err`; callers treat
    /// that as "the pattern did not fire", exactly like AORTA did.
    pub fn evaluate(&self, vars: &Vars) -> Result<bool, EvalError> {
        eval::evaluate(&self.expr, vars).map(|v| v.truthy())
    }
}

/// The variables a condition can see.
#[derive(Debug, Clone, Copy)]
pub struct Vars<'a> {
    /// Named groups of the regex match.
    pub capture: &'a BTreeMap<String, String>,
    /// Process exit code; negative means killed by that signal.
    pub exit_code: i64,
    /// Wall-clock duration of the run.
    pub walltime_sec: f64,
    /// Peak GPU memory, when known. AORTA passed an unknown value as 0, so
    /// `None` evaluates as the integer 0 (`peak_vram_mib > 0` is false).
    pub peak_vram_mib: Option<i64>,
}

/// A condition rejected at load time: syntax error or allow-list violation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    /// Human-readable reason, naming what is not allowed.
    pub message: String,
    /// Byte offsets into the condition source of the offending token/node.
    pub span: Range<usize>,
}

impl ConditionError {
    pub(crate) fn new(message: impl Into<String>, span: Range<usize>) -> Self {
        ConditionError {
            message: message.into(),
            span,
        }
    }
}

/// A runtime failure while evaluating a condition (the Python exception AORTA
/// would have caught). The caller treats it as "did not fire".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// `capture['key']` for a group absent from the capture map.
    #[error("KeyError: '{key}' is not a captured group")]
    KeyError { key: String },
    /// A conversion rejected its input, e.g. `float('abc')`, `int('1.5')`.
    #[error("ValueError: {0}")]
    ValueError(String),
    /// Division or floor division by zero.
    #[error("ZeroDivisionError: {0}")]
    ZeroDivision(String),
    /// An operation on unsupported types, e.g. `'a' + 1`, `'a' < 1`.
    #[error("TypeError: {0}")]
    TypeError(String),
    /// A number that cannot be represented: Python's OverflowError, and
    /// integers beyond the 128-bit range this evaluator uses.
    #[error("OverflowError: {0}")]
    Overflow(String),
}
