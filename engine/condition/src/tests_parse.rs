//! Load-time behaviour: what the allow-list rejects (with which message and
//! span) and what it accepts.

use crate::{Condition, ConditionError};

fn rejected(src: &str) -> ConditionError {
    match Condition::parse(src) {
        Ok(c) => panic!("{src:?} was accepted: {c:?}"),
        Err(e) => {
            assert!(
                e.span.start <= e.span.end && e.span.end <= src.len(),
                "{src:?}: {e:?}"
            );
            assert!(src.is_char_boundary(e.span.start) && src.is_char_boundary(e.span.end));
            e
        }
    }
}

/// Asserts rejection with a message containing `needle`.
fn rejects(src: &str, needle: &str) {
    let e = rejected(src);
    assert!(
        e.message.contains(needle),
        "{src:?}: {:?} lacks {needle:?}",
        e.message
    );
}

/// Asserts rejection whose span covers exactly `at`.
fn rejects_at(src: &str, needle: &str, at: &str) {
    rejects(src, needle);
    let e = rejected(src);
    assert_eq!(&src[e.span.clone()], at, "{src:?}: {e:?}");
}

#[test]
fn hostile_lines_are_rejected() {
    let cases = [
        ("__import__('os')", "name '__import__' is not allowed"),
        (
            "().__class__.__bases__[0].__subclasses__()",
            "attribute access is not allowed",
        ),
        ("open('/etc/passwd')", "name 'open' is not allowed"),
        ("exec('x')", "name 'exec' is not allowed"),
        ("eval('1')", "name 'eval' is not allowed"),
        ("lambda: 1", "lambda expressions are not allowed"),
        ("[x for x in capture]", "comprehensions"),
        ("(x for x in capture)", "comprehensions"),
        ("{k: 1 for k in capture}", "comprehensions"),
        ("len(x for x in capture)", "comprehensions"),
        ("capture.update({})", "attribute access is not allowed"),
        ("type(capture)", "name 'type' is not allowed"),
        ("getattr(capture, 'x')", "name 'getattr' is not allowed"),
        ("capture['x'].__class__", "attribute access is not allowed"),
        ("math.__loader__", "attribute access is not allowed"),
        ("math.pi", "attribute access is not allowed"),
        ("math.isnan", "attribute access is not allowed"),
        ("math", "'math' may only be used to call"),
        ("math['x']", "subscripts are only allowed as capture"),
        ("2 ** 8", "operator '**' is not allowed; allowed: + - / //"),
        ("2 * 3", "operator '*' is not allowed; allowed: + - / //"),
        ("5 % 2", "operator '%' is not allowed"),
        ("a @ b", "operator '@' is not allowed"),
        ("1 & 2", "operator '&' is not allowed"),
        ("1 | 2", "operator '|' is not allowed"),
        ("1 ^ 2", "operator '^' is not allowed"),
        ("1 << 2", "operator '<<' is not allowed"),
        ("1 >> 2", "operator '>>' is not allowed"),
        ("~1", "operator '~' is not allowed"),
        ("'a' in capture", "comparison operator 'in' is not allowed"),
        (
            "'a' not in capture",
            "comparison operator 'not in' is not allowed",
        ),
        (
            "exit_code is None",
            "comparison operator 'is' is not allowed",
        ),
        (
            "exit_code is not None",
            "comparison operator 'is not' is not allowed",
        ),
        ("capture[exit_code]", "indexed with a string literal"),
        ("capture[0]", "indexed with a string literal"),
        ("capture['x':]", "slicing is not allowed"),
        ("capture['a', 'b']", "indexed with a string literal"),
        ("exit_code['x']", "subscripts are only allowed as capture"),
        ("foo['x']", "name 'foo' is not allowed"),
        ("f'{x}'", "f-strings are not allowed"),
        ("b'x'", "bytes literals are not allowed"),
        ("r'x'", "prefixed string literals are not allowed"),
        ("(x := 1)", "assignment expressions (:=) are not allowed"),
        ("x := 1", "assignment expressions (:=) are not allowed"),
        ("[1, 2]", "list literals are not allowed"),
        ("(1, 2)", "tuple literals are not allowed"),
        ("()", "tuple literals are not allowed"),
        ("exit_code, walltime_sec", "a bare 'a, b' is a tuple"),
        ("{}", "dict literals are not allowed"),
        ("{'a': 1}", "dict literals are not allowed"),
        ("{1}", "set literals are not allowed"),
        ("len(*capture)", "argument unpacking"),
        (
            "int(capture['x'], base=16)",
            "keyword arguments are not allowed",
        ),
        (
            "int(capture['x'], 16)",
            "int() takes exactly one positional argument (2 given)",
        ),
        (
            "float()",
            "float() takes exactly one positional argument (0 given)",
        ),
        ("capture(1)", "'capture' cannot be called"),
        (
            "float(1)(2)",
            "only float(), int(), len(), math.isnan() and math.isinf() may be called",
        ),
        ("math.sqrt(4)", "attribute access is not allowed"),
        ("*capture", "starred expressions"),
        ("1j", "complex number literals are not allowed"),
        ("...", "Ellipsis"),
        ("await x", "'await' is not allowed"),
        ("yield 1", "'yield' is not allowed"),
        ("x = 1", "'=' is not allowed here"),
        ("True.real", "attribute access is not allowed"),
        ("print", "name 'print' is not allowed"),
        ("__builtins__", "name '__builtins__' is not allowed"),
    ];
    for (src, needle) in cases {
        rejects(src, needle);
    }
}

