//! A stub of the Buck2 globals, faithful enough to evaluate real `.bzl` rule files and BUCK files.
//!
//! We only need the *loading* phase of Buck2: calling a rule declares a target, which we record
//! with its coerced attributes. Rule implementations, providers and `cmd_args` belong to the
//! analysis phase, which never runs here, so they are inert callables that exist only so the
//! `.bzl` file compiles (Starlark resolves global names at compile time).

use std::cell::RefCell;
use std::fmt;
use std::sync::OnceLock;

use allocative::Allocative;
use aorta_source::suggest;
use serde_json::{Map, Value as Json};
use starlark::environment::{Globals, GlobalsBuilder, LibraryExtension};
use starlark::eval::{Arguments, Evaluator};
use starlark::values::dict::UnpackDictEntries;
use starlark::values::none::NoneOr;
use starlark::values::{
    starlark_value, NoSerialize, ProvidesStaticType, StarlarkValue, Value, ValueLike,
};
use starlark::{starlark_module, starlark_simple_value, PrintHandler};

use crate::attrs::{attrs_namespace, coerce, AttrKind, AttrSpec, CoerceError};
use crate::error::err;
use crate::label::{check_target_name, TargetNameError};

/// Name of the rule whose targets are recipes (its export name in `rules/aorta.bzl`).
pub const AORTA_RECIPE_RULE: &str = "aorta_recipe";

/// A target declared by a BUCK file.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Export name of the rule (`aorta_recipe`), or `rule` if it was never bound to a name.
    pub rule: String,
    /// The `.bzl` file that defined the rule, as a label (`//rules:aorta.bzl`).
    pub rule_file: String,
    /// The `name` attribute.
    pub name: String,
    /// Every attribute (defaults filled in), coerced to JSON.
    pub attrs: Map<String, Json>,
}

/// Per-file evaluation state, reached from native functions through `Evaluator::extra`.
#[derive(ProvidesStaticType)]
pub(crate) struct EvalContext {
    /// The file being evaluated, as a label (`//recipes:BUCK`, `//rules:aorta.bzl`).
    pub(crate) file_label: String,
    /// Package of the file being evaluated.
    pub(crate) package: String,
    /// `Some` for BUCK files: the targets declared so far. `.bzl` files may not declare targets.
    pub(crate) targets: Option<RefCell<Vec<Target>>>,
}

/// Swallows `print()`: this crate must never write to the terminal.
pub(crate) struct QuietPrint;

impl PrintHandler for QuietPrint {
    fn println(&self, _text: &str) -> starlark::Result<()> {
        Ok(())
    }
}

/// Attributes Buck2 gives every rule implicitly; accepted and recorded, never required.
const IMPLICIT_ATTRS: &[&str] = &[
    "visibility",
    "within_view",
    "tests",
    "target_compatible_with",
    "compatible_with",
    "exec_compatible_with",
];

/// The value returned by `rule(...)`.
#[derive(Debug, ProvidesStaticType, NoSerialize, Allocative)]
pub(crate) struct RuleValue {
    #[allocative(skip)]
    attrs: Vec<(String, AttrSpec)>,
    defined_in: String,
    /// Set by `export_as` when the rule is first bound to a top-level name, as Buck2 does.
    #[allocative(skip)]
    name: OnceLock<String>,
}

starlark_simple_value!(RuleValue);

impl RuleValue {
    /// The rule's declared attributes (for the analysis stub).
    pub(crate) fn attr_specs(&self) -> &[(String, AttrSpec)] {
        &self.attrs
    }

    fn name(&self) -> &str {
        self.name.get().map_or("rule", String::as_str)
    }

