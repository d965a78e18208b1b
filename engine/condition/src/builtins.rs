//! The callable functions: `float()`, `int()`, `len()`, `math.isnan()`,
//! `math.isinf()`, with the input rules of their Python counterparts
//! (whitespace, underscores between digits, `nan`/`inf` spellings, the
//! 4300-digit limit of `int(str)`).
//!
//! Known divergence: Python also accepts non-ASCII decimal digits (e.g.
//! Arabic-Indic) in `float()`/`int()`; these are rejected here as invalid
//! literals (the caller sees "did not fire").

use crate::validate::Func;
use crate::value::{repr_str, Num, Value};
use crate::EvalError;

/// CPython's default `sys.get_int_max_str_digits()`.
const INT_MAX_STR_DIGITS: usize = 4300;

pub(crate) fn call(f: Func, arg: Value<'_>) -> Result<Value<'static>, EvalError> {
    match f {
        Func::Float => to_float(&arg).map(Value::Float),
        Func::Int => to_int(&arg).map(Value::Int),
        Func::Len => match &arg {
            Value::Str(s) => Ok(Value::Int(s.chars().count() as i128)),
            Value::Dict(d) => Ok(Value::Int(d.len() as i128)),
            _ => Err(EvalError::TypeError(format!(
                "object of type '{}' has no len()",
                arg.type_name()
            ))),
        },
        Func::IsNan | Func::IsInf => match arg.num() {
            Some(n) => {
                let x = n.to_f64();
                Ok(Value::Bool(if f == Func::IsNan {
                    x.is_nan()
                } else {
                    x.is_infinite()
                }))
            }
            None => Err(EvalError::TypeError(format!(
                "must be real number, not {}",
                arg.type_name()
            ))),
        },
    }
}

/// Python's `str.strip()` whitespace (Rust's `char::is_whitespace` lacks the
/// ASCII separators U+001C..U+001F that Python counts as space).
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

fn to_float(v: &Value<'_>) -> Result<f64, EvalError> {
    match (v, v.num()) {
        (_, Some(n)) => Ok(n.to_f64()),
        (Value::Str(s), _) => parse_float(s).ok_or_else(|| {
            EvalError::ValueError(format!(
                "could not convert string to float: {}",
                repr_str(s)
            ))
        }),
        _ => Err(EvalError::TypeError(format!(
            "float() argument must be a string or a real number, not '{}'",
            v.type_name()
        ))),
    }
}

fn to_int(v: &Value<'_>) -> Result<i128, EvalError> {
    match (v, v.num()) {
        (_, Some(Num::Int(i))) => Ok(i),
        (_, Some(Num::Float(f))) => float_to_int(f),
        (Value::Str(s), _) => parse_int(s),
        _ => Err(EvalError::TypeError(format!(
            "int() argument must be a string, a bytes-like object or a real number, not '{}'",
            v.type_name()
        ))),
    }
}

/// `int(float)` truncates toward zero.
fn float_to_int(f: f64) -> Result<i128, EvalError> {
    const TWO_127: f64 = (1u128 << 127) as f64;
    if f.is_nan() {
        return Err(EvalError::ValueError(
            "cannot convert float NaN to integer".to_owned(),
        ));
    }
    if f.is_infinite() {
        return Err(EvalError::Overflow(
            "cannot convert float infinity to integer".to_owned(),
        ));
    }
    let t = f.trunc();
    if !(-TWO_127..TWO_127).contains(&t) {
        return Err(EvalError::Overflow(
            "integer result does not fit in 128 bits".to_owned(),
        ));
    }
    Ok(t as i128)
}

/// Splits an optional sign off `s`; returns (negative, rest).
fn split_sign(s: &str) -> (bool, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

/// Whether `s` is `digit (['_'] digit)*` over ASCII digits.
fn is_digitpart(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_digit()
        && b[b.len() - 1].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_digit() || *c == b'_')
        && !s.contains("__")
}

/// Python's `int(str)` in base 10.
fn parse_int(raw: &str) -> Result<i128, EvalError> {
    let invalid = || {
        EvalError::ValueError(format!(
            "invalid literal for int() with base 10: {}",
            repr_str(raw)
        ))
    };
    let (negative, digits) = split_sign(raw.trim_matches(is_py_space));
    if !is_digitpart(digits) {
        return Err(invalid());
    }
    let count = digits.bytes().filter(u8::is_ascii_digit).count();
    if count > INT_MAX_STR_DIGITS {
        return Err(EvalError::ValueError(format!(
            "Exceeds the limit ({INT_MAX_STR_DIGITS} digits) for integer string conversion: \
             value has {count} digits; use sys.set_int_max_str_digits() to increase the limit"
        )));
    }
    let mut value: i128 = 0;
    for d in digits.bytes().filter(u8::is_ascii_digit) {
        let d = i128::from(d - b'0');
        let next = value.checked_mul(10).and_then(|v| {
            if negative {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        });
        value = next.ok_or_else(|| {
            EvalError::Overflow(format!(
                "int() of a {count}-digit string does not fit in 128 bits"
            ))
        })?;
    }
    Ok(value)
}

/// Python's `float(str)`: surrounding whitespace, optional sign, `nan`,
/// `inf`/`infinity` (any case), or a decimal literal with optional
/// underscores between digits.
fn parse_float(raw: &str) -> Option<f64> {
    let (negative, body) = split_sign(raw.trim_matches(is_py_space));
    let sign = if negative { -1.0 } else { 1.0 };
    let lower = body.to_ascii_lowercase();
    match lower.as_str() {
        "nan" => return Some(f64::NAN),
        "inf" | "infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let (mantissa, exponent) = match lower.find('e') {
        Some(i) => (&lower[..i], Some(&lower[i + 1..])),
        None => (lower.as_str(), None),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], Some(&mantissa[i + 1..])),
        None => (mantissa, None),
    };
    let int_ok = int_part.is_empty() || is_digitpart(int_part);
    let frac_ok = frac_part.is_none_or(|f| f.is_empty() || is_digitpart(f));
    let has_digits = !int_part.is_empty() || frac_part.is_some_and(|f| !f.is_empty());
    let exp_ok = exponent.is_none_or(|e| is_digitpart(split_sign(e).1));
    if !(int_ok && frac_ok && has_digits && exp_ok) {
        return None;
    }
    lower.replace('_', "").parse::<f64>().ok().map(|v| sign * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_strings() {
        for (s, want) in [
            (" 1.5 ", 1.5),
            ("1_000.5", 1000.5),
            ("-inf", f64::NEG_INFINITY),
            ("Infinity", f64::INFINITY),
            ("1e3", 1000.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("+1E-2", 0.01),
            ("1e1_0", 1e10),
            ("\x1c2\x1f", 2.0),
        ] {
            assert_eq!(parse_float(s), Some(want), "{s:?}");
        }
        assert!(parse_float("nan").is_some_and(f64::is_nan));
        assert!(parse_float("-NaN").is_some_and(f64::is_nan));
        for bad in [
            "", "abc", "1_", "_1", "1__0", ".", "e5", "1e", "1.5.5", "in f", "0x10", "- 1",
        ] {
            assert_eq!(parse_float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn int_strings() {
        assert_eq!(parse_int(" 42 "), Ok(42));
        assert_eq!(parse_int("-1_000"), Ok(-1000));
        assert_eq!(parse_int("+007"), Ok(7));
        for bad in ["1.5", "", "_1", "1_", "abc", "- 1", "0x10"] {
            assert!(
                matches!(parse_int(bad), Err(EvalError::ValueError(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            parse_int(&"1".repeat(4301)),
            Err(EvalError::ValueError(_))
        ));
        assert!(matches!(
            parse_int(&"1".repeat(4300)),
            Err(EvalError::Overflow(_))
        ));
        assert_eq!(parse_int(&format!("{}1", "0".repeat(4299))), Ok(1));
        assert_eq!(parse_int(&i128::MIN.to_string()), Ok(i128::MIN));
    }

    #[test]
    fn float_to_int_truncates() {
        assert_eq!(float_to_int(-2.7), Ok(-2));
        assert!(float_to_int(f64::NAN).is_err());
        assert!(float_to_int(f64::INFINITY).is_err());
        assert!(float_to_int(1e39).is_err());
    }
}
