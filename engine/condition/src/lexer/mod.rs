//! Tokeniser for the Python expression subset.
//!
//! It follows Python's tokenizer closely enough that anything Python would
//! tokenise differently is either a syntax error here too or gets rejected
//! later: numbers (with underscores, `0x`/`0o`/`0b`, floats, imaginary),
//! quoted strings with Python escapes, implicit line joining inside
//! brackets, backslash continuations and comments. String prefixes (f, b,
//! r, u...) are refused here because the allow-list only admits plain
//! string literals.
//!
//! Deliberate differences from CPython, all at load time: indentation is
//! not significant (a condition is one expression, and leading whitespace is
//! harmless), `\N{...}` escapes and lone-surrogate escapes (`\ud800`) are
//! rejected because a Rust string cannot hold the latter and the former
//! needs the Unicode name table.

use crate::ConditionError;
use std::ops::Range;

mod string;

/// One lexical token kind. Keywords are kept as [`Tok::Name`]; the parser
/// decides what they mean in context.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Name(String),
    /// Integer literal; `None` when it does not even fit in a `u128`.
    Int(Option<u128>),
    Float(f64),
    Imaginary,
    Str(String),
    Op(&'static str),
    /// A line break outside any bracket (Python's NEWLINE).
    Newline,
    Eof,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Range<usize>,
}

/// Python's hard keywords: never usable as names.
pub(crate) const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Keywords Python tolerates glued to a number (`1if x else 2`).
const AFTER_NUMBER: &[&str] = &["and", "else", "for", "if", "in", "is", "not", "or"];

/// Punctuators, longest first so that greedy matching is correct.
const PUNCT: &[&str] = &[
    "**=", "//=", ">>=", "<<=", "...", "->", ":=", "**", "//", "<<", ">>", "<=", ">=", "==", "!=",
    "+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "@", "&", "|",
    "^", "~", "<", ">", "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "=",
];

pub(crate) fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn syntax(message: impl std::fmt::Display, span: Range<usize>) -> ConditionError {
    ConditionError::new(format!("syntax error: {message}"), span)
}

/// Splits `src` into tokens, always ending with [`Tok::Eof`].
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, ConditionError> {
    let mut lx = Lexer {
        src,
        pos: 0,
        depth: 0,
        out: Vec::new(),
    };
    lx.run()?;
    lx.out.push(Token {
        tok: Tok::Eof,
        span: src.len()..src.len(),
    });
    Ok(lx.out)
}

