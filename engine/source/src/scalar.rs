//! Plain-scalar resolution. Recipes were written for PyYAML's `safe_load` (YAML 1.1), so
//! `yes`/`on` are booleans and `1e3` (no dot, no exponent sign) stays a string. JSON files use
//! JSON's own grammar instead.

use crate::Value;

/// Why a scalar cannot be resolved to a value; `Display` is the diagnostic's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScalarError {
    /// An integer literal outside `i64` (the text as written).
    #[error("integer {0} does not fit in 64 bits")]
    IntOverflow(String),
    #[error("'{0}' is not a JSON value")]
    NotJson(String),
    /// A tag other than YAML's core ones (shown as written, `!foo` or `!!foo`).
    #[error("unsupported tag {0}")]
    UnsupportedTag(String),
    /// `!!int` etc. on text that is not one.
    #[error("'{text}' is not a valid !!{tag}")]
    NotTagged { text: String, tag: String },
}

/// Resolves an untagged plain YAML 1.1 scalar the way PyYAML's SafeLoader does.
pub(crate) fn resolve_yaml11(s: &str) -> Result<Value, ScalarError> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true))
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false))
        }
        _ => {}
    }
    if let Some(v) = yaml11_int(s) {
        return v.map(Value::Int);
    }
    if let Some(f) = yaml11_float(s) {
        return Ok(Value::Float(f));
    }
    Ok(Value::Str(s.to_string()))
}

fn split_sign(s: &str) -> (i64, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (-1, &s[1..]),
        Some(b'+') => (1, &s[1..]),
        _ => (1, s),
    }
}

