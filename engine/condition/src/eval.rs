//! Tree-walking evaluation of a validated [`Expr`].
//!
//! `and`/`or` short-circuit and yield an operand (not a bool), chained
//! comparisons evaluate each middle operand once and stop at the first false
//! link, and the conditional expression evaluates only the chosen branch —
//! all as in Python, which matters because a skipped operand cannot raise.

use crate::builtins;
use crate::ops;
use crate::validate::{Const, Expr, Name};
use crate::value::Value;
use crate::{EvalError, Vars};
use std::borrow::Cow;

pub(crate) fn evaluate<'a>(expr: &'a Expr, vars: &Vars<'a>) -> Result<Value<'a>, EvalError> {
    Ok(match expr {
        Expr::Const(c) => match c {
            Const::None => Value::None,
            Const::Bool(b) => Value::Bool(*b),
            Const::Int(i) => Value::Int(*i),
            Const::Float(f) => Value::Float(*f),
            Const::Str(s) => Value::Str(Cow::Borrowed(s)),
        },
        Expr::Name(n) => match n {
            Name::Capture => Value::Dict(vars.capture),
            Name::ExitCode => Value::Int(i128::from(vars.exit_code)),
            Name::WalltimeSec => Value::Float(vars.walltime_sec),
            Name::PeakVramMib => Value::Int(i128::from(vars.peak_vram_mib.unwrap_or(0))),
            Name::Builtin(f) => Value::Builtin(*f),
        },
        Expr::Capture(key) => match vars.capture.get(key) {
            Some(s) => Value::Str(Cow::Borrowed(s)),
            None => return Err(EvalError::KeyError { key: key.clone() }),
        },
        Expr::Call(f, arg) => builtins::call(*f, evaluate(arg, vars)?)?,
        Expr::Neg(e) => ops::unary(true, evaluate(e, vars)?)?,
        Expr::Pos(e) => ops::unary(false, evaluate(e, vars)?)?,
        Expr::Not(e) => Value::Bool(!evaluate(e, vars)?.truthy()),
        Expr::Arith(op, l, r) => {
            let l = evaluate(l, vars)?;
            ops::arith(*op, l, evaluate(r, vars)?)?
        }
        Expr::And(values) => short_circuit(values, vars, false)?,
        Expr::Or(values) => short_circuit(values, vars, true)?,
        Expr::Compare(left, rest) => {
            let mut l = evaluate(left, vars)?;
            for (op, right) in rest {
                let r = evaluate(right, vars)?;
                if !ops::compare(*op, &l, &r)? {
                    return Ok(Value::Bool(false));
                }
                l = r;
            }
            Value::Bool(true)
        }
        Expr::IfElse { body, test, orelse } => {
            if evaluate(test, vars)?.truthy() {
                evaluate(body, vars)?
            } else {
                evaluate(orelse, vars)?
            }
        }
    })
}

/// `and` (`stop_when` = false) / `or` (`stop_when` = true): returns the first
/// operand whose truthiness equals `stop_when`, else the last operand.
fn short_circuit<'a>(
    values: &'a [Expr],
    vars: &Vars<'a>,
    stop_when: bool,
) -> Result<Value<'a>, EvalError> {
    let mut last = Value::None;
    for v in values {
        last = evaluate(v, vars)?;
        if last.truthy() == stop_when {
            break;
        }
    }
    Ok(last)
}
