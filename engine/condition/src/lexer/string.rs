//! String literals: single- and triple-quoted, with Python escapes.

use super::{syntax, Lexer};
use crate::ConditionError;

impl Lexer<'_> {
    /// A single- or triple-quoted string; returns its decoded value.
    pub(super) fn string(&mut self, quote: char) -> Result<String, ConditionError> {
        let start = self.pos;
        let triple = self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote);
        self.pos += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(syntax("unterminated string literal", start..self.pos));
            };
            self.pos += c.len_utf8();
            match c {
                c if c == quote => {
                    if !triple {
                        return Ok(out);
                    }
                    if self.peek() == Some(quote) && self.peek_at(1) == Some(quote) {
                        self.pos += 2;
                        return Ok(out);
                    }
                    out.push(c);
                }
                '\n' | '\r' if !triple => {
                    return Err(syntax("unterminated string literal", start..self.pos - 1));
                }
                '\r' => {
                    // Python reads source with universal newlines.
                    if self.peek() == Some('\n') {
                        self.pos += 1;
                    }
                    out.push('\n');
                }
                '\\' => self.escape(&mut out, start)?,
                c => out.push(c),
            }
        }
    }

    /// Decodes the escape after a backslash (already consumed).
    fn escape(&mut self, out: &mut String, start: usize) -> Result<(), ConditionError> {
        let esc_start = self.pos - 1;
        let Some(e) = self.peek() else {
            return Err(syntax("unterminated string literal", start..self.pos));
        };
        self.pos += e.len_utf8();
        let simple = match e {
            '\n' => Some(None),
            '\r' => {
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
                Some(None)
            }
            '\\' | '\'' | '"' => Some(Some(e)),
            'a' => Some(Some('\x07')),
            'b' => Some(Some('\x08')),
            'f' => Some(Some('\x0c')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\x0b')),
            _ => None,
        };
        if let Some(c) = simple {
            out.extend(c);
            return Ok(());
        }
        let code = match e {
            '0'..='7' => {
                let mut v = e as u32 - '0' as u32;
                for _ in 0..2 {
                    match self.byte(self.pos).filter(|b| (b'0'..=b'7').contains(b)) {
                        Some(b) => {
                            v = v * 8 + u32::from(b - b'0');
                            self.pos += 1;
                        }
                        None => break,
                    }
                }
                v
            }
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex = self.src.get(self.pos..self.pos + n).unwrap_or("");
                if hex.len() != n || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(syntax(
                        format!("truncated \\{e} escape (expected {n} hex digits)"),
                        esc_start..self.pos,
                    ));
                }
                self.pos += n;
                u32::from_str_radix(hex, 16).unwrap_or(u32::MAX)
            }
            'N' => {
                return Err(syntax(
                    "\\N{...} escapes are not supported; use \\u or \\x escapes",
                    esc_start..self.pos,
                ))
            }
            other => {
                // Python keeps unknown escapes verbatim (with a warning).
                out.push('\\');
                out.push(other);
                return Ok(());
            }
        };
        match char::from_u32(code) {
            Some(c) => {
                out.push(c);
                Ok(())
            }
            None => Err(syntax(
                format!("escape \\{e} does not denote a Unicode scalar value (U+{code:X})"),
                esc_start..self.pos,
            )),
        }
    }
}
