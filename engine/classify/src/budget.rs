//! Bounded time on hostile custom patterns (issue 36, docs/classify.md "Bounded time").
//!
//! fancy-regex's backtracking limit counts the steps of its own VM, not the work of the
//! linear-time engine it delegates look-arounds to: `(?=(a+)+$)x` runs a linear search at every
//! start position, so one search over a line of n bytes costs n² (a 64 KiB line took 5.6 s,
//! a 1 MiB line hours). Classification runs after the trial's timeout, so nothing stopped it.
//! Two bounds now hold for the recipe's patterns (Tier 5, in a trial and in `aorta classify`):
//!
//! * **Spans.** A pattern the linear-time `regex` crate rejects (look-around, back-references,
//!   atomic groups...) is never handed a whole 1 MiB window: it searches spans of at most
//!   [`BACKTRACKING_SPAN_BYTES`], cut at line ends where one keeps the span at least three
//!   quarters full, and each span starts half a span before the previous one ended, with the
//!   text before it visible to look-behinds and `^`. A match of at most half a span (look-arounds
//!   included) is never missed because of spans; `$` (without `(?m)`) also matches at a span's
//!   end. A linear pattern still searches whole windows: its cost is linear.
//! * **Time.** Each pattern's searches (and condition checks) are timed; a pattern that has spent
//!   [`PATTERN_TIME_BUDGET`] is retired, and once the recipe's patterns together have spent
//!   [`CUSTOM_TIME_BUDGET`] every pattern still searching is. The check runs between searches,
//!   so the overshoot is one search: one span, or one window of a linear pattern. A retired
//!   pattern is named in `capture.classifier_error` (`aorta classify`: `errors`) and, like a
//!   pattern whose condition budget ran out, does not fire.

use std::time::{Duration, Instant};

/// Regex (and condition) time one custom pattern may spend on one trial's logs.
pub const PATTERN_TIME_BUDGET: Duration = Duration::from_secs(4);

/// Regex (and condition) time the recipe's custom patterns may spend together on one trial.
pub const CUSTOM_TIME_BUDGET: Duration = Duration::from_secs(8);

/// The longest text one search of a backtracking pattern is handed.
pub const BACKTRACKING_SPAN_BYTES: usize = 8 << 10;

/// The limits one scan runs under. Tests use small ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub per_pattern: Duration,
    pub total: Duration,
    pub span: usize,
}

pub(crate) const DEFAULT_BUDGET: Budget = Budget {
    per_pattern: PATTERN_TIME_BUDGET,
    total: CUSTOM_TIME_BUDGET,
    span: BACKTRACKING_SPAN_BYTES,
};

/// Whether `pattern` needs fancy-regex's backtracking VM: the linear-time `regex` crate does
/// not take it (look-around, back-references, atomic groups, possessive repeats, or a syntax
/// only Python's dialect has). A false "yes" only costs the pattern the span rule.
pub(crate) fn backtracks(pattern: &str) -> bool {
    regex::Regex::new(pattern).is_err()
}

/// Which limit stopped a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    Pattern,
    Total,
}

/// Time spent by one scan's custom patterns, against a [`Budget`].
#[derive(Debug)]
pub(crate) struct Meter {
    pub budget: Budget,
    spent: Duration,
}

impl Meter {
    pub fn new(budget: Budget) -> Meter {
        Meter {
            budget,
            spent: Duration::ZERO,
        }
    }

    /// Whether a pattern that has spent `pattern` may search again.
    pub fn check(&self, pattern: Duration) -> Result<(), Cut> {
        if pattern >= self.budget.per_pattern {
            Err(Cut::Pattern)
        } else if self.spent >= self.budget.total {
            Err(Cut::Total)
        } else {
            Ok(())
        }
    }

    /// Adds the time since `start` to the pattern's and the scan's account.
    pub fn charge(&mut self, pattern: &mut Duration, start: Instant) {
        let d = start.elapsed();
        *pattern += d;
        self.spent += d;
    }

