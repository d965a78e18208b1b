//! The allow-list: turns a parsed [`Node`] into the checked [`Expr`] the
//! evaluator runs, or explains which construct is not allowed.
//!
//! The checked tree can only express what AORTA's validator admitted, so the
//! evaluator never has to consider attribute access, arbitrary calls or
//! arbitrary subscripts: they are unrepresentable past this point.

use crate::parser::{Arg, Kind, Node, Span};
use crate::{ConditionError, ALLOWED_NAMES};

/// Integer literals must satisfy `|v| < INT_LITERAL_LIMIT` (AORTA's cap).
const INT_LITERAL_LIMIT: u128 = 1_000_000_000;

const ATTRIBUTE_MSG: &str =
    "attribute access is not allowed (only math.isnan and math.isinf may be called)";
const CALLEES_MSG: &str = "only float(), int(), len(), math.isnan() and math.isinf() may be called";

/// A literal constant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Const {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
}

/// The functions a condition may call (and, for the builtins, name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Float,
    Int,
    Len,
    IsNan,
    IsInf,
}

/// A bare allowed name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    Capture,
    ExitCode,
    WalltimeSec,
    PeakVramMib,
    /// `float`, `int` or `len` used as a value rather than called.
    Builtin(Func),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Div,
    FloorDiv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtE,
    Gt,
    GtE,
}

/// A validated expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Const(Const),
    Name(Name),
    /// `capture['key']`.
    Capture(String),
    Call(Func, Box<Expr>),
    Neg(Box<Expr>),
    Pos(Box<Expr>),
    Not(Box<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    /// `body if test else orelse`.
    IfElse {
        body: Box<Expr>,
        test: Box<Expr>,
        orelse: Box<Expr>,
    },
}

fn reject<T>(message: impl Into<String>, span: &Span) -> Result<T, ConditionError> {
    Err(ConditionError::new(message, span.clone()))
}

fn name_not_allowed<T>(name: &str, span: &Span) -> Result<T, ConditionError> {
    reject(
        format!(
            "name '{name}' is not allowed; allowed names: {}",
            ALLOWED_NAMES.join(", ")
        ),
        span,
    )
}

/// Checks `node` (parsed from `src`) against the allow-list.
pub(crate) fn check(src: &str, node: &Node) -> Result<Expr, ConditionError> {
    let boxed = |n: &Node| check(src, n).map(Box::new);
    let span = &node.span;
    Ok(match &node.kind {
        Kind::Int(Some(v)) if *v < INT_LITERAL_LIMIT => Expr::Const(Const::Int(*v as i128)),
        Kind::Int(v) => {
            let shown = v.map_or_else(|| src[span.clone()].replace('_', ""), |v| v.to_string());
            return reject(
                format!("integer literal {shown} is too large (|v| must be < 10^9)"),
                span,
            );
        }
        Kind::Float(f) => Expr::Const(Const::Float(*f)),
        Kind::Str(s) => Expr::Const(Const::Str(s.clone())),
        Kind::Bool(b) => Expr::Const(Const::Bool(*b)),
        Kind::None => Expr::Const(Const::None),
        Kind::Imaginary => return reject("complex number literals are not allowed", span),
        Kind::Ellipsis => return reject("'...' (Ellipsis) is not allowed", span),
        Kind::Name(n) => Expr::Name(name(n, span)?),
        Kind::Attribute { .. } => return reject(ATTRIBUTE_MSG, span),
        Kind::Subscript { value, index } => subscript(value, index, span)?,
        Kind::Slice => return reject("slicing is not allowed", span),
        Kind::Call { func, args } => {
            let f = callee(func)?;
            Expr::Call(f, boxed(single_arg(f, args, span)?)?)
        }
        Kind::Unary { op: "-", operand } => Expr::Neg(boxed(operand)?),
        Kind::Unary { op: "+", operand } => Expr::Pos(boxed(operand)?),
        Kind::Unary { op, .. } => {
            return reject(
                format!("operator '{op}' is not allowed; allowed unary operators: not - +"),
                &(span.start..span.start + op.len()),
            )
        }
        Kind::Not(operand) => Expr::Not(boxed(operand)?),
        Kind::Binary {
            op,
            op_span,
            left,
            right,
        } => {
            let op = match *op {
                "+" => ArithOp::Add,
                "-" => ArithOp::Sub,
                "/" => ArithOp::Div,
                "//" => ArithOp::FloorDiv,
                other => {
                    return reject(
                        format!("operator '{other}' is not allowed; allowed: + - / //"),
                        op_span,
                    )
                }
            };
            Expr::Arith(op, boxed(left)?, boxed(right)?)
        }
        Kind::BoolOp { is_and, values } => {
            let values = values
                .iter()
                .map(|v| check(src, v))
                .collect::<Result<_, _>>()?;
            if *is_and {
                Expr::And(values)
            } else {
                Expr::Or(values)
            }
        }
        Kind::Compare { left, rest } => {
            let mut checked = Vec::with_capacity(rest.len());
            for (op, op_span, right) in rest {
                let op = match *op {
                    "==" => CmpOp::Eq,
                    "!=" => CmpOp::NotEq,
                    "<" => CmpOp::Lt,
                    "<=" => CmpOp::LtE,
                    ">" => CmpOp::Gt,
                    ">=" => CmpOp::GtE,
                    other => {
                        return reject(
                            format!(
                                "comparison operator '{other}' is not allowed; \
                                 allowed: == != < <= > >="
                            ),
                            op_span,
                        )
                    }
                };
                checked.push((op, check(src, right)?));
            }
            Expr::Compare(boxed(left)?, checked)
        }
        Kind::IfExp { body, test, orelse } => Expr::IfElse {
            body: boxed(body)?,
            test: boxed(test)?,
            orelse: boxed(orelse)?,
        },
        Kind::Display(kind) => {
            let hint = if *kind == "tuple" {
                " (note: a bare 'a, b' is a tuple)"
            } else {
                ""
            };
            return reject(format!("{kind} literals are not allowed{hint}"), span);
        }
    })
}

