//! Python operator semantics: `+ - / //`, unary `- +`, `==`/`!=` and the
//! orderings, over the numeric tower (bool ⊂ int ⊂ float) and strings.

use crate::validate::{ArithOp, CmpOp};
use crate::value::{Num, Value};
use crate::EvalError;
use std::borrow::Cow;
use std::cmp::Ordering;

fn overflow() -> EvalError {
    EvalError::Overflow("integer result does not fit in 128 bits".to_owned())
}

fn symbol(op: ArithOp) -> &'static str {
    match op {
        ArithOp::Add => "+",
        ArithOp::Sub => "-",
        ArithOp::Div => "/",
        ArithOp::FloorDiv => "//",
    }
}

/// `left op right`.
pub(crate) fn arith<'a>(
    op: ArithOp,
    left: Value<'a>,
    right: Value<'a>,
) -> Result<Value<'a>, EvalError> {
    if let (ArithOp::Add, Value::Str(a), Value::Str(b)) = (op, &left, &right) {
        let mut s = String::with_capacity(a.len() + b.len());
        s.push_str(a);
        s.push_str(b);
        return Ok(Value::Str(Cow::Owned(s)));
    }
    let (Some(a), Some(b)) = (left.num(), right.num()) else {
        let message = match (op, &left) {
            (ArithOp::Add, Value::Str(_)) => format!(
                "can only concatenate str (not \"{}\") to str",
                right.type_name()
            ),
            _ => format!(
                "unsupported operand type(s) for {}: '{}' and '{}'",
                symbol(op),
                left.type_name(),
                right.type_name()
            ),
        };
        return Err(EvalError::TypeError(message));
    };
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => match op {
            ArithOp::Add => x.checked_add(y).map(Value::Int).ok_or_else(overflow),
            ArithOp::Sub => x.checked_sub(y).map(Value::Int).ok_or_else(overflow),
            ArithOp::Div => int_truediv(x, y).map(Value::Float),
            ArithOp::FloorDiv => int_floordiv(x, y).map(Value::Int),
        },
        _ => {
            let (x, y) = (a.to_f64(), b.to_f64());
            match op {
                ArithOp::Add => Ok(Value::Float(x + y)),
                ArithOp::Sub => Ok(Value::Float(x - y)),
                ArithOp::Div if y == 0.0 => {
                    Err(EvalError::ZeroDivision("float division by zero".to_owned()))
                }
                ArithOp::Div => Ok(Value::Float(x / y)),
                ArithOp::FloorDiv => float_floordiv(x, y).map(Value::Float),
            }
        }
    }
}