    /// The note that says a pattern was cut short, and why.
    pub fn note(&self, id: &str, cut: Cut, spent: Duration) -> String {
        match cut {
            Cut::Pattern => format!(
                "PatternTimeBudgetExceeded: {id}: {:.1} s of regex time (limit {:.1} s); pattern retired, the rest of the logs was not searched by it",
                spent.as_secs_f64(),
                self.budget.per_pattern.as_secs_f64()
            ),
            Cut::Total => format!(
                "CustomPatternsTimeBudgetExceeded: {id}: the custom patterns spent their {:.1} s together; pattern retired, the rest of the logs was not searched by it",
                self.budget.total.as_secs_f64()
            ),
        }
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

/// The end of the span that starts at `a` (a char boundary before `w.len()`): the whole rest
/// when it fits, else after the last newline within `span` bytes if that keeps three quarters
/// of a span, else `span` bytes on (at a char boundary, at least one character).
pub(crate) fn span_end(w: &str, a: usize, span: usize) -> usize {
    let span = span.max(4);
    if w.len() - a <= span {
        return w.len();
    }
    let limit = a + span;
    if let Some(i) = memchr::memrchr(b'\n', &w.as_bytes()[a..limit]) {
        if i + 1 >= span * 3 / 4 {
            return a + i + 1;
        }
    }
    let b = floor_boundary(w, limit);
    if b > a {
        b
    } else {
        ceil_boundary(w, a + 1)
    }
}

/// Where the span after `[a, b)` starts: half a span before `b`, at least one character after
/// `a`. Spans then advance by at least a quarter of a span, and any stretch of at most half a
/// span lies wholly inside one of them.
pub(crate) fn span_restart(w: &str, a: usize, b: usize, span: usize) -> usize {
    let back = floor_boundary(w, b.saturating_sub(span.max(4) / 2));
    back.max(ceil_boundary(w, a + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every span of `w` from 0, as `(start, end)`.
    fn spans(w: &str, span: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut a = 0;
        loop {
            let b = span_end(w, a, span);
            out.push((a, b));
            if b >= w.len() {
                return out;
            }
            a = span_restart(w, a, b, span);
        }
    }

    #[test]
    fn spans_cover_every_short_stretch_and_advance() {
        let texts = [
            "a".repeat(1000),
            "é".repeat(500),
            "line of text\n".repeat(100),
            format!("{}\n{}\nshort\n", "x".repeat(70), "y".repeat(300)),
        ];
        for w in &texts {
            for span in [16, 64, 100] {
                let s = spans(w, span);
                for &(a, b) in &s {
                    assert!(b - a <= span.max(4) + 3, "{a}..{b}");
                    assert!(w.is_char_boundary(a) && w.is_char_boundary(b));
                }
                // Progress: at most about 4 spans per span of text.
                assert!(s.len() <= 4 * w.len() / span + 2, "{} spans", s.len());
                // Any stretch of half a span (at char boundaries) lies inside one span.
                for x in (0..w.len()).filter(|&i| w.is_char_boundary(i)) {
                    let y = floor_boundary(w, x + span / 2);
                    assert!(
                        s.iter().any(|&(a, b)| a <= x && y <= b),
                        "{x}..{y} in no span of {span}"
                    );
                }
            }
        }
    }

    #[test]
    fn linear_patterns_are_told_from_backtracking_ones() {
        for linear in [r"loss=(?P<l>\d+)", r"(?m)^ERROR", r"(a+)+$", r"(?i)nan"] {
            assert!(!backtracks(linear), "{linear}");
        }
        for fancy in [r"(?=(a+)+$)x", r"(\w+) \1", r"(?<!best_)loss", r"(?>a+)b"] {
            assert!(backtracks(fancy), "{fancy}");
        }
    }
}
