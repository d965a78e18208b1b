//! Label syntax: `//pkg/path:target`, `//pkg/path` and `//pkg/...`.
//!
//! We accept the subset of Buck2's target-pattern grammar that makes sense for recipes:
//! absolute labels only (no cells, no `:relative` targets, no `//pkg:` wildcards), so a
//! label means the same thing whatever directory `aorta` was started from.

use std::fmt;
use std::str::FromStr;

use miette::{Diagnostic, SourceSpan};

/// The forms we accept, shown in every parse error so users can fix the label without docs.
pub(crate) const ACCEPTED_FORMS: &str = "accepted forms: //pkg:target, //pkg (target = last path component), //pkg/... (every recipe below pkg), or a path to a .yaml/.yml/.json recipe file";

/// A parsed absolute label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    /// Package path relative to the workspace root, `/`-separated; `""` is the root package.
    pub package: String,
    /// Target name; always `Some` unless `recursive`.
    pub target: Option<String>,
    /// `//pkg/...`: every target in `package` and the packages below it.
    pub recursive: bool,
}

impl Label {
    /// `//pkg:target` for a concrete target (no validation; used to build labels we resolved).
    pub(crate) fn target_label(package: &str, target: &str) -> String {
        format!("//{package}:{target}")
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.target, self.recursive) {
            (_, true) if self.package.is_empty() => write!(f, "//..."),
            (_, true) => write!(f, "//{}/...", self.package),
            (Some(t), false) => write!(f, "//{}:{}", self.package, t),
            (None, false) => write!(f, "//{}", self.package),
        }
    }
}

/// A label that does not follow the accepted syntax.
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
#[error("invalid label `{input}`: {reason}")]
#[diagnostic(code(aorta::labels::invalid_label))]
pub struct LabelError {
    /// The text that failed to parse.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
    #[source_code]
    src: String,
    #[label("here")]
    span: Option<SourceSpan>,
    #[help]
    help: String,
}

impl LabelError {
    fn new(input: &str, reason: impl Into<String>, span: Option<(usize, usize)>) -> Self {
        LabelError {
            input: input.to_owned(),
            reason: reason.into(),
            src: input.to_owned(),
            span: span.map(|(at, len)| SourceSpan::new(at.into(), len)),
            help: ACCEPTED_FORMS.to_owned(),
        }
    }

    fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = format!("{}; {ACCEPTED_FORMS}", help.into());
        self
    }
}

/// Buck's target-name alphabet (a conservative subset: no `/`, `:` or whitespace).
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.,=+~@-".contains(c)
}

/// Why a target name is not valid; `Display` is the reason shown in the label error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TargetNameError {
    #[error("empty target name")]
    Empty,
    #[error("invalid character {found:?} in target name `{name}` (allowed: letters, digits and _ . , = + ~ @ -)")]
    BadChar { found: char, name: String },
}

/// Checks a target name.
pub(crate) fn check_target_name(name: &str) -> Result<(), TargetNameError> {
    if name.is_empty() {
        return Err(TargetNameError::Empty);
    }
    if let Some(c) = name.chars().find(|c| !is_name_char(*c)) {
        return Err(TargetNameError::BadChar {
            found: c,
            name: name.to_owned(),
        });
    }
    Ok(())
}

impl FromStr for Label {
    type Err = LabelError;

    fn from_str(input: &str) -> Result<Label, LabelError> {
        parse(input)
    }
}

fn parse(input: &str) -> Result<Label, LabelError> {
    if input.is_empty() {
        return Err(LabelError::new(input, "empty label", None));
    }
    if input.starts_with(':') {
        return Err(
            LabelError::new(input, "relative labels are not supported", Some((0, 1)))
                .with_help("write the package too, e.g. //recipes:name"),
        );
    }
    if !input.starts_with("//") {
        if let Some(at) = input.find("//") {
            return Err(LabelError::new(
                input,
                "cell-qualified labels are not supported",
                Some((0, at)),
            )
            .with_help("drop the cell name: aorta only knows the root cell"));
        }
        return Err(LabelError::new(
            input,
            "labels start with `//`",
            Some((0, input.chars().next().map_or(0, char::len_utf8))),
        ));
    }
    let body = &input[2..];
    let (pkg, target) = match body.split_once(':') {
        Some((pkg, target)) => (pkg, Some(target)),
        None => (body, None),
    };
    let target_at = 2 + pkg.len() + 1;
    if let Some(t) = target {
        if let Some(extra) = t.find(':') {
            return Err(LabelError::new(
                input,
                "more than one `:`",
                Some((target_at + extra, 1)),
            ));
        }
    }

    let (pkg, recursive) = if pkg == "..." {
        ("", true)
    } else if let Some(p) = pkg.strip_suffix("/...") {
        (p, true)
    } else {
        (pkg, false)
    };
    check_package(input, pkg)?;

    if recursive {
        if target.is_some() {
            return Err(LabelError::new(
                input,
                "`...` cannot be combined with a `:target`",
                Some((target_at - 1, input.len() + 1 - target_at)),
            ));
        }
        return Ok(Label {
            package: pkg.to_owned(),
            target: None,
            recursive: true,
        });
    }

    let target = match target {
        Some("") => {
            return Err(LabelError::new(
                input,
                "empty target name after `:`",
                Some((target_at - 1, 1)),
            )
            .with_help("name a target (//pkg:name) or use //pkg/... for every recipe"));
        }
        Some(t) => {
            check_target_name(t).map_err(|reason| {
                LabelError::new(input, reason.to_string(), Some((target_at, t.len())))
            })?;
            t.to_owned()
        }
        // Buck convention: `//a/b` means `//a/b:b`.
        None => match pkg.rsplit('/').next() {
            Some(last) if !last.is_empty() => last.to_owned(),
            _ => {
                return Err(
                    LabelError::new(input, "`//` alone names no target", Some((0, 2))).with_help(
                        "use //:name for a target in the root package, or //... for everything",
                    ),
                );
            }
        },
    };
    Ok(Label {
        package: pkg.to_owned(),
        target: Some(target),
        recursive: false,
    })
}

