//! Evaluation: Python semantics of everything the allow-list admits.

use crate::{Condition, EvalError, Vars};
use std::collections::BTreeMap;

fn captures() -> BTreeMap<String, String> {
    [
        ("k", "v"),
        ("loss", "3.25"),
        ("nanloss", "nan"),
        ("n", "7"),
        ("s", "héllo"),
        ("x", ""),
        ("ws", " 42 "),
        ("big", "170141183460469231731687303715884105727"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn eval_with(src: &str, vars: &Vars) -> Result<bool, EvalError> {
    Condition::parse(src)
        .unwrap_or_else(|e| panic!("{src:?} rejected: {e}"))
        .evaluate(vars)
}

fn eval(src: &str) -> Result<bool, EvalError> {
    let cap = captures();
    let vars = Vars {
        capture: &cap,
        exit_code: 3,
        walltime_sec: 2.5,
        peak_vram_mib: Some(1024),
    };
    eval_with(src, &vars)
}

fn is_true(src: &str) {
    assert_eq!(eval(src), Ok(true), "{src}");
}

fn is_false(src: &str) {
    assert_eq!(eval(src), Ok(false), "{src}");
}

fn fails(src: &str, check: fn(&EvalError) -> bool) {
    match eval(src) {
        Err(e) if check(&e) => {}
        other => panic!("{src}: unexpected {other:?}"),
    }
}

#[test]
fn brief_examples() {
    is_true("capture['k']");
    is_true("float(capture['loss']) > 2.5");
    is_true("int(capture['n']) // 2 == 3");
    is_true("len(capture['s']) >= 3");
    is_false("math.isnan(float(capture['loss']))");
    is_true("math.isnan(float(capture['nanloss']))");
    is_true("math.isinf(float('inf'))");
    is_true("exit_code == 3 and walltime_sec == 2.5 and peak_vram_mib == 1024");
    is_true("exit_code != 0 and walltime_sec > 1.5");
    is_true("'a' if exit_code else 'b'");
    is_true("not capture['x']");
    is_true("0 < exit_code <= 5");
    is_false("0 < exit_code <= 2");
    is_true("999999999 > 0");
    is_false("'a' == 1");
    is_true("1 == 1.0");
    is_true("7 // -2 == -4");
    is_true("-7 / 2 == -3.5");
    is_true("'ab' + 'c' == 'abc'");
    is_true("True + 1 == 2");
}

#[test]
fn peak_vram_none_is_zero() {
    let cap = captures();
    let vars = Vars {
        capture: &cap,
        exit_code: -9,
        walltime_sec: 0.0,
        peak_vram_mib: None,
    };
    assert_eq!(eval_with("peak_vram_mib > 0", &vars), Ok(false));
    assert_eq!(eval_with("peak_vram_mib == 0", &vars), Ok(true));
    assert_eq!(eval_with("exit_code < 0", &vars), Ok(true));
    assert_eq!(eval_with("walltime_sec", &vars), Ok(false));
}

#[test]
fn runtime_errors() {
    let value = |e: &EvalError| matches!(e, EvalError::ValueError(_));
    let type_err = |e: &EvalError| matches!(e, EvalError::TypeError(_));
    let zero = |e: &EvalError| matches!(e, EvalError::ZeroDivision(_));
    let key = |e: &EvalError| matches!(e, EvalError::KeyError { key } if key == "missing");
    let overflow = |e: &EvalError| matches!(e, EvalError::Overflow(_));
    fails("capture['missing']", key);
    fails("float('abc')", value);
    fails("int('1.5')", value);
    fails("int(float('nan'))", value);
    fails("int(float('inf'))", overflow);
    fails("1/0", zero);
    fails("1.0/0", zero);
    fails("1//0", zero);
    fails("1.5//0.0", zero);
    fails("'a' < 1", type_err);
    fails("1 >= 'a'", type_err);
    fails("None < None", type_err);
    fails("'a' + 1", type_err);
    fails("1 + 'a'", type_err);
    fails("-'a'", type_err);
    fails("len(1)", type_err);
    fails("math.isnan('x')", type_err);
    fails("float(None)", type_err);
    fails("int(capture)", type_err);
    fails("capture + 1", type_err);
    fails("int(capture['big']) + 1", overflow);
    assert_eq!(
        eval("capture['missing']").unwrap_err().to_string(),
        "KeyError: 'missing' is not a captured group"
    );
}

#[test]
fn int_string_digit_limit() {
    let mut cap = BTreeMap::new();
    cap.insert("huge".to_owned(), "1".repeat(5000));
    let vars = Vars {
        capture: &cap,
        exit_code: 0,
        walltime_sec: 0.0,
        peak_vram_mib: None,
    };
    let e = eval_with("int(capture['huge']) > 0", &vars).unwrap_err();
    assert!(
        matches!(&e, EvalError::ValueError(m) if m.contains("4300 digits")),
        "{e}"
    );
    assert_eq!(eval_with("len(capture['huge']) == 5000", &vars), Ok(true));
    assert_eq!(eval_with("float(capture['huge']) > 1e300", &vars), Ok(true));
}

#[test]
fn short_circuit_returns_operands() {
    is_true("(capture['x'] or 'fallback') == 'fallback'");
    is_true("(capture['k'] or capture['missing']) == 'v'");
    is_true("(capture['x'] and capture['missing']) == ''");
    is_true("(0 or 0.0 or '' or None) == None");
    is_true("(1 and 2 and 3) == 3");
    // Skipped operands are never evaluated, so they cannot raise.
    is_false("exit_code == 0 and 1 / 0");
    is_true("exit_code != 0 or capture['missing']");
    is_false("exit_code < 0 < capture['missing']");
    is_true("1 if exit_code else 1 / 0");
}

#[test]
fn numeric_tower() {
    is_true("1 / 2 == 0.5");
    is_true("4 / 2 == 2");
    is_true("7.5 // 2 == 3.0");
    is_true("-7.5 // 2 == -4");
    is_true("-7 // 2 == -4");
    is_true("7 // 2 == 3");
    is_true("True + True == 2");
    is_true("-True == -1");
    is_true("+False == 0");
    is_true("True == 1 and False == 0.0");
    is_true("1 + 0.5 == 1.5");
    is_true("0.1 + 0.2 != 0.3");
    is_true("float('nan') != float('nan')");
    is_false("float('nan') == float('nan')");
    is_false("float('nan') < 1 or float('nan') >= 1");
    is_true("float('nan')");
    is_true("float('-inf') < -999999999");
    is_true("int(-2.7) == -2 and int(2.7) == 2");
    is_true("int(' 42 ') == 42 and int(capture['ws']) == 42");
    is_true("int('-1_000') == -1000");
    is_true("float(' 1.5 ') == 1.5 and float('1_0.5') == 10.5");
    is_true("float('Infinity') == float('inf') and float('-inf') < 0");
    is_true("float(3) == 3.0 and int(True) == 1 and float(False) == 0");
    // Exact int/float comparison: 2^127 - 1 differs from the double 2^127.
    is_true("int(capture['big']) != 170141183460469231731687303715884105727.0");
    is_true("int(capture['big']) < float(capture['big'])");
    is_true("1e308 + 1e308 == float('inf')");
    is_true("999999999 + 999999999 - 999999999 == 999999999");
    is_true("int(capture['big']) / 2 > 8e37");
}

#[test]
fn strings_and_other_types() {
    is_true("'abc' < 'abd' and 'B' < 'a' and 'é' > 'z'");
    is_true("'ab' < 'abc' <= 'abc'");
    is_true("len('héllo') == 5");
    is_true("len(capture) == 8");
    is_true("capture == capture");
    is_false("capture == 1");
    is_true("capture");
    is_false("None");
    is_false("''");
    is_false("0.0");
    is_false("-0.0");
    is_true("not None and not 0 and not '' and not False");
    is_true("None == None and None != 0");
    is_true("float == float and float != int and len != 'len'");
    is_true("len");
    is_true("'\\x41\\u00e9\\n' == 'Aé\\n'");
    is_true("'a' 'b' == 'ab'");
    is_true("1 < 2 < 3 > 2 >= 2 == 2.0 != 3");
    is_true("not 1 == 2");
    is_true("(not 1) == False");
}

#[test]
fn evaluation_is_repeatable() {
    let cap = captures();
    let c = Condition::parse("float(capture['loss']) > walltime_sec").unwrap();
    for wall in [0.0, 3.0, 4.0] {
        let vars = Vars {
            capture: &cap,
            exit_code: 0,
            walltime_sec: wall,
            peak_vram_mib: None,
        };
        assert_eq!(c.evaluate(&vars), Ok(3.25 > wall));
    }
}
