//! Property tests: parsing and evaluating never panic, whatever the input.
//!
//! Conditions come from recipe files written by anyone, and capture values
//! come from arbitrary log lines, so both sides are fuzzed: raw strings,
//! soups of Python-ish tokens (hostile ones included), and well-formed
//! expressions over the allowed grammar evaluated against arbitrary inputs.

use aorta_condition::{Condition, Vars};
use proptest::prelude::*;
use std::collections::BTreeMap;

const KEYS: [&str; 4] = ["a", "b", "loss", "n"];

/// Capture values that exercise the conversions, plus arbitrary text.
fn capture_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("nan".to_owned()),
        Just("-inf".to_owned()),
        Just(" 42 ".to_owned()),
        Just("1_000".to_owned()),
        Just("170141183460469231731687303715884105728".to_owned()),
        Just("9".repeat(5000)),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        "[0-9_ .eE+-]{0,12}",
        any::<String>(),
    ]
}

fn captures() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(prop::sample::select(KEYS.to_vec()), capture_value(), 0..4)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn special_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
    ]
}

/// Parses `src` and, when accepted, evaluates it; only panics matter here.
fn exercise(
    src: &str,
    cap: &BTreeMap<String, String>,
    exit_code: i64,
    wall: f64,
    peak: Option<i64>,
) {
    match Condition::parse(src) {
        Ok(c) => {
            assert_eq!(c.source(), src);
            let vars = Vars {
                capture: cap,
                exit_code,
                walltime_sec: wall,
                peak_vram_mib: peak,
            };
            let _ = c.evaluate(&vars);
        }
        Err(e) => {
            assert!(!e.message.is_empty());
            assert!(e.span.start <= e.span.end && e.span.end <= src.len());
            assert!(src.is_char_boundary(e.span.start) && src.is_char_boundary(e.span.end));
        }
    }
}

const TOKENS: &[&str] = &[
    "capture",
    "['a']",
    "['loss']",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "exit_code",
    "walltime_sec",
    "peak_vram_mib",
    "math",
    ".",
    "isnan",
    "isinf",
    "float",
    "int",
    "len",
    "1",
    "0",
    "999999999",
    "1000000000",
    "0.5",
    ".5",
    "1e3",
    "1e308",
    "1_0",
    "0x1f",
    "1j",
    "'x'",
    "\"\"",
    "'\\x41'",
    "'\\u00e9'",
    "'''t'''",
    "f'x'",
    "b'x'",
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "@",
    "&",
    "|",
    "^",
    "~",
    "<<",
    ">>",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "=",
    ":=",
    ",",
    ":",
    ";",
    "not",
    "and",
    "or",
    "if",
    "else",
    "in",
    "is",
    "lambda",
    "for",
    "None",
    "True",
    "False",
    "...",
    "__import__",
    "open",
    "\n",
    "\\\n",
    "#c\n",
    " ",
    "\t",
    "é",
    "'",
    "\\",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS.to_vec()), 0..40).prop_map(|t| t.join(""))
}

/// Well-formed expressions over the allowed grammar.
fn valid_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(KEYS.to_vec()).prop_map(|k| format!("capture['{k}']")),
        Just("capture['missing']".to_owned()),
        prop::sample::select(vec![
            "exit_code",
            "walltime_sec",
            "peak_vram_mib",
            "capture",
            "float",
            "int",
            "len",
            "True",
            "False",
            "None",
            "0",
            "1",
            "999999999",
            "0.0",
            "1e308",
            ".5",
            "''",
            "'nan'",
            "' 7 '",
            "'abc'",
            "'é'",
        ])
        .prop_map(str::to_owned),
        (0u32..1_000_000_000).prop_map(|v| v.to_string()),
        special_f64()
            .prop_filter("finite literal", |f| f.is_finite())
            .prop_map(|f| format!("{:e}", f.abs())),
    ];
    leaf.prop_recursive(5, 48, 3, |inner| {
        prop_oneof![
            (
                prop::sample::select(vec!["float", "int", "len", "math.isnan", "math.isinf"]),
                inner.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "/", "//"]),
                inner.clone()
            )
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            (prop::sample::select(vec!["-", "+", "not "]), inner.clone())
                .prop_map(|(op, e)| format!("({op}({e}))")),
            (
                inner.clone(),
                prop::sample::select(vec!["and", "or"]),
                inner.clone()
            )
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            (
                inner.clone(),
                prop::collection::vec(
                    (
                        prop::sample::select(vec!["==", "!=", "<", "<=", ">", ">="]),
                        inner.clone()
                    ),
                    1..3,
                ),
            )
                .prop_map(|(first, rest)| {
                    let tail: String = rest.iter().map(|(op, e)| format!(" {op} {e}")).collect();
                    format!("({first}{tail})")
                }),
            (inner.clone(), inner.clone(), inner)
                .prop_map(|(a, c, b)| format!("({a} if {c} else {b})")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        // Integration tests have no src/lib.rs beside them to persist to.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_strings_never_panic(src in any::<String>(), cap in captures()) {
        exercise(&src, &cap, 0, 1.0, None);
    }

    #[test]
    fn token_soups_never_panic(
        src in token_soup(),
        cap in captures(),
        exit_code in any::<i64>(),
        wall in special_f64(),
        peak in any::<Option<i64>>(),
    ) {
        exercise(&src, &cap, exit_code, wall, peak);
    }

    #[test]
    fn valid_expressions_parse_and_evaluate_without_panic(
        src in valid_expr(),
        cap in captures(),
        exit_code in any::<i64>(),
        wall in special_f64(),
        peak in any::<Option<i64>>(),
    ) {
        if src.chars().count() <= aorta_condition::MAX_LEN {
            prop_assert!(Condition::parse(&src).is_ok(), "rejected: {}", src);
        }
        exercise(&src, &cap, exit_code, wall, peak);
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowed(
        open in prop::sample::select(vec!["(", "[", "-", "not ", "{**", "int(", "- (", "+"]),
        n in 0usize..300,
    ) {
        let src = format!("{}1", open.repeat(n));
        let _ = Condition::parse(&src);
    }
}