    /// Validates a call's kwargs against the attr specs and records the target.
    fn declare(&self, kwargs: &[(&str, Value<'_>)], ctx: &EvalContext) -> Result<(), DeclareError> {
        let rule = self.name();
        let name = match kwargs.iter().find(|(k, _)| *k == "name") {
            None => {
                return Err(DeclareError::NoName {
                    rule: rule.to_owned(),
                })
            }
            Some((_, v)) => v.unpack_str().ok_or_else(|| DeclareError::NameNotString {
                rule: rule.to_owned(),
                got: v.get_type().to_owned(),
            })?,
        };
        let call = format!("{rule}(name = {name:?})");
        check_target_name(name).map_err(|source| DeclareError::BadName {
            call: call.clone(),
            source,
        })?;

        let mut attrs = Map::new();
        attrs.insert("name".into(), Json::String(name.into()));
        for (key, value) in kwargs.iter().filter(|(k, _)| *k != "name") {
            if IMPLICIT_ATTRS.contains(key) {
                let v = coerce(&AttrKind::List(Box::new(AttrKind::String)), *value).map_err(
                    |source| DeclareError::Attr {
                        call: call.clone(),
                        key: (*key).to_owned(),
                        source,
                    },
                )?;
                attrs.insert((*key).into(), v);
                continue;
            }
            let Some((_, spec)) = self.attrs.iter().find(|(n, _)| n == key) else {
                let settable: Vec<&str> = self
                    .attrs
                    .iter()
                    .filter(|(n, s)| !is_private(n, s))
                    .map(|(n, _)| n.as_str())
                    .collect();
                let hint = suggest::did_you_mean(key, settable.iter().copied())
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_default();
                return Err(DeclareError::UnknownAttr {
                    call,
                    key: (*key).to_owned(),
                    rule: rule.to_owned(),
                    settable: settable.join(", "),
                    hint,
                });
            };
            if is_private(key, spec) {
                return Err(DeclareError::PrivateAttr {
                    call,
                    key: (*key).to_owned(),
                });
            }
            // As in Buck2, an explicit `None` means "use the default".
            let v = match (&spec.default, value.is_none()) {
                (Some(d), true) => d.clone(),
                _ => coerce(&spec.kind, *value).map_err(|source| DeclareError::Attr {
                    call: call.clone(),
                    key: (*key).to_owned(),
                    source,
                })?,
            };
            attrs.insert((*key).into(), v);
        }
        for (key, spec) in &self.attrs {
            if attrs.contains_key(key) {
                continue;
            }
            match &spec.default {
                Some(d) => {
                    attrs.insert(key.clone(), d.clone());
                }
                None => {
                    return Err(DeclareError::MissingAttr {
                        call,
                        key: key.clone(),
                        kind: spec.kind.clone(),
                    })
                }
            }
        }

        let Some(targets) = ctx.targets.as_ref() else {
            return Err(DeclareError::NotInBuck {
                call,
                file: ctx.file_label.clone(),
            });
        };
        let mut targets = targets.borrow_mut();
        if targets.iter().any(|t| t.name == name) {
            return Err(DeclareError::Duplicate {
                name: name.to_owned(),
                package: ctx.package.clone(),
            });
        }
        targets.push(Target {
            rule: rule.to_owned(),
            rule_file: self.defined_in.clone(),
            name: name.to_owned(),
            attrs,
        });
        Ok(())
    }
}

/// Why a rule call in a BUCK file cannot declare its target. `Display` is the message shown
/// at the call (its words pick the help line, see `error::hint`); `call` is the call as
/// written, `aorta_recipe(name = "x")`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum DeclareError {
    #[error("{rule}() is missing the mandatory `name` attribute")]
    NoName { rule: String },
    #[error("{rule}(name = ...) must be a string, got {got}")]
    NameNotString { rule: String, got: String },
    #[error("{call}: {source}")]
    BadName {
        call: String,
        #[source]
        source: TargetNameError,
    },
    #[error("{call}: attribute `{key}`: {source}")]
    Attr {
        call: String,
        key: String,
        #[source]
        source: CoerceError,
    },
    /// `settable` lists the attributes a caller may set; `hint` is a "did you mean" or empty.
    #[error("{call}: unknown attribute `{key}` (`{rule}` accepts: name, {settable}){hint}")]
    UnknownAttr {
        call: String,
        key: String,
        rule: String,
        settable: String,
        hint: String,
    },
    #[error("{call}: attribute `{key}` is private to the rule and cannot be set")]
    PrivateAttr { call: String, key: String },
    #[error("{call}: missing required attribute `{key}` ({kind})")]
    MissingAttr {
        call: String,
        key: String,
        kind: AttrKind,
    },
    #[error(
        "{call} declares a target, but only BUCK files may do that (called while loading {file})"
    )]
    NotInBuck { call: String, file: String },
    #[error("duplicate target name `{name}` in //{package}: every target in a package needs a unique name")]
    Duplicate { name: String, package: String },
}

