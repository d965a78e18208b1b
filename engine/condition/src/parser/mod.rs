//! Recursive-descent parser for Python's expression grammar.
//!
//! It deliberately parses *more* than the allow-list admits (bit operators,
//! `**`, attributes, slices, keyword arguments, container displays...) so
//! that, as in AORTA, a condition is first checked for syntax and only then
//! for allowed constructs, and so that the rejection names the exact
//! construct. A few constructs with no useful structure to keep (lambda,
//! comprehensions, starred expressions, walrus, yield/await) are rejected as
//! soon as they are seen.
//!
//! Precedence, loosest first, as in Python: `x if c else y` < `or` < `and` <
//! `not` < comparisons < `|` < `^` < `&` < shifts < `+ -` < `* / // % @` <
//! unary `+ - ~` < `**` < primary (call, subscript, attribute) < atom.

use crate::lexer::{is_keyword, Tok, Token};
use crate::{ConditionError, MAX_DEPTH};
use std::ops::Range;

mod primary;

pub(crate) type Span = Range<usize>;

/// A parsed (not yet validated) expression node.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub kind: Kind,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Int(Option<u128>),
    Float(f64),
    Imaginary,
    Str(String),
    Bool(bool),
    None,
    Ellipsis,
    Name(String),
    Attribute {
        value: Box<Node>,
        attr: String,
    },
    Subscript {
        value: Box<Node>,
        index: Box<Node>,
    },
    /// `a:b:c` inside a subscript.
    Slice,
    Call {
        func: Box<Node>,
        args: Vec<Arg>,
    },
    /// `+`, `-` or `~` applied to an operand.
    Unary {
        op: &'static str,
        operand: Box<Node>,
    },
    Not(Box<Node>),
    Binary {
        op: &'static str,
        op_span: Span,
        left: Box<Node>,
        right: Box<Node>,
    },
    /// `and` (`is_and`) or `or` over two or more operands.
    BoolOp {
        is_and: bool,
        values: Vec<Node>,
    },
    /// `left op1 x1 op2 x2 ...`; ops are spelled as in Python (`not in`).
    Compare {
        left: Box<Node>,
        rest: Vec<(&'static str, Span, Node)>,
    },
    IfExp {
        body: Box<Node>,
        test: Box<Node>,
        orelse: Box<Node>,
    },
    /// A container display: "list", "tuple", "dict" or "set".
    Display(&'static str),
}

#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Positional(Node),
    Keyword(Span),
    Unpack(Span),
}

/// Binary operator levels, loosest first.
const LEVELS: [&[&str]; 6] = [
    &["|"],
    &["^"],
    &["&"],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "//", "%", "@"],
];

const COMPARE_OPS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];

/// Parses the whole token stream as one expression (a bare `a, b` is a tuple).
pub(crate) fn parse(src: &str, toks: &[Token]) -> Result<Node, ConditionError> {
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        depth: 0,
        last_end: 0,
    };
    p.skip_newlines();
    let node = p.expr_list()?;
    if p.peek().tok == Tok::Newline {
        p.skip_newlines();
        if p.peek().tok != Tok::Eof {
            return Err(err(
                "syntax error: a condition must be a single expression; \
                 wrap it in parentheses to continue it on the next line",
                p.peek().span.clone(),
            ));
        }
    }
    if p.peek().tok != Tok::Eof {
        return Err(p.unexpected("the end of the condition"));
    }
    Ok(node)
}

fn err(message: impl Into<String>, span: Span) -> ConditionError {
    ConditionError::new(message, span)
}

fn node(kind: Kind, span: Span) -> Node {
    Node { kind, span }
}