#[test]
fn integer_literal_cap() {
    assert!(Condition::parse("999999999").is_ok());
    assert!(Condition::parse("-999999999").is_ok());
    assert!(
        Condition::parse("1e12 > 1").is_ok(),
        "floats are not capped"
    );
    assert!(Condition::parse("True + 1").is_ok());
    rejects_at(
        "exit_code == 1000000000",
        "integer literal 1000000000 is too large (|v| must be < 10^9)",
        "1000000000",
    );
    rejects("-1000000000", "is too large");
    rejects("1_000_000_000", "integer literal 1000000000 is too large");
    rejects("0x3B9ACA00", "integer literal 1000000000 is too large");
    rejects("999999999999999999999999999999999999999999", "is too large");
}

#[test]
fn length_and_emptiness() {
    rejects("", "condition is empty");
    rejects("   \t\n ", "condition is empty");
    let long = format!("exit_code == 0{}", " ".repeat(243));
    assert_eq!(long.chars().count(), 257);
    rejects_at(&long, "condition is longer than 256 characters (257)", " ");
    let ok = format!("exit_code == 0{}", " ".repeat(242));
    assert!(Condition::parse(&ok).is_ok());
    // Characters, not bytes, are counted.
    let accents = format!("capture['{}'] == ''", "é".repeat(200));
    assert!(accents.len() > 256 && accents.chars().count() < 256);
    assert!(Condition::parse(&accents).is_ok());
    rejects(&"(".repeat(300), "longer than 256 characters (300)");
}

#[test]
fn syntax_errors() {
    for src in [
        "exit_code ==",
        "(exit_code",
        "exit_code)",
        "1 2",
        "capture[",
        "'abc",
        "exit_code == 0\nwalltime_sec > 1",
        "exit_code +\n 1",
        "1 if exit_code",
        "a..b",
        "exit_code === 1",
        "not",
        "# just a comment",
        "1 <> 2",
        "$",
        "exit_code\u{a0}== 0",
        "0123",
        "1 +",
        "\\ x",
        "def",
        "x.if",
    ] {
        let e = rejected(src);
        assert!(e.message.starts_with("syntax error"), "{src:?}: {e:?}");
    }
    rejects_at("exit_code)", "unmatched ')'", ")");
    rejects_at("exit_code == == 1", "unexpected '=='", "==");
    rejects_at("1 +", "unexpected end of condition", "");
}

#[test]
fn nesting_is_bounded() {
    let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    rejects(&deep, "nested too deeply");
    rejects(&format!("{}1", "-".repeat(200)), "nested too deeply");
    rejects(&format!("{}1", "[".repeat(100)), "nested too deeply");
    rejects(&format!("{}1", "- (".repeat(70)), "nested too deeply");
    rejects(&format!("{}1", "{**".repeat(80)), "nested too deeply");
    let ok = format!("{}1{}", "(".repeat(60), ")".repeat(60));
    assert!(Condition::parse(&ok).is_ok());
    assert!(Condition::parse(&format!("{}1", "not ".repeat(60))).is_ok());
}

#[test]
fn spans_point_at_the_offender() {
    rejects_at("exit_code * 2", "operator '*'", "*");
    rejects_at("exit_code > 0 and open('x')", "name 'open'", "open");
    rejects_at("capture['a'] in capture", "'in'", "in");
    rejects_at("capture['a'] not in capture", "'not in'", "not in");
    rejects_at("len(capture[0])", "string literal", "0");
    rejects_at("1 + math.pi", "attribute access", "math.pi");
    rejects_at(
        "float(capture['x']) > 2.é",
        "invalid decimal literal",
        "2.é",
    );
    rejects_at("'é' + f'x'", "f-strings", "f'");
}

#[test]
fn accepted_forms() {
    for src in [
        "capture['k']",
        "capture[\"k\"]",
        "capture['k' 'ey']",
        "capture[('k')]",
        "float(capture['loss']) > 2.5",
        "int(capture['n']) // 2 == 3",
        "len(capture['s']) >= 3",
        "math.isnan(float(capture['loss']))",
        "math.isinf(float('inf'))",
        "exit_code != 0 and walltime_sec > 1.5",
        "'a' if exit_code else 'b'",
        "not capture['x']",
        "0 < exit_code <= 5",
        "peak_vram_mib > 0",
        "-exit_code + +1 - 2 / 3",
        "1e3 + .5 + 1.5e-3 + 0x10 + 0o7 + 0b1",
        "'\\n\\t\\\\\\'\\\"\\x41\\u00e9'",
        "(exit_code ==\n 0)",
        "exit_code == 0  # trailing comment\n",
        "\nexit_code == 0\n\n",
        "exit_code == \\\n 0",
        "True and False or None",
        "len(capture) > 0 and capture",
        "float == float",
        "(float)(capture['x'])",
        "1if exit_code else 2",
        "'''triple''' + \"\"\"quoted\"\"\"",
    ] {
        let c = Condition::parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"));
        assert_eq!(c.source(), src);
    }
}
