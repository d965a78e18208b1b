//! A stub of Buck2's *analysis* phase, for testing `rules/*.bzl` without Buck2: each target a
//! BUCK file declares has its rule's `impl` called with a `ctx` (`ctx.attrs`, `ctx.label`,
//! `ctx.actions.declare_output/write/run`), dependencies expose `DefaultInfo`/`RunInfo`, and the
//! result is checked as Buck2 checks it: a list of providers with exactly one `DefaultInfo`,
//! every declared output bound by exactly one action, actions of one category told apart by
//! unique identifiers, every sub-target with one `DefaultInfo`. What the impl did comes back as
//! JSON: its providers and its actions, command lines flattened to strings (`$(output x)` for an
//! output, the path for a source, `$(exe //pkg:t)` for a tool's `RunInfo`).
//!
//! The `.bzl` text is evaluated again with a Starlark prelude in front that replaces `rule()`
//! (so the rule keeps its `impl`); `cmd_args`, `DefaultInfo` and `RunInfo` are the loading
//! stubs, which record their arguments when called.

use crate::attrs::AttrKind;
use crate::buck2::{globals, EvalContext, QuietPrint, RuleValue};
use crate::eval::Session;
use serde_json::{json, Value as Json};
use starlark::environment::Module;
use starlark::eval::Evaluator;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::ValueLike;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::error::LabelsError;

/// Why a package's targets could not be analysed. `starlark::Error` is no `std::error::Error`,
/// so it is kept as a field and shown inline rather than as a `source`.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Eval(#[from] LabelsError),
    #[error("{rule_file}: {error}")]
    Load {
        rule_file: String,
        error: starlark::Error,
    },
    #[error("{rule_file}: no rule {rule}: {error}")]
    NoRule {
        rule_file: String,
        rule: String,
        error: starlark::Error,
    },
    #[error("{0} is not a rule")]
    NotARule(String),
    #[error("bad rule file label {0}")]
    BadRuleFile(String),
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// Parsing or running the analysis program of target `label` failed.
    #[error("{label}: {error}")]
    Starlark {
        label: String,
        error: starlark::Error,
    },
    #[error("{0}: no result")]
    NoResult(String),
    #[error("{label}: {source}")]
    BadResult {
        label: String,
        #[source]
        source: serde_json::Error,
    },
}

/// What one target's analysis produced.
#[derive(Debug, Clone)]
pub struct Analysed {
    pub name: String,
    pub rule: String,
    /// `{"providers": [...], "actions": [...]}`.
    pub result: Json,
}

const PRELUDE: &str = r#"
def rule(impl, attrs, doc = ""):
    return struct(impl = impl, attrs = attrs)

def __artifact(path):
    return struct(_kind = "artifact", short_path = path, path = path)

def __dep(label):
    # What a dependency exposes: its default outputs and a RunInfo that runs it.
    return {
        DefaultInfo: DefaultInfo(default_outputs = [__artifact("$(out " + label + ")")], other_outputs = []),
        RunInfo: RunInfo(args = cmd_args("$(exe " + label + ")")),
    }

def __scalar(v):
    if type(v) == "dict" and "$artifact" in v:
        return __artifact(v["$artifact"])
    if type(v) == "dict" and "$dep" in v:
        return __dep(v["$dep"])
    return v

def __value(v):
    if type(v) == "list":
        return [__scalar(x) for x in v]
    return __scalar(v)

def __flatten(v):
    # Command lines nest (cmd_args in lists in RunInfo); Starlark has no recursion, so a worklist.
    out = []
    work = [v]
    for _ in range(100000):
        if not work:
            return out
        x = work.pop(0)
        t = type(x)
        if t == "list" or t == "tuple":
            work = list(x) + work
        elif t == "struct" and getattr(x, "_kind", None) == "artifact":
            out.append(x.short_path)
        elif t == "struct" and getattr(x, "_kind", None) == "output":
            out.append("$(output " + x.short_path + ")")
        elif t == "struct" and getattr(x, "_provider", None) == "cmd_args":
            work = list(getattr(x, "args", [])) + work
        elif t == "struct" and getattr(x, "_provider", None) == "RunInfo":
            work = [getattr(x, "args", [])] + work
        elif t == "string" or t == "int" or t == "bool":
            out.append(str(x))
        else:
            fail("cannot put a " + t + " on a command line: " + repr(x))
    fail("command line too deep")