fn name(n: &str, span: &Span) -> Result<Name, ConditionError> {
    Ok(match n {
        "capture" => Name::Capture,
        "exit_code" => Name::ExitCode,
        "walltime_sec" => Name::WalltimeSec,
        "peak_vram_mib" => Name::PeakVramMib,
        "float" => Name::Builtin(Func::Float),
        "int" => Name::Builtin(Func::Int),
        "len" => Name::Builtin(Func::Len),
        "math" => {
            return reject(
                "'math' may only be used to call math.isnan(...) or math.isinf(...)",
                span,
            )
        }
        other => return name_not_allowed(other, span),
    })
}

/// Only `capture['<string literal>']` may be subscripted.
fn subscript(value: &Node, index: &Node, span: &Span) -> Result<Expr, ConditionError> {
    match &value.kind {
        Kind::Name(n) if n == "capture" => {}
        Kind::Name(n) if !ALLOWED_NAMES.contains(&n.as_str()) => {
            return name_not_allowed(n, &value.span)
        }
        _ => {
            return reject(
                "subscripts are only allowed as capture['<group name>']",
                span,
            )
        }
    }
    match &index.kind {
        Kind::Str(key) => Ok(Expr::Capture(key.clone())),
        Kind::Slice => reject(
            "slicing is not allowed; index capture with a group name, e.g. capture['loss']",
            &index.span,
        ),
        _ => reject(
            "capture must be indexed with a string literal, e.g. capture['loss']",
            &index.span,
        ),
    }
}

/// Resolves a call's callee: `float`, `int`, `len`, `math.isnan`, `math.isinf`.
fn callee(func: &Node) -> Result<Func, ConditionError> {
    match &func.kind {
        Kind::Name(n) => match n.as_str() {
            "float" => Ok(Func::Float),
            "int" => Ok(Func::Int),
            "len" => Ok(Func::Len),
            other if ALLOWED_NAMES.contains(&other) => reject(
                format!("'{other}' cannot be called; {CALLEES_MSG}"),
                &func.span,
            ),
            other => name_not_allowed(other, &func.span),
        },
        Kind::Attribute { value, attr } => match (&value.kind, attr.as_str()) {
            (Kind::Name(m), "isnan") if m == "math" => Ok(Func::IsNan),
            (Kind::Name(m), "isinf") if m == "math" => Ok(Func::IsInf),
            _ => reject(ATTRIBUTE_MSG, &func.span),
        },
        _ => reject(CALLEES_MSG, &func.span),
    }
}

/// The display name of an allowed callee, for messages.
pub(crate) fn func_name(f: Func) -> &'static str {
    match f {
        Func::Float => "float",
        Func::Int => "int",
        Func::Len => "len",
        Func::IsNan => "math.isnan",
        Func::IsInf => "math.isinf",
    }
}

/// Every allowed function takes exactly one positional argument.
fn single_arg<'n>(f: Func, args: &'n [Arg], span: &Span) -> Result<&'n Node, ConditionError> {
    let name = func_name(f);
    for arg in args {
        match arg {
            Arg::Keyword(s) => {
                return reject(
                    format!("keyword arguments are not allowed (in {name}())"),
                    s,
                )
            }
            Arg::Unpack(s) => {
                return reject(
                    format!("argument unpacking (*args, **kwargs) is not allowed (in {name}())"),
                    s,
                )
            }
            Arg::Positional(_) => {}
        }
    }
    match args {
        [Arg::Positional(n)] => Ok(n),
        _ => reject(
            format!(
                "{name}() takes exactly one positional argument ({} given)",
                args.len()
            ),
            span,
        ),
    }
}