/// Buck2 treats `_name` attributes and `attrs.default_only` as not settable by callers.
fn is_private(name: &str, spec: &AttrSpec) -> bool {
    name.starts_with('_') || spec.default_only
}

impl fmt::Display for RuleValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<rule {} from {}>", self.name(), self.defined_in)
    }
}

#[starlark_value(type = "rule")]
impl<'v> StarlarkValue<'v> for RuleValue {
    fn invoke(
        &self,
        _me: Value<'v>,
        args: &Arguments<'v, '_>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        args.no_positional_args(eval.heap())?;
        let kwargs = args.names_map()?;
        let kwargs: Vec<(&str, Value<'v>)> = kwargs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let ctx = eval
            .extra
            .and_then(|e| e.downcast_ref::<EvalContext>())
            .ok_or_else(|| err("internal: rule called without an evaluation context"))?;
        self.declare(&kwargs, ctx).map_err(err)?;
        Ok(Value::new_none())
    }

    fn export_as(
        &self,
        variable_name: &str,
        _eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<()> {
        // First binding wins, so `alias = aorta_recipe` keeps the rule's real name.
        let _ = self.name.set(variable_name.to_owned());
        Ok(())
    }
}

/// Providers, `cmd_args` and friends: values that only matter during analysis, which we skip.
#[derive(Debug, ProvidesStaticType, NoSerialize, Allocative)]
pub(crate) struct Inert {
    kind: &'static str,
    #[allocative(skip)]
    name: OnceLock<String>,
}

starlark_simple_value!(Inert);

impl Inert {
    fn named(kind: &'static str, name: &str) -> Inert {
        let inert = Inert {
            kind,
            name: OnceLock::new(),
        };
        let _ = inert.name.set(name.to_owned());
        inert
    }
}

impl fmt::Display for Inert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<{} {}>",
            self.kind,
            self.name.get().map_or("anonymous", String::as_str)
        )
    }
}

#[starlark_value(type = "provider")]
impl<'v> StarlarkValue<'v> for Inert {
    /// Loading never calls these. During analysis (the tests' stub of Buck2's analysis phase,
    /// `analysis.rs`) a provider or `cmd_args` call returns a struct recording its arguments:
    /// `_provider` (the name), positional arguments as `args`, keyword arguments as fields.
    fn invoke(
        &self,
        _me: Value<'v>,
        args: &Arguments<'v, '_>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        let heap = eval.heap();
        let name = self.name.get().map_or("anonymous", String::as_str);
        let positional: Vec<Value<'v>> = args.positions(heap)?.collect();
        let mut fields: Vec<(String, Value<'v>)> = vec![("_provider".to_owned(), heap.alloc(name))];
        if !positional.is_empty() {
            fields.push(("args".to_owned(), heap.alloc(positional)));
        }
        for (k, v) in args.names_map()?.iter() {
            fields.push((k.as_str().to_owned(), *v));
        }
        Ok(heap.alloc(starlark::values::structs::AllocStruct(fields)))
    }

    /// Providers index dependencies (`dep[RunInfo]`), so they are dict keys: hashed by name.
    fn write_hash(
        &self,
        hasher: &mut starlark::collections::StarlarkHasher,
    ) -> starlark::Result<()> {
        use std::hash::Hash;
        self.name.get().hash(hasher);
        Ok(())
    }

    fn equals(&self, other: Value<'v>) -> starlark::Result<bool> {
        Ok(other
            .downcast_ref::<Inert>()
            .is_some_and(|o| o.name.get() == self.name.get()))
    }

    fn export_as(
        &self,
        variable_name: &str,
        _eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<()> {
        let _ = self.name.set(variable_name.to_owned());
        Ok(())
    }
}

fn context<'a>(eval: &Evaluator<'_, 'a, '_>) -> starlark::Result<&'a EvalContext> {
    eval.extra
        .and_then(|e| e.downcast_ref::<EvalContext>())
        .ok_or_else(|| err("internal: no evaluation context"))
}

