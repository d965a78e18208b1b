//! Attribute specs (`attrs.source()`, `attrs.list(...)`, ...) and coercion of the values a BUCK
//! file passes for them.
//!
//! Coercion happens when a target is declared, like in Buck2, so a wrong type is reported at the
//! call site in the BUCK file rather than later when a recipe is loaded. Values are stored as JSON
//! because that is what the rest of aorta consumes.

use std::fmt;

use allocative::Allocative;
use serde_json::Value as Json;
use starlark::environment::GlobalsBuilder;
use starlark::values::dict::DictRef;
use starlark::values::list::ListRef;
use starlark::values::tuple::TupleRef;
use starlark::values::{starlark_value, NoSerialize, ProvidesStaticType, StarlarkValue, Value};
use starlark::{starlark_module, starlark_simple_value};

use crate::error::err;

/// Why a value does not fit an attribute. `Display` is the message the BUCK file's author sees
/// (wrapped by the call site, `aorta_recipe(name = "x"): attribute `recipe`: ...`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CoerceError {
    /// The value has the wrong type; `expected` is e.g. "a string", `got` describes the value.
    #[error("expected {expected} ({kind}), got {got}")]
    WrongType {
        expected: &'static str,
        kind: AttrKind,
        got: String,
    },
    #[error("expected a target label like //pkg:name or :name ({kind}), got `{value}`")]
    NotALabel { kind: AttrKind, value: String },
    #[error("empty source path")]
    EmptySource,
    /// A label where a file is wanted; `file` is the file name it probably meant.
    #[error("`{value}` is a target label; aorta sources must be files in the package (e.g. \"{file}.yaml\")")]
    SourceIsLabel { value: String, file: String },
    #[error("source `{0}` must be a path inside the package (no leading `/`, no `..`)")]
    SourceOutside(String),
    #[error("item {index}: {source}")]
    Item {
        index: usize,
        #[source]
        source: Box<CoerceError>,
    },
    #[error("in value for key: {0}")]
    DictValue(#[source] Box<CoerceError>),
    /// A rule's own default does not fit its kind (a bug in the `.bzl` file).
    #[error("invalid default for {kind}: {source}")]
    BadDefault {
        kind: AttrKind,
        #[source]
        source: Box<CoerceError>,
    },
}

/// The shape of an attribute.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AttrKind {
    /// A file in the package (we never accept target labels here: aorta reads the file itself).
    Source,
    String,
    Bool,
    Int,
    /// A target label (`//pkg:t` or `:t`); kept as a string.
    Dep,
    ExecDep,
    List(Box<AttrKind>),
    Dict(Box<AttrKind>, Box<AttrKind>),
    /// `None` or the inner kind.
    Option(Box<AttrKind>),
    /// Whatever the value is; stored via its JSON form (or `repr` when it has none).
    Any,
}

impl fmt::Display for AttrKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrKind::Source => write!(f, "attrs.source()"),
            AttrKind::String => write!(f, "attrs.string()"),
            AttrKind::Bool => write!(f, "attrs.bool()"),
            AttrKind::Int => write!(f, "attrs.int()"),
            AttrKind::Dep => write!(f, "attrs.dep()"),
            AttrKind::ExecDep => write!(f, "attrs.exec_dep()"),
            AttrKind::List(i) => write!(f, "attrs.list({i})"),
            AttrKind::Dict(k, v) => write!(f, "attrs.dict({k}, {v})"),
            AttrKind::Option(i) => write!(f, "attrs.option({i})"),
            AttrKind::Any => write!(f, "attrs.any()"),
        }
    }
}

/// An attribute spec value, as returned by the `attrs.*` functions.
#[derive(Debug, Clone, ProvidesStaticType, NoSerialize, Allocative)]
pub(crate) struct AttrSpec {
    #[allocative(skip)]
    pub(crate) kind: AttrKind,
    /// Already coerced default; `None` means the attribute is mandatory.
    #[allocative(skip)]
    pub(crate) default: Option<Json>,
    /// `attrs.default_only(...)`: callers may not set it (same effect as a `_private` name).
    pub(crate) default_only: bool,
}