/// `Some(Err)` when the text is an integer that does not fit in 64 bits.
fn yaml11_int(s: &str) -> Option<Result<i64, ScalarError>> {
    let (sign, body) = split_sign(s);
    if body.is_empty() {
        return None;
    }
    let digits_ok = |t: &str, radix: u32| {
        !t.is_empty()
            && t.chars().all(|c| c == '_' || c.is_digit(radix))
            && t.chars().any(|c| c != '_')
    };
    let (radix, digits) = if let Some(b) = body.strip_prefix("0b") {
        (2, b)
    } else if let Some(x) = body.strip_prefix("0x") {
        (16, x)
    } else if body.contains(':') {
        return sexagesimal_int(body).map(|v| v.map(|v| sign * v));
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else if body == "0"
        || (body.starts_with(|c: char| c.is_ascii_digit()) && !body.starts_with('0'))
    {
        (10, body)
    } else {
        return None;
    };
    if !digits_ok(digits, radix) {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    // Parse with the sign attached so i64::MIN fits.
    let signed = if sign < 0 { format!("-{clean}") } else { clean };
    Some(i64::from_str_radix(&signed, radix).map_err(|_| ScalarError::IntOverflow(s.to_string())))
}

/// `190:20:30` style base-60 integers (YAML 1.1); rare, but PyYAML accepts them.
fn sexagesimal_int(body: &str) -> Option<Result<i64, ScalarError>> {
    let mut parts = body.split(':');
    let first = parts.next()?;
    if first.is_empty()
        || first.starts_with('0')
        || !first.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let mut total: i64 = first.replace('_', "").parse().ok()?;
    for p in parts {
        if p.is_empty() || p.len() > 2 || !p.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let v: i64 = p.parse().ok()?;
        if v > 59 {
            return None;
        }
        total = match total.checked_mul(60).and_then(|t| t.checked_add(v)) {
            Some(t) => t,
            None => return Some(Err(ScalarError::IntOverflow(body.to_string()))),
        };
    }
    Some(Ok(total))
}

/// PyYAML's float regex: a dot is required unless it is `.inf`/`.nan`, and an exponent
/// needs an explicit sign (`1.0e+3`).
fn yaml11_float(s: &str) -> Option<f64> {
    let (sign, body) = split_sign(s);
    let sign = sign as f64;
    match body {
        ".inf" | ".Inf" | ".INF" => return Some(sign * f64::INFINITY),
        ".nan" | ".NaN" | ".NAN" if s == body => return Some(f64::NAN),
        _ => {}
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    if let Some(e) = exponent {
        let ok = (e.starts_with('+') || e.starts_with('-'))
            && e.len() > 1
            && e[1..].chars().all(|c| c.is_ascii_digit());
        if !ok {
            return None;
        }
    }
    let (int_part, frac) = mantissa.split_once('.')?;
    let int_ok = if int_part.is_empty() {
        // `.5` form: PyYAML wants a digit right after the dot and no sign.
        s == body && frac.starts_with(|c: char| c.is_ascii_digit())
    } else {
        int_part.starts_with(|c: char| c.is_ascii_digit())
            && int_part.chars().all(|c| c.is_ascii_digit() || c == '_')
    };
    if !int_ok || !frac.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return None;
    }
    let text: String = format!("{int_part}.{frac}").replace('_', "");
    let text = if text.ends_with('.') {
        format!("{text}0")
    } else {
        text
    };
    let text = if text.starts_with('.') {
        format!("0{text}")
    } else {
        text
    };
    let value: f64 = match exponent {
        Some(e) => format!("{text}e{e}").parse().ok()?,
        None => text.parse().ok()?,
    };
    Some(sign * value)
}

/// Resolves a plain scalar in a `.json` file (JSON grammar: true/false/null/numbers).
pub(crate) fn resolve_json(s: &str) -> Result<Value, ScalarError> {
    match s {
        "null" => Ok(Value::Null),
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        _ => match serde_json::from_str::<serde_json::Number>(s) {
            Ok(n) => {
                if let Some(i) = n.as_i64() {
                    Ok(Value::Int(i))
                } else if n.is_u64() {
                    Err(ScalarError::IntOverflow(s.to_string()))
                } else {
                    Ok(Value::Float(n.as_f64().unwrap_or(f64::NAN)))
                }
            }
            Err(_) => Err(ScalarError::NotJson(s.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Value {
        resolve_yaml11(s).unwrap()
    }

    #[test]
    fn pyyaml_booleans_and_nulls() {
        assert_eq!(r("yes"), Value::Bool(true));
        assert_eq!(r("Off"), Value::Bool(false));
        assert_eq!(r("~"), Value::Null);
        assert_eq!(r(""), Value::Null);
        assert_eq!(r("y"), Value::Str("y".into()));
    }

    #[test]
    fn pyyaml_integers() {
        assert_eq!(r("42"), Value::Int(42));
        assert_eq!(r("-7"), Value::Int(-7));
        assert_eq!(r("1_000"), Value::Int(1000));
        assert_eq!(r("0x1F"), Value::Int(31));
        assert_eq!(r("010"), Value::Int(8));
        assert_eq!(r("0b101"), Value::Int(5));
        assert_eq!(r("1:30"), Value::Int(90));
        assert!(resolve_yaml11("99999999999999999999").is_err());
        assert_eq!(r("-9223372036854775808"), Value::Int(i64::MIN));
    }

    #[test]
    fn pyyaml_floats_need_a_dot_and_signed_exponent() {
        assert_eq!(r("1.15"), Value::Float(1.15));
        assert_eq!(r("1.0e+3"), Value::Float(1000.0));
        assert_eq!(r("1e3"), Value::Str("1e3".into()));
        assert_eq!(r("1.0e3"), Value::Str("1.0e3".into()));
        assert_eq!(r(".5"), Value::Float(0.5));
        assert_eq!(r("1."), Value::Float(1.0));
        assert_eq!(r("-.inf"), Value::Float(f64::NEG_INFINITY));
        assert!(matches!(r(".nan"), Value::Float(f) if f.is_nan()));
        assert_eq!(r("1.2.3"), Value::Str("1.2.3".into()));
    }

    #[test]
    fn json_scalars() {
        assert_eq!(resolve_json("1e3").unwrap(), Value::Float(1000.0));
        assert_eq!(resolve_json("-3").unwrap(), Value::Int(-3));
        assert!(resolve_json("yes").is_err());
    }
}
