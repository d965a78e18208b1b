//! Primaries and atoms: calls, subscripts, attributes, literals and
//! bracketed displays (parsed fully so syntax errors win, then rejected
//! by the allow-list).

use super::{node, Arg, Kind, Node, Parser};
use crate::lexer::{is_keyword, Tok};
use crate::ConditionError;

impl Parser<'_> {
    pub(super) fn primary(&mut self) -> Result<Node, ConditionError> {
        let mut n = self.atom()?;
        loop {
            let start = n.span.start;
            if self.eat_op(".") {
                let attr = match &self.peek().tok {
                    Tok::Name(a) if !is_keyword(a) => a.clone(),
                    _ => return Err(self.unexpected("an attribute name")),
                };
                self.bump();
                n = node(
                    Kind::Attribute {
                        value: Box::new(n),
                        attr,
                    },
                    start..self.last_end,
                );
            } else if self.at_op("(") {
                self.bump();
                let args = self.call_args()?;
                n = node(
                    Kind::Call {
                        func: Box::new(n),
                        args,
                    },
                    start..self.last_end,
                );
            } else if self.at_op("[") {
                self.bump();
                let index = self.subscript()?;
                n = node(
                    Kind::Subscript {
                        value: Box::new(n),
                        index: Box::new(index),
                    },
                    start..self.last_end,
                );
            } else {
                return Ok(n);
            }
        }
    }

    /// Arguments after `(`, through the closing `)`.
    fn call_args(&mut self) -> Result<Vec<Arg>, ConditionError> {
        let mut args = Vec::new();
        while !self.at_op(")") {
            let start = self.peek().span.start;
            let arg = if self.at_op("*") || self.at_op("**") {
                self.bump();
                self.expr()?;
                Arg::Unpack(start..self.last_end)
            } else if matches!(&self.peek().tok, Tok::Name(n) if !is_keyword(n))
                && *self.peek2() == Tok::Op("=")
            {
                self.bump();
                self.bump();
                self.expr()?;
                Arg::Keyword(start..self.last_end)
            } else {
                Arg::Positional(self.expr()?)
            };
            args.push(arg);
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")", "',' or ')'")?;
        Ok(args)
    }

    /// Subscript contents after `[`, through the closing `]`.
    fn subscript(&mut self) -> Result<Node, ConditionError> {
        let start = self.peek().span.start;
        let first = self.slice_item()?;
        let index = if self.at_op(",") {
            while self.eat_op(",") && !self.at_op("]") {
                self.slice_item()?;
            }
            node(Kind::Display("tuple"), start..self.last_end)
        } else {
            first
        };
        self.expect_op("]", "']'")?;
        Ok(index)
    }

    fn slice_item(&mut self) -> Result<Node, ConditionError> {
        let start = self.peek().span.start;
        if !self.at_op(":") {
            let e = self.element()?;
            if !self.at_op(":") {
                return Ok(e);
            }
        }
        self.bump();
        if self.starts_expr() {
            self.expr()?;
        }
        if self.eat_op(":") && self.starts_expr() {
            self.expr()?;
        }
        Ok(node(Kind::Slice, start..self.last_end))
    }

    fn atom(&mut self) -> Result<Node, ConditionError> {
        let t = self.peek().clone();
        let kind = match t.tok {
            Tok::Name(n) => match n.as_str() {
                "True" => Kind::Bool(true),
                "False" => Kind::Bool(false),
                "None" => Kind::None,
                "lambda" | "await" | "yield" => return self.expr(),
                kw if is_keyword(kw) => return Err(self.unexpected("an expression")),
                _ => Kind::Name(n),
            },
            Tok::Int(v) => Kind::Int(v),
            Tok::Float(f) => Kind::Float(f),
            Tok::Imaginary => Kind::Imaginary,
            Tok::Str(_) => return Ok(self.strings()),
            // Brackets nest through `expr`, which counts the depth.
            Tok::Op("(") => return self.paren(),
            Tok::Op("[") => return self.list(),
            Tok::Op("{") => return self.brace(),
            Tok::Op("...") => Kind::Ellipsis,
            Tok::Op("*") => return self.element(),
            _ => return Err(self.unexpected("an expression")),
        };
        self.bump();
        Ok(node(kind, t.span))
    }

    /// Adjacent string literals concatenate, as in Python.
    fn strings(&mut self) -> Node {
        let start = self.peek().span.start;
        let mut s = String::new();
        while let Tok::Str(part) = &self.peek().tok {
            s.push_str(part);
            self.bump();
        }
        node(Kind::Str(s), start..self.last_end)
    }

    /// `( ... )`: a parenthesised expression or a tuple.
    fn paren(&mut self) -> Result<Node, ConditionError> {
        let start = self.bump().span.start;
        if self.eat_op(")") {
            return Ok(node(Kind::Display("tuple"), start..self.last_end));
        }
        let first = self.element()?;
        if !self.at_op(",") {
            self.expect_op(")", "')'")?;
            return Ok(first);
        }
        while self.eat_op(",") && !self.at_op(")") {
            self.element()?;
        }
        self.expect_op(")", "',' or ')'")?;
        Ok(node(Kind::Display("tuple"), start..self.last_end))
    }

    fn list(&mut self) -> Result<Node, ConditionError> {
        let start = self.bump().span.start;
        while !self.at_op("]") {
            self.element()?;
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op("]", "',' or ']'")?;
        Ok(node(Kind::Display("list"), start..self.last_end))
    }

    /// `{ ... }`: a dict or set display.
    fn brace(&mut self) -> Result<Node, ConditionError> {
        let start = self.bump().span.start;
        let mut kind = "dict";
        let mut first = true;
        while !self.at_op("}") {
            if self.eat_op("**") {
                // `{**{**...` recurses without passing through `expr`.
                self.nested(|p| p.binary(0))?;
            } else {
                self.element()?;
                if first && !self.at_op(":") {
                    kind = "set";
                }
                if kind == "dict" {
                    self.expect_op(":", "':'")?;
                    self.expr()?;
                }
            }
            first = false;
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op("}", "',' or '}'")?;
        Ok(node(Kind::Display(kind), start..self.last_end))
    }
}