struct Parser<'a> {
    src: &'a str,
    toks: &'a [Token],
    pos: usize,
    depth: usize,
    /// End offset of the last consumed token.
    last_end: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek2(&self) -> &Tok {
        &self.toks[(self.pos + 1).min(self.toks.len() - 1)].tok
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.tok != Tok::Eof {
            self.pos += 1;
            self.last_end = t.span.end;
        }
        t
    }

    fn at_op(&self, op: &str) -> bool {
        matches!(self.peek().tok, Tok::Op(o) if o == op)
    }

    fn at_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().tok, Tok::Name(n) if n == kw)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        let hit = self.at_op(op);
        if hit {
            self.bump();
        }
        hit
    }

    fn expect_op(&mut self, op: &str, expected: &str) -> Result<Span, ConditionError> {
        if self.at_op(op) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn skip_newlines(&mut self) {
        while self.peek().tok == Tok::Newline {
            self.bump();
        }
    }

    /// Runs `f` one nesting level deeper, refusing to go past [`MAX_DEPTH`].
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ConditionError>,
    ) -> Result<T, ConditionError> {
        if self.depth >= MAX_DEPTH {
            return Err(err(
                format!("condition is nested too deeply (more than {MAX_DEPTH} levels)"),
                self.peek().span.clone(),
            ));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// The error for an unexpected current token, with special wording for
    /// the constructs users are most likely to try.
    fn unexpected(&self, expected: &str) -> ConditionError {
        let t = self.peek();
        let span = t.span.clone();
        let text: String = self.src[span.clone()].chars().take(24).collect();
        let message = match &t.tok {
            Tok::Op(":=") => "assignment expressions (:=) are not allowed".to_owned(),
            Tok::Op("=") => {
                "syntax error: '=' is not allowed here (use '==' to compare)".to_owned()
            }
            Tok::Op(o) if o.len() >= 2 && o.ends_with('=') && !COMPARE_OPS.contains(o) => {
                format!("syntax error: assignment ('{o}') is not allowed")
            }
            Tok::Op(o @ (")" | "]" | "}")) if expected == "the end of the condition" => {
                format!("syntax error: unmatched '{o}'")
            }
            Tok::Eof => format!("syntax error: unexpected end of condition (expected {expected})"),
            Tok::Newline => format!(
                "syntax error: unexpected line break (expected {expected}); \
                 wrap the expression in parentheses to continue it on the next line"
            ),
            Tok::Name(n) if n == "for" => {
                "comprehensions and generator expressions are not allowed".to_owned()
            }
            Tok::Name(n) if is_keyword(n) => {
                format!("syntax error: unexpected keyword '{n}' (expected {expected})")
            }
            _ => format!("syntax error: unexpected '{text}' (expected {expected})"),
        };
        err(message, span)
    }

    /// Whether the current token can begin an expression.
    fn starts_expr(&self) -> bool {
        match &self.peek().tok {
            Tok::Name(n) => {
                !is_keyword(n)
                    || matches!(
                        n.as_str(),
                        "True" | "False" | "None" | "not" | "lambda" | "await"
                    )
            }
            Tok::Int(_) | Tok::Float(_) | Tok::Imaginary | Tok::Str(_) => true,
            Tok::Op(o) => matches!(*o, "(" | "[" | "{" | "-" | "+" | "~" | "..." | "*"),
            Tok::Newline | Tok::Eof => false,
        }
    }

    /// `expression (',' expression)* [',']`: more than one is a tuple.
    fn expr_list(&mut self) -> Result<Node, ConditionError> {
        let first = self.element()?;
        if !self.at_op(",") {
            return Ok(first);
        }
        let start = first.span.start;
        while self.eat_op(",") && self.starts_expr() {
            self.element()?;
        }
        Ok(node(Kind::Display("tuple"), start..self.last_end))
    }

    /// An expression where Python would also accept `*x`.
    fn element(&mut self) -> Result<Node, ConditionError> {
        if self.at_op("*") {
            return Err(err(
                "starred expressions (*x) are not allowed",
                self.peek().span.clone(),
            ));
        }
        self.expr()
    }

    /// `disjunction ['if' disjunction 'else' expression]`, or a lambda.
    fn expr(&mut self) -> Result<Node, ConditionError> {
        self.nested(|p| {
            for (kw, what) in [
                ("lambda", "lambda expressions are not allowed"),
                ("yield", "'yield' is not allowed"),
                ("await", "'await' is not allowed"),
            ] {
                if p.at_kw(kw) {
                    return Err(err(what, p.peek().span.clone()));
                }
            }
            let body = p.disjunction()?;
            if !p.at_kw("if") {
                return Ok(body);
            }
            p.bump();
            let test = p.disjunction()?;
            if !p.at_kw("else") {
                return Err(p.unexpected("'else'"));
            }
            p.bump();
            let orelse = p.expr()?;
            let span = body.span.start..orelse.span.end;
            Ok(node(
                Kind::IfExp {
                    body: Box::new(body),
                    test: Box::new(test),
                    orelse: Box::new(orelse),
                },
                span,
            ))
        })
    }

    fn disjunction(&mut self) -> Result<Node, ConditionError> {
        self.bool_op(false)
    }

    fn bool_op(&mut self, is_and: bool) -> Result<Node, ConditionError> {
        let operand = |p: &mut Self| {
            if is_and {
                p.inversion()
            } else {
                p.bool_op(true)
            }
        };
        let first = operand(self)?;
        let kw = if is_and { "and" } else { "or" };
        if !self.at_kw(kw) {
            return Ok(first);
        }
        let start = first.span.start;
        let mut values = vec![first];
        while self.at_kw(kw) {
            self.bump();
            values.push(operand(self)?);
        }
        Ok(node(Kind::BoolOp { is_and, values }, start..self.last_end))
    }

    fn inversion(&mut self) -> Result<Node, ConditionError> {
        if !self.at_kw("not") {
            return self.comparison();
        }
        let start = self.bump().span.start;
        let operand = self.nested(|p| p.inversion())?;
        let span = start..operand.span.end;
        Ok(node(Kind::Not(Box::new(operand)), span))
    }

    fn comparison(&mut self) -> Result<Node, ConditionError> {
        let left = self.binary(0)?;
        let mut rest = Vec::new();
        loop {
            let t = self.peek().clone();
            let op: &'static str = match &t.tok {
                Tok::Op(o) if COMPARE_OPS.contains(o) => o,
                Tok::Name(n) if n == "in" => "in",
                Tok::Name(n) if n == "not" && matches!(self.peek2(), Tok::Name(m) if m == "in") => {
                    self.bump();
                    "not in"
                }
                Tok::Name(n) if n == "is" => {
                    if matches!(self.peek2(), Tok::Name(m) if m == "not") {
                        self.bump();
                        "is not"
                    } else {
                        "is"
                    }
                }
                _ => break,
            };
            self.bump();
            let op_span = t.span.start..self.last_end;
            rest.push((op, op_span, self.binary(0)?));
        }
        if rest.is_empty() {
            return Ok(left);
        }
        let span = left.span.start..self.last_end;
        Ok(node(
            Kind::Compare {
                left: Box::new(left),
                rest,
            },
            span,
        ))
    }

    /// Left-associative binary operators of `LEVELS[level]` and tighter.
    fn binary(&mut self, level: usize) -> Result<Node, ConditionError> {
        let Some(ops) = LEVELS.get(level) else {
            return self.factor();
        };
        let mut left = self.binary(level + 1)?;
        while let Tok::Op(op) = self.peek().tok {
            if !ops.contains(&op) {
                break;
            }
            let op_span = self.bump().span;
            let right = self.binary(level + 1)?;
            let span = left.span.start..right.span.end;
            left = node(
                Kind::Binary {
                    op,
                    op_span,
                    left: Box::new(left),
                    right: Box::new(right),
                },
                span,
            );
        }
        Ok(left)
    }

    /// Unary `+ - ~`.
    fn factor(&mut self) -> Result<Node, ConditionError> {
        let op = match self.peek().tok {
            Tok::Op(op @ ("+" | "-" | "~")) => op,
            _ => return self.power(),
        };
        let start = self.bump().span.start;
        let operand = self.nested(|p| p.factor())?;
        let span = start..operand.span.end;
        Ok(node(
            Kind::Unary {
                op,
                operand: Box::new(operand),
            },
            span,
        ))
    }

    /// `primary ['**' factor]` (right-associative through `factor`).
    fn power(&mut self) -> Result<Node, ConditionError> {
        let base = self.primary()?;
        if !self.at_op("**") {
            return Ok(base);
        }
        let op_span = self.bump().span;
        let exp = self.nested(|p| p.factor())?;
        let span = base.span.start..exp.span.end;
        Ok(node(
            Kind::Binary {
                op: "**",
                op_span,
                left: Box::new(base),
                right: Box::new(exp),
            },
            span,
        ))
    }
}