def __fields(p):
    fields = {}
    for f in dir(p):
        if f == "_provider" or f == "sub_targets":
            continue
        v = getattr(p, f)
        if f == "args" or f == "default_output" or f == "default_outputs" or f == "other_outputs":
            v = __flatten(v)
        fields[f] = v
    return fields

def __render(p):
    # A provider as JSON; DefaultInfo's sub_targets (name -> provider list, one level deep, each
    # with exactly one DefaultInfo as Buck2 requires) rendered the same way.
    fields = __fields(p)
    if hasattr(p, "sub_targets"):
        subs = {}
        for name, ps in p.sub_targets.items():
            if len([q for q in ps if getattr(q, "_provider", None) == "DefaultInfo"]) != 1:
                fail("sub-target " + name + " must have exactly one DefaultInfo")
            subs[name] = [{"provider": q._provider, "fields": __fields(q)} for q in ps]
        fields["sub_targets"] = subs
    return {"provider": p._provider, "fields": fields}

def __analyse(r, attrs, label):
    declared = []
    bound = []
    actions = []

    def declare_output(path, dir = False):
        if path in declared:
            fail("declare_output: " + path + " declared twice")
        declared.append(path)
        return struct(_kind = "artifact", short_path = path, path = path, dir = dir, as_output = lambda: struct(_kind = "output", short_path = path))

    def write(output, content, **kwargs):
        path = output if type(output) == "string" else output.short_path
        if type(output) == "string":
            declared.append(path)
        bound.append(path)
        actions.append({"kind": "write", "output": path, "content": __flatten(content)})
        return __artifact(path)

    def run(cmd, category = None, identifier = None, env = {}, **kwargs):
        if category == None:
            fail("ctx.actions.run needs a category")
        for a in actions:
            if a["kind"] == "run" and a["category"] == category and (identifier == None or a["identifier"] == None or a["identifier"] == identifier):
                fail("two actions of category " + category + " need distinct identifiers (got " + repr(identifier) + ")")
        argv = __flatten(cmd)
        for a in argv:
            if a.startswith("$(output "):
                bound.append(a[len("$(output "):-1])
        hidden = []
        if type(cmd) == "struct" and hasattr(cmd, "hidden"):
            hidden = __flatten(cmd.hidden)
        actions.append({"kind": "run", "argv": argv, "hidden": hidden, "category": category, "identifier": identifier, "env": env})

    values = {k: __value(v) for k, v in attrs.items()}
    ctx = struct(
        label = label,
        attrs = struct(**values),
        actions = struct(declare_output = declare_output, write = write, run = run),
    )
    providers = r.impl(ctx)
    if type(providers) != "list":
        fail("the impl must return a list of providers, got " + type(providers))
    names = [getattr(p, "_provider", type(p)) for p in providers]
    if len([n for n in names if n == "DefaultInfo"]) != 1:
        fail("the impl must return exactly one DefaultInfo, got " + repr(names))
    for path in declared:
        n = len([b for b in bound if b == path])
        if n != 1:
            fail("output " + path + " is bound by " + str(n) + " actions (Buck2 needs exactly one)")
    rendered = [__render(p) for p in providers]
    return json.encode({"providers": rendered, "actions": actions})
"#;