starlark_simple_value!(AttrSpec);

impl fmt::Display for AttrSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.default_only {
            write!(f, "attrs.default_only({})", self.kind)
        } else {
            write!(f, "{}", self.kind)
        }
    }
}

#[starlark_value(type = "attribute")]
impl<'v> StarlarkValue<'v> for AttrSpec {}

impl AttrSpec {
    /// Builds a spec, coercing `default` up front so a bad default fails in the .bzl file.
    pub(crate) fn new(kind: AttrKind, default: Option<Value<'_>>) -> Result<AttrSpec, CoerceError> {
        let default = match default {
            Some(v) => match coerce(&kind, v) {
                Ok(d) => Some(d),
                Err(e) => {
                    return Err(CoerceError::BadDefault {
                        kind,
                        source: Box::new(e),
                    })
                }
            },
            None => None,
        };
        Ok(AttrSpec {
            kind,
            default,
            default_only: false,
        })
    }
}

fn describe(v: Value<'_>) -> String {
    let repr = v.to_repr();
    let repr = if repr.chars().count() > 40 {
        format!("{}...", repr.chars().take(37).collect::<String>())
    } else {
        repr
    };
    format!("{} `{}`", v.get_type(), repr)
}

fn wrong_type(expected: &'static str, kind: &AttrKind, v: Value<'_>) -> CoerceError {
    CoerceError::WrongType {
        expected,
        kind: kind.clone(),
        got: describe(v),
    }
}

fn expect_str<'v>(kind: &AttrKind, v: Value<'v>) -> Result<&'v str, CoerceError> {
    v.unpack_str()
        .ok_or_else(|| wrong_type("a string", kind, v))
}