/// Unary `-` (`negate`) or `+`.
pub(crate) fn unary(negate: bool, v: Value<'_>) -> Result<Value<'_>, EvalError> {
    match v.num() {
        Some(Num::Int(i)) if negate => i.checked_neg().map(Value::Int).ok_or_else(overflow),
        Some(Num::Int(i)) => Ok(Value::Int(i)),
        Some(Num::Float(f)) => Ok(Value::Float(if negate { -f } else { f })),
        None => Err(EvalError::TypeError(format!(
            "bad operand type for unary {}: '{}'",
            if negate { '-' } else { '+' },
            v.type_name()
        ))),
    }
}

/// Python's `int / int`: the correctly rounded quotient, as CPython does.
fn int_truediv(a: i128, b: i128) -> Result<f64, EvalError> {
    if b == 0 {
        return Err(EvalError::ZeroDivision("division by zero".to_owned()));
    }
    const EXACT: u128 = 1 << 53;
    let (ua, ub) = (a.unsigned_abs(), b.unsigned_abs());
    let magnitude = if ua <= EXACT && ub <= EXACT {
        // Both operands are exact doubles, so IEEE division rounds correctly.
        ua as f64 / ub as f64
    } else {
        div_round(ua, ub)
    };
    Ok(if (a < 0) != (b < 0) {
        -magnitude
    } else {
        magnitude
    })
}

/// Correctly rounded `a / b` for `a, b <= 2^127`, `b > 0`: long division to
/// at least 55 significant bits plus a sticky bit, then one rounding.
fn div_round(a: u128, b: u128) -> f64 {
    if a == 0 {
        return 0.0;
    }
    let (mut q, mut r) = (a / b, a % b);
    let mut exp: i32 = 0;
    while q < (1 << 54) {
        // r < b <= 2^127, so doubling cannot overflow.
        r <<= 1;
        q <<= 1;
        if r >= b {
            r -= b;
            q |= 1;
        }
        exp -= 1;
    }
    q |= u128::from(r != 0);
    // exp >= -(127 + 55): a normal power of two, so scaling is exact.
    let scale = f64::from_bits(((1023 + exp) as u64) << 52);
    q as f64 * scale
}

/// Python's `int // int`: floor division.
fn int_floordiv(a: i128, b: i128) -> Result<i128, EvalError> {
    if b == 0 {
        return Err(EvalError::ZeroDivision(
            "integer division or modulo by zero".to_owned(),
        ));
    }
    let q = a.checked_div(b).ok_or_else(overflow)?;
    // checked_div succeeded, so i128::MIN % -1 cannot occur here.
    let r = a % b;
    Ok(if r != 0 && ((r < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Python's `float // float`, following CPython's `float_floor_div`.
fn float_floordiv(vx: f64, wx: f64) -> Result<f64, EvalError> {
    if wx == 0.0 {
        return Err(EvalError::ZeroDivision(
            "float floor division by zero".to_owned(),
        ));
    }
    let m = vx % wx;
    let mut div = (vx - m) / wx;
    if m != 0.0 && ((wx < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    Ok(if div != 0.0 {
        let mut floor = div.floor();
        if div - floor > 0.5 {
            floor += 1.0;
        }
        floor
    } else {
        0.0f64.copysign(vx / wx)
    })
}

/// Exact comparison of an int with a float (`None` when the float is NaN),
/// as Python does rather than converting the int to a float.
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    const TWO_127: f64 = (1u128 << 127) as f64;
    if f.is_nan() {
        return None;
    }
    let floor = f.floor();
    if floor >= TWO_127 {
        return Some(Ordering::Less);
    }
    if floor < -TWO_127 {
        return Some(Ordering::Greater);
    }
    // In range, so the cast is exact.
    match i.cmp(&(floor as i128)) {
        Ordering::Equal if f > floor => Some(Ordering::Less),
        o => Some(o),
    }
}

fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).map(Ordering::reverse),
    }
}

/// Python `==`: values of unrelated types are simply unequal.
fn equal(l: &Value<'_>, r: &Value<'_>) -> bool {
    match (l, r) {
        (Value::Str(a), Value::Str(b)) => a == b,
        (Value::None, Value::None) => true,
        (Value::Dict(a), Value::Dict(b)) => a == b,
        (Value::Builtin(a), Value::Builtin(b)) => a == b,
        _ => match (l.num(), r.num()) {
            (Some(a), Some(b)) => num_cmp(a, b) == Some(Ordering::Equal),
            _ => false,
        },
    }
}

/// `l op r` for one link of a (possibly chained) comparison.
pub(crate) fn compare(op: CmpOp, l: &Value<'_>, r: &Value<'_>) -> Result<bool, EvalError> {
    let ord = match op {
        CmpOp::Eq => return Ok(equal(l, r)),
        CmpOp::NotEq => return Ok(!equal(l, r)),
        _ => match (l, r) {
            // UTF-8 byte order is code point order, as in Python.
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            _ => match (l.num(), r.num()) {
                (Some(a), Some(b)) => num_cmp(a, b),
                _ => {
                    let sym = match op {
                        CmpOp::Lt => "<",
                        CmpOp::LtE => "<=",
                        CmpOp::Gt => ">",
                        _ => ">=",
                    };
                    return Err(EvalError::TypeError(format!(
                        "'{sym}' not supported between instances of '{}' and '{}'",
                        l.type_name(),
                        r.type_name()
                    )));
                }
            },
        },
    };
    // Every ordering involving NaN is false.
    let Some(o) = ord else { return Ok(false) };
    Ok(match op {
        CmpOp::Lt => o.is_lt(),
        CmpOp::LtE => o.is_le(),
        CmpOp::Gt => o.is_gt(),
        _ => o.is_ge(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn true_division_rounds_correctly() {
        assert_eq!(div_round(1, 3), 1.0 / 3.0);
        assert_eq!(int_truediv(-7, 2), Ok(-3.5));
        // 2^60 + 1 is not a double; the quotient must still round once.
        let big = (1i128 << 60) + 1;
        assert_eq!(int_truediv(big, 1), Ok(1152921504606846976.0));
        assert_eq!(int_truediv(i128::MAX, i128::MAX), Ok(1.0));
        assert_eq!(int_truediv(i128::MIN, 1), Ok(-(2f64.powi(127))));
        assert_eq!(int_truediv(1, i128::MIN), Ok(-(2f64.powi(-127))));
        assert_eq!(int_truediv(10_i128.pow(30), 3), Ok(3.333333333333333e29));
    }

    #[test]
    fn floor_division_matches_python() {
        assert_eq!(int_floordiv(7, -2), Ok(-4));
        assert_eq!(int_floordiv(-7, 2), Ok(-4));
        assert_eq!(int_floordiv(7, 2), Ok(3));
        assert!(int_floordiv(i128::MIN, -1).is_err());
        assert_eq!(float_floordiv(-7.0, 2.0), Ok(-4.0));
        assert_eq!(float_floordiv(1.0, f64::INFINITY), Ok(0.0));
        assert_eq!(float_floordiv(-1.0, f64::INFINITY), Ok(-1.0));
        assert!(float_floordiv(f64::INFINITY, 1.0).unwrap().is_nan());
    }

    #[test]
    fn int_float_comparison_is_exact() {
        let big = (1i128 << 53) + 1;
        assert_eq!(cmp_int_float(big, big as f64), Some(Ordering::Greater));
        assert_eq!(cmp_int_float(1, 1.5), Some(Ordering::Less));
        assert_eq!(cmp_int_float(-2, -1.5), Some(Ordering::Less));
        assert_eq!(
            cmp_int_float(i128::MAX, f64::INFINITY),
            Some(Ordering::Less)
        );
        assert_eq!(
            cmp_int_float(i128::MIN, -(2f64.powi(127))),
            Some(Ordering::Equal)
        );
        assert_eq!(cmp_int_float(0, f64::NAN), None);
    }
}