struct Lexer<'s> {
    src: &'s str,
    pos: usize,
    /// Bracket nesting; line breaks inside brackets are insignificant.
    depth: usize,
    out: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.src.get(self.pos + offset..)?.chars().next()
    }

    fn byte(&self, at: usize) -> Option<u8> {
        self.src.as_bytes().get(at).copied()
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.out.push(Token {
            tok,
            span: start..self.pos,
        });
    }

    fn run(&mut self) -> Result<(), ConditionError> {
        while let Some(c) = self.peek() {
            let start = self.pos;
            match c {
                ' ' | '\t' | '\x0c' => self.pos += 1,
                '\n' | '\r' => {
                    self.pos += 1;
                    let last_is_newline =
                        matches!(self.out.last(), Some(t) if t.tok == Tok::Newline);
                    if self.depth == 0 && !last_is_newline {
                        self.push(Tok::Newline, start);
                    }
                }
                '#' => {
                    let rest = &self.src[self.pos..];
                    self.pos += rest.find(['\n', '\r']).unwrap_or(rest.len());
                }
                '\\' => self.continuation()?,
                '\'' | '"' => {
                    let s = self.string(c)?;
                    self.push(Tok::Str(s), start);
                }
                '0'..='9' => self.number()?,
                '.' if self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) => self.number()?,
                c if is_ident_start(c) => self.name()?,
                _ => self.punct(c)?,
            }
        }
        Ok(())
    }

    /// Backslash-newline joins lines, as in Python source.
    fn continuation(&mut self) -> Result<(), ConditionError> {
        let start = self.pos;
        self.pos += 1;
        match self.peek() {
            Some('\n') => self.pos += 1,
            Some('\r') => {
                self.pos += 1;
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
            }
            None => {
                return Err(syntax(
                    "unexpected end of condition after '\\'",
                    start..self.pos,
                ))
            }
            Some(_) => {
                return Err(syntax(
                    "unexpected character after line continuation character",
                    start..self.pos,
                ))
            }
        }
        // Python refuses a continuation with nothing to continue onto.
        if self.src[self.pos..].trim().is_empty() {
            return Err(syntax(
                "unexpected end of condition after '\\'",
                start..self.pos,
            ));
        }
        Ok(())
    }

    fn name(&mut self) -> Result<(), ConditionError> {
        let start = self.pos;
        let rest = &self.src[start..];
        let len = rest
            .char_indices()
            .find(|&(_, c)| !is_ident_continue(c))
            .map_or(rest.len(), |(i, _)| i);
        self.pos += len;
        let ident = &self.src[start..self.pos];
        if matches!(self.peek(), Some('\'' | '"')) {
            let prefix = ident.to_ascii_lowercase();
            let kind = match prefix.as_str() {
                "f" | "fr" | "rf" => Some("f-strings are not allowed"),
                "b" | "br" | "rb" => Some("bytes literals are not allowed"),
                "r" | "u" | "t" | "tr" | "rt" => Some("prefixed string literals are not allowed"),
                _ => None,
            };
            if let Some(kind) = kind {
                return Err(ConditionError::new(
                    format!(
                        "{kind} (string prefix '{ident}'); use a plain '...' or \"...\" literal"
                    ),
                    start..self.pos + 1,
                ));
            }
        }
        let tok = Tok::Name(ident.to_owned());
        self.push(tok, start);
        Ok(())
    }

    fn punct(&mut self, c: char) -> Result<(), ConditionError> {
        let start = self.pos;
        let rest = &self.src[start..];
        let Some(op) = PUNCT.iter().find(|p| rest.starts_with(**p)) else {
            let what = if c == '\0' {
                "null character".to_owned()
            } else {
                format!("character '{}' (U+{:04X})", c.escape_debug(), c as u32)
            };
            return Err(syntax(
                format!("invalid {what}"),
                start..start + c.len_utf8(),
            ));
        };
        self.pos += op.len();
        match *op {
            "(" | "[" | "{" => self.depth += 1,
            ")" | "]" | "}" => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        self.push(Tok::Op(op), start);
        Ok(())
    }

    /// Consumes `digit (['_'] digit)*` in `radix`; returns the digits without
    /// underscores. An underscore not followed by a digit is an error.
    fn digits(&mut self, radix: u32, kind: &str, start: usize) -> Result<String, ConditionError> {
        let mut out = String::new();
        loop {
            let mut at = self.pos;
            let underscore = self.byte(at) == Some(b'_');
            if underscore {
                at += 1;
            }
            match self.byte(at).filter(|b| (*b as char).is_digit(radix)) {
                Some(b) => {
                    out.push(b as char);
                    self.pos = at + 1;
                }
                None if underscore => {
                    return Err(syntax(format!("invalid {kind} literal"), start..at));
                }
                None => return Ok(out),
            }
        }
    }

    fn number(&mut self) -> Result<(), ConditionError> {
        let start = self.pos;
        let radix = match (
            self.byte(start),
            self.byte(start + 1).map(|b| b.to_ascii_lowercase()),
        ) {
            (Some(b'0'), Some(b'x')) => Some((16, "hexadecimal")),
            (Some(b'0'), Some(b'o')) => Some((8, "octal")),
            (Some(b'0'), Some(b'b')) => Some((2, "binary")),
            _ => None,
        };
        if let Some((radix, kind)) = radix {
            self.pos += 2;
            // Python allows one underscore right after the base prefix.
            let digits = self.digits(radix, kind, start)?;
            if digits.is_empty() {
                return Err(syntax(format!("invalid {kind} literal"), start..self.pos));
            }
            let value = u128::from_str_radix(&digits, radix).ok();
            self.end_of_number(kind, start)?;
            self.push(Tok::Int(value), start);
            return Ok(());
        }
        let int_part = self.digits(10, "decimal", start)?;
        let mut text = int_part.clone();
        let mut is_float = false;
        if self.byte(self.pos) == Some(b'.') {
            self.pos += 1;
            is_float = true;
            text.push('.');
            text.push_str(&self.digits(10, "decimal", start)?);
        }
        if matches!(self.byte(self.pos), Some(b'e' | b'E')) {
            let mut at = self.pos + 1;
            let sign = self.byte(at).filter(|b| matches!(b, b'+' | b'-'));
            if sign.is_some() {
                at += 1;
            }
            if self.byte(at).is_some_and(|b| b.is_ascii_digit()) {
                text.push('e');
                if let Some(s) = sign {
                    text.push(s as char);
                }
                self.pos = at;
                text.push_str(&self.digits(10, "decimal", start)?);
                is_float = true;
            }
        }
        if matches!(self.byte(self.pos), Some(b'j' | b'J')) {
            self.pos += 1;
            self.end_of_number("imaginary", start)?;
            self.push(Tok::Imaginary, start);
            return Ok(());
        }
        self.end_of_number("decimal", start)?;
        if is_float {
            let value = text
                .parse::<f64>()
                .map_err(|_| syntax("invalid decimal literal", start..self.pos))?;
            self.push(Tok::Float(value), start);
        } else {
            if int_part.starts_with('0') && int_part.bytes().any(|b| b != b'0') {
                return Err(syntax(
                    "leading zeros in decimal integer literals are not permitted; \
                     use an 0o prefix for octal integers",
                    start..self.pos,
                ));
            }
            self.push(Tok::Int(int_part.parse::<u128>().ok()), start);
        }
        Ok(())
    }

    /// A number may not run into a name (`1abc`), except for the keywords
    /// Python tolerates there (`1if x else 2`).
    fn end_of_number(&self, kind: &str, start: usize) -> Result<(), ConditionError> {
        let rest = &self.src[self.pos..];
        if !rest.starts_with(is_ident_continue) {
            return Ok(());
        }
        let len = rest
            .char_indices()
            .find(|&(_, c)| !is_ident_continue(c))
            .map_or(rest.len(), |(i, _)| i);
        if AFTER_NUMBER.contains(&&rest[..len]) {
            return Ok(());
        }
        Err(syntax(
            format!("invalid {kind} literal"),
            start..self.pos + len,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        tokenize(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(toks("1_000")[0], Tok::Int(Some(1000)));
        assert_eq!(toks("0x_ff")[0], Tok::Int(Some(255)));
        assert_eq!(toks("1e3")[0], Tok::Float(1000.0));
        assert_eq!(toks(".5")[0], Tok::Float(0.5));
        assert_eq!(toks("1.")[0], Tok::Float(1.0));
        assert_eq!(toks("007.5")[0], Tok::Float(7.5));
        assert_eq!(toks("00")[0], Tok::Int(Some(0)));
        assert_eq!(toks("2j")[0], Tok::Imaginary);
        assert_eq!(toks("1if")[1], Tok::Name("if".into()));
        for bad in ["007", "1__0", "1_", "1abc", "0x", "0b12", "1.real", "1e"] {
            assert!(tokenize(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strings() {
        assert_eq!(
            toks(r"'a\n\t\\\'\x41\u00e9'")[0],
            Tok::Str("a\n\t\\'A\u{e9}".into())
        );
        assert_eq!(toks(r#""q\"\d""#)[0], Tok::Str("q\"\\d".into()));
        assert_eq!(toks("'''a\nb'''")[0], Tok::Str("a\nb".into()));
        assert_eq!(toks(r"'\101'")[0], Tok::Str("A".into()));
        for bad in [
            "'abc",
            "'a\nb'",
            r"'\x4'",
            r"'\ud800'",
            r"'\N{DASH}'",
            "f'x'",
            "b'x'",
            "r'x'",
        ] {
            assert!(tokenize(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn newlines_inside_brackets_are_ignored() {
        assert_eq!(toks("(1\n)").len(), 4);
        assert_eq!(toks("1\n").get(1), Some(&Tok::Newline));
        assert_eq!(toks("1 + \\\n 2").len(), 4);
        assert_eq!(toks("1 # comment").len(), 2);
    }
}