#[starlark_module]
fn buck2_globals(builder: &mut GlobalsBuilder) {
    /// Buck2's `rule()`: returns a callable that declares targets when called from a BUCK file.
    fn rule<'v>(
        #[starlark(require = named)] r#impl: Value<'v>,
        #[starlark(require = named)] attrs: UnpackDictEntries<&'v str, Value<'v>>,
        #[starlark(require = named, default = NoneOr::None)] doc: NoneOr<&str>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<RuleValue> {
        let _ = doc;
        if r#impl.get_type() != "function" {
            return Err(err(format!(
                "rule(impl = ...) must be a function, got {}",
                r#impl.get_type()
            )));
        }
        let mut specs: Vec<(String, AttrSpec)> = Vec::new();
        for (name, spec) in attrs.entries {
            let spec = spec.downcast_ref::<AttrSpec>().ok_or_else(|| {
                err(format!(
                    "rule attrs[{name:?}] must be an attrs.* value, got {}",
                    spec.get_type()
                ))
            })?;
            if name == "name" || IMPLICIT_ATTRS.contains(&name) {
                return Err(err(format!(
                    "rule attrs[{name:?}]: `{name}` is an implicit attribute of every rule"
                )));
            }
            if is_private(name, spec) && spec.default.is_none() {
                return Err(err(format!(
                    "rule attrs[{name:?}]: private attributes need a default"
                )));
            }
            specs.push((name.to_owned(), spec.clone()));
        }
        let defined_in = context(eval)?.file_label.clone();
        Ok(RuleValue {
            attrs: specs,
            defined_in,
            name: OnceLock::new(),
        })
    }

    /// Buck2's `provider()`: an inert value here (providers only exist during analysis).
    fn provider<'v>(
        #[starlark(require = named)] fields: Option<Value<'v>>,
        #[starlark(require = named, default = "")] doc: &str,
    ) -> starlark::Result<Inert> {
        let _ = (fields, doc);
        Ok(Inert {
            kind: "provider",
            name: OnceLock::new(),
        })
    }

    /// Buck2's `read_root_config()`: we have no config, so the default is the answer.
    fn read_root_config<'v>(
        #[starlark(require = pos)] section: &str,
        #[starlark(require = pos)] key: &str,
        #[starlark(require = pos)] default: Option<Value<'v>>,
    ) -> starlark::Result<Value<'v>> {
        let _ = (section, key);
        Ok(default.unwrap_or_else(Value::new_none))
    }

    /// Buck2's `package_name()`: the package of the BUCK file being evaluated.
    fn package_name(eval: &mut Evaluator) -> starlark::Result<String> {
        Ok(context(eval)?.package.clone())
    }
}

/// The globals BUCK and `.bzl` files see: standard Starlark plus the Buck2 stubs above.
pub(crate) fn globals() -> &'static Globals {
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    GLOBALS.get_or_init(|| {
        use LibraryExtension::*;
        let mut builder = GlobalsBuilder::extended_by(&[
            StructType, RecordType, EnumType, Map, Filter, Partial, Debug, Print, Pprint, Json,
            Typing, SetType,
        ]);
        buck2_globals(&mut builder);
        builder.namespace("attrs", attrs_namespace);
        for name in ["DefaultInfo", "RunInfo"] {
            builder.set(name, Inert::named("provider", name));
        }
        builder.set("cmd_args", Inert::named("function", "cmd_args"));
        builder.build()
    })
}