/// Package paths: `/`-separated names from the target alphabet; no empty, `.`, `..` or `...` parts.
fn check_package(input: &str, pkg: &str) -> Result<(), LabelError> {
    if pkg.is_empty() {
        return Ok(());
    }
    let mut at = 2;
    for part in pkg.split('/') {
        let span = Some((at, part.len().max(1)));
        match part {
            "" => {
                return Err(LabelError::new(
                    input,
                    "empty package path component (`//` inside the path or a trailing `/`)",
                    span,
                ))
            }
            "." | ".." => {
                return Err(LabelError::new(
                    input,
                    format!("`{part}` is not allowed in a package path"),
                    span,
                )
                .with_help("labels are always relative to the workspace root"));
            }
            "..." => {
                return Err(LabelError::new(
                    input,
                    "`...` is only allowed at the end (//pkg/...)",
                    span,
                ))
            }
            _ => {
                if let Some((i, c)) = part.char_indices().find(|(_, c)| !is_name_char(*c)) {
                    return Err(LabelError::new(
                        input,
                        format!("invalid character {c:?} in package path"),
                        Some((at + i, c.len_utf8())),
                    ));
                }
            }
        }
        at += part.len() + 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Label {
        s.parse()
            .unwrap_or_else(|e| panic!("{s} should parse: {e}"))
    }

    #[test]
    fn accepts() {
        let table: &[(&str, &str, Option<&str>, bool, &str)] = &[
            (
                "//recipes:ticket-1234",
                "recipes",
                Some("ticket-1234"),
                false,
                "//recipes:ticket-1234",
            ),
            (
                "//recipes",
                "recipes",
                Some("recipes"),
                false,
                "//recipes:recipes",
            ),
            (
                "//recipes/sub",
                "recipes/sub",
                Some("sub"),
                false,
                "//recipes/sub:sub",
            ),
            ("//recipes/...", "recipes", None, true, "//recipes/..."),
            ("//...", "", None, true, "//..."),
            (
                "//:root_target",
                "",
                Some("root_target"),
                false,
                "//:root_target",
            ),
            (
                "//a/b-c/d_e:x.y,z=1+2~3@4",
                "a/b-c/d_e",
                Some("x.y,z=1+2~3@4"),
                false,
                "//a/b-c/d_e:x.y,z=1+2~3@4",
            ),
            (
                "//recipes:race_smoke",
                "recipes",
                Some("race_smoke"),
                false,
                "//recipes:race_smoke",
            ),
        ];
        for (input, pkg, target, rec, canon) in table {
            let l = ok(input);
            assert_eq!(l.package, *pkg, "{input}");
            assert_eq!(l.target.as_deref(), *target, "{input}");
            assert_eq!(l.recursive, *rec, "{input}");
            assert_eq!(l.to_string(), *canon, "{input}");
            assert_eq!(ok(canon), l, "canonical form of {input} must round-trip");
        }
    }

    #[test]
    fn rejects() {
        let table: &[(&str, &str)] = &[
            ("", "empty label"),
            ("recipes:x", "start with `//`"),
            (":x", "relative labels"),
            ("cell//recipes:x", "cell-qualified"),
            ("//recipes:", "empty target"),
            ("//recipes:a:b", "more than one"),
            ("//recipes/../etc:x", "`..` is not allowed"),
            ("//./recipes:x", "`.` is not allowed"),
            ("//recipes//sub:x", "empty package path component"),
            ("//recipes/:x", "empty package path component"),
            ("///recipes:x", "empty package path component"),
            ("//recipes:a b", "invalid character"),
            ("//recipes:a/b", "invalid character"),
            ("//rec ipes:x", "invalid character"),
            ("//recipes/...:x", "cannot be combined"),
            ("//recipes/.../sub", "only allowed at the end"),
            ("//", "names no target"),
            ("//recipes:x$", "invalid character"),
        ];
        for (input, needle) in table {
            let err = input.parse::<Label>().expect_err(input);
            assert!(
                err.to_string().contains(needle),
                "{input}: `{err}` should mention `{needle}`"
            );
            assert!(
                err.help.contains("//pkg:target"),
                "{input}: help shows accepted forms"
            );
        }
    }

    #[test]
    fn error_span_points_at_offending_part() {
        let err = "//recipes:a b".parse::<Label>().unwrap_err();
        assert_eq!(err.span, Some(SourceSpan::new(10.into(), 3)));
        let err = "//recipes/../x:y".parse::<Label>().unwrap_err();
        assert_eq!(err.span, Some(SourceSpan::new(10.into(), 2)));
    }
}