/// Converts a Starlark value into the JSON form of an attribute of kind `kind`.
pub(crate) fn coerce(kind: &AttrKind, v: Value<'_>) -> Result<Json, CoerceError> {
    match kind {
        AttrKind::Source => {
            let s = expect_str(kind, v)?;
            check_source(s)?;
            Ok(Json::String(s.to_owned()))
        }
        AttrKind::String => Ok(Json::String(expect_str(kind, v)?.to_owned())),
        AttrKind::Dep | AttrKind::ExecDep => {
            let s = expect_str(kind, v)?;
            if !(s.starts_with(':') || s.contains("//")) {
                return Err(CoerceError::NotALabel {
                    kind: kind.clone(),
                    value: s.to_owned(),
                });
            }
            Ok(Json::String(s.to_owned()))
        }
        AttrKind::Bool => v
            .unpack_bool()
            .map(Json::Bool)
            .ok_or_else(|| wrong_type("a bool", kind, v)),
        AttrKind::Int => match v.unpack_i32() {
            Some(i) => Ok(Json::from(i)),
            None => Err(wrong_type("an int", kind, v)),
        },
        AttrKind::List(inner) => {
            let items = match (ListRef::from_value(v), TupleRef::from_value(v)) {
                (Some(l), _) => l.content(),
                (None, Some(t)) => t.content(),
                (None, None) => return Err(wrong_type("a list", kind, v)),
            };
            let items = items.iter().enumerate().map(|(index, x)| {
                coerce(inner, *x).map_err(|e| CoerceError::Item {
                    index,
                    source: Box::new(e),
                })
            });
            Ok(Json::Array(items.collect::<Result<_, _>>()?))
        }
        AttrKind::Dict(k, val) => {
            let dict = DictRef::from_value(v).ok_or_else(|| wrong_type("a dict", kind, v))?;
            let mut out = serde_json::Map::new();
            for (key, value) in dict.iter() {
                let key = match coerce(k, key)? {
                    Json::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(
                    key,
                    coerce(val, value).map_err(|e| CoerceError::DictValue(Box::new(e)))?,
                );
            }
            Ok(Json::Object(out))
        }
        AttrKind::Option(inner) => {
            if v.is_none() {
                Ok(Json::Null)
            } else {
                coerce(inner, v)
            }
        }
        AttrKind::Any => Ok(v
            .to_json_value()
            .unwrap_or_else(|_| Json::String(v.to_repr()))),
    }
}

/// Sources are files inside the package: no absolute paths, no escaping with `..`, no labels.
fn check_source(s: &str) -> Result<(), CoerceError> {
    if s.is_empty() {
        return Err(CoerceError::EmptySource);
    }
    if s.starts_with(':') || s.contains("//") {
        return Err(CoerceError::SourceIsLabel {
            value: s.to_owned(),
            file: s.rsplit(':').next().unwrap_or(s).to_owned(),
        });
    }
    if s.starts_with('/') || s.split('/').any(|c| c == "..") {
        return Err(CoerceError::SourceOutside(s.to_owned()));
    }
    Ok(())
}

/// The `attrs` namespace: Buck2's attribute constructors. `doc` and Buck2-only options
/// (`providers`, `validate`, ...) are accepted for compatibility and ignored.
#[starlark_module]
pub(crate) fn attrs_namespace(builder: &mut GlobalsBuilder) {
    fn source<'v>(
        #[starlark(require = named, default = false)] allow_directory: bool,
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = (allow_directory, doc);
        AttrSpec::new(AttrKind::Source, default).map_err(err)
    }

    fn string<'v>(
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named)] validate: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = (validate, doc);
        AttrSpec::new(AttrKind::String, default).map_err(err)
    }

    fn bool<'v>(
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = doc;
        AttrSpec::new(AttrKind::Bool, default).map_err(err)
    }

    fn int<'v>(
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = doc;
        AttrSpec::new(AttrKind::Int, default).map_err(err)
    }

    fn any<'v>(
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = doc;
        AttrSpec::new(AttrKind::Any, default).map_err(err)
    }

    fn dep<'v>(
        #[starlark(require = named)] providers: Option<Value<'v>>,
        #[starlark(require = named)] pulls_plugins: Option<Value<'v>>,
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = (providers, pulls_plugins, doc);
        AttrSpec::new(AttrKind::Dep, default).map_err(err)
    }

    fn exec_dep<'v>(
        #[starlark(require = named)] providers: Option<Value<'v>>,
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = (providers, doc);
        AttrSpec::new(AttrKind::ExecDep, default).map_err(err)
    }

    fn list<'v>(
        #[starlark(require = pos)] inner: &AttrSpec,
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = doc;
        AttrSpec::new(AttrKind::List(Box::new(inner.kind.clone())), default).map_err(err)
    }

    fn dict<'v>(
        #[starlark(require = pos)] key: &AttrSpec,
        #[starlark(require = pos)] value: &AttrSpec,
        #[starlark(require = named, default = false)] sorted: bool,
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = (sorted, doc);
        let kind = AttrKind::Dict(Box::new(key.kind.clone()), Box::new(value.kind.clone()));
        AttrSpec::new(kind, default).map_err(err)
    }

    fn option<'v>(
        #[starlark(require = pos)] inner: &AttrSpec,
        #[starlark(require = named)] default: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = doc;
        AttrSpec::new(AttrKind::Option(Box::new(inner.kind.clone())), default).map_err(err)
    }

    /// Buck2's `attrs.default_only(inner)`: the inner default, not settable by callers.
    fn default_only(
        #[starlark(require = pos)] inner: &AttrSpec,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<AttrSpec> {
        let _ = doc;
        if inner.default.is_none() {
            return Err(err(
                "attrs.default_only(...) needs an inner attribute with a default",
            ));
        }
        Ok(AttrSpec {
            default_only: true,
            ..inner.clone()
        })
    }
}