/// Attribute values as the prelude wants them: sources and deps tagged by kind.
fn typed(kind: &AttrKind, v: &Json) -> Json {
    match (kind, v) {
        (AttrKind::Source, Json::String(s)) => json!({ "$artifact": s }),
        (AttrKind::Dep | AttrKind::ExecDep, Json::String(s)) => json!({ "$dep": s }),
        (AttrKind::List(inner), Json::Array(items)) => {
            Json::Array(items.iter().map(|x| typed(inner, x)).collect())
        }
        (AttrKind::Option(inner), x) if !x.is_null() => typed(inner, x),
        (AttrKind::Dict(_, vk), Json::Object(m)) => {
            Json::Object(m.iter().map(|(k, x)| (k.clone(), typed(vk, x))).collect())
        }
        _ => v.clone(),
    }
}

/// Analyses every target of `package`'s BUCK file. `Ok(vec![])` when the package has no BUCK.
pub fn analyse_package(root: &Path, package: &str) -> Result<Vec<Analysed>, AnalysisError> {
    let session = Session::new(root);
    let Some(bf) = session.eval_package(package)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for t in &bf.targets {
        let frozen =
            session
                .load_bzl(package, &t.rule_file)
                .map_err(|error| AnalysisError::Load {
                    rule_file: t.rule_file.clone(),
                    error,
                })?;
        let (rule_value, _) =
            frozen
                .get_any_visibility(&t.rule)
                .map_err(|error| AnalysisError::NoRule {
                    rule_file: t.rule_file.clone(),
                    rule: t.rule.clone(),
                    error: error.into(),
                })?;
        let rv = rule_value
            .value()
            .downcast_ref::<RuleValue>()
            .ok_or_else(|| AnalysisError::NotARule(t.rule.clone()))?;
        let mut attrs = serde_json::Map::new();
        for (k, v) in &t.attrs {
            let kind = rv
                .attr_specs()
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, s)| s.kind.clone());
            attrs.insert(
                k.clone(),
                kind.map_or_else(|| v.clone(), |kind| typed(&kind, v)),
            );
        }
        let (pkg, file) = t
            .rule_file
            .trim_start_matches("//")
            .split_once(':')
            .ok_or_else(|| AnalysisError::BadRuleFile(t.rule_file.clone()))?;
        let bzl_path = root.join(pkg).join(file);
        let bzl = std::fs::read_to_string(&bzl_path).map_err(|source| AnalysisError::Read {
            path: bzl_path.clone(),
            source,
        })?;
        let label = format!("//{package}:{}", t.name);
        let attrs_json = serde_json::to_string(&Json::Object(attrs))?;
        let program = format!(
            "{PRELUDE}\n{bzl}\naorta_analysis_result = __analyse({}, json.decode({}), {})\n",
            t.rule,
            serde_json::to_string(&attrs_json)?,
            serde_json::to_string(&label)?
        );
        let dialect = Dialect {
            enable_keyword_only_arguments: true,
            enable_top_level_stmt: true,
            ..Dialect::Extended
        };
        let ast = AstModule::parse(&format!("analysis of {label}"), program, &dialect).map_err(
            |error| AnalysisError::Starlark {
                label: label.clone(),
                error,
            },
        )?;
        let ctx = EvalContext {
            file_label: t.rule_file.clone(),
            package: package.to_owned(),
            targets: Some(RefCell::default()),
        };
        let result: Result<String, AnalysisError> = Module::with_temp_heap(|module| {
            let mut eval = Evaluator::new(&module);
            eval.set_print_handler(&QuietPrint);
            eval.extra = Some(&ctx);
            eval.eval_module(ast, globals())
                .map_err(|error| AnalysisError::Starlark {
                    label: label.clone(),
                    error,
                })?;
            let v = module
                .get("aorta_analysis_result")
                .ok_or_else(|| AnalysisError::NoResult(label.clone()))?;
            Ok(v.unpack_str().unwrap_or_default().to_owned())
        });
        let result = serde_json::from_str(&result?).map_err(|source| AnalysisError::BadResult {
            label: label.clone(),
            source,
        })?;
        out.push(Analysed {
            name: t.name.clone(),
            rule: t.rule.clone(),
            result,
        });
    }
    Ok(out)
}
