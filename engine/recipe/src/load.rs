//! Top-level validation in AORTA's order: mapping → phase-3 keys → mode → unknown keys →
//! per-mode key bank → required keys → schema_version; then the mode's own fields.

use crate::cells;
use crate::check::{Ctx, Res};
use crate::limits::{
    too_many_settings, too_many_trials, MAX_RECIPE_BYTES, SETTINGS_HELP, TRIALS_HELP,
};
use crate::model::*;
use crate::probe;
use aorta_registry::Registry;
use aorta_source::{
    parse_document, suggest, Diag, DiagKind, FieldPath, Node, SourceFile, Syntax, Value,
};
use std::path::{Path, PathBuf};

pub const TRIAGE_KEYS: &[&str] = crate::resources::with_resource_keys![
    "schema_version",
    "ticket",
    "workload",
    "trials",
    "steps",
    "confound",
    "cells",
    "workload_config",
    "save_logs",
    "collect",
    "extra_env",
    "trial_isolation",
    "stop_after",
    "env_key",
    "doctor",
    "max_trials_per_cell",
    "confidence",
    "max_walltime",
    "max_gpu_hours",
    "comparisons",
];
pub const PROBE_KEYS: &[&str] = crate::resources::with_resource_keys![
    "schema_version",
    "ticket",
    "mode",
    "trials",
    "mitigation_axis",
    "diagnostic_axis",
    "step_time_regex",
    "collect_paths",
    "timeout_per_trial",
    "env_passthrough_mode",
    "confound",
    "custom_patterns",
    "hang_window_sec",
    "hang_grace_period_at_start",
    "tier3_vram_growth",
    "stop_after",
    "disable_detectors",
    "disable_detector_tiers",
    "collect",
    "retain",
    "redaction",
    "env_key",
    "doctor",
    "inputs",
    "ignore_inputs",
    "max_trials_per_cell",
    "confidence",
    "max_walltime",
    "max_gpu_hours",
    "comparisons",
];
const TRIAGE_REQUIRED: &[&str] = &["schema_version", "workload", "trials", "steps", "cells"];
const PROBE_REQUIRED: &[&str] = &[
    "schema_version",
    "trials",
    "mitigation_axis",
    "diagnostic_axis",
];

/// A recipe and the registry it was resolved against (project registry + sidecars).
#[derive(Debug)]
pub struct Loaded {
    pub recipe: Recipe,
    pub registry: Registry,
}

/// Reads, parses and validates a recipe file. The project registry (`aorta-registry.json`
/// next to the recipe) and `sidecars` extend the built-in registries.
pub fn load_recipe(path: &Path, sidecars: &[PathBuf]) -> Result<Loaded, Box<Diag>> {
    let file = SourceFile::read_limited(path, MAX_RECIPE_BYTES, "recipe")?;
    let project = aorta_registry::project_registry_for(path);
    let registry = Registry::load(project.as_deref(), sidecars)?;
    let mut recipe = parse_recipe(&file, Syntax::for_path(path), &registry)?;
    recipe.source = Some(RecipeSource {
        path: path.to_path_buf(),
        blake3: blake3::hash(file.text().as_bytes()).to_hex().to_string(),
    });
    recipe.registry_files = project
        .into_iter()
        .chain(sidecars.iter().cloned())
        .collect();
    Ok(Loaded { recipe, registry })
}

/// Validates an already-read recipe text against `registry`.
pub fn parse_recipe(
    file: &SourceFile,
    syntax: Syntax,
    registry: &Registry,
) -> Result<Recipe, Box<Diag>> {
    if file.text().len() as u64 > MAX_RECIPE_BYTES {
        // load_recipe refuses it before reading it all; this covers texts read elsewhere (watch).
        return Err(Box::new(
            Diag::new(
                DiagKind::Limit,
                format!(
                    "{} is larger than {MAX_RECIPE_BYTES} bytes, the limit for a recipe",
                    file.name()
                ),
            )
            .with_help(
                "aorta refuses a recipe this large before parsing it; is it the right file?",
            ),
        ));
    }
    let root = parse_document(file, syntax)?;
    let cx = Ctx { file };
    let mode = top_level(&cx, &root)?;
    let recipe = match mode {
        Mode::Triage => cells::triage(&cx, &root, registry),
        Mode::Probe => probe::probe(&cx, &root, registry),
    }?;
    if let Some(message) = too_many_trials(&recipe) {
        let (node, path) = trials_node(&root, &recipe);
        return Err(cx.err(DiagKind::Limit, node, &path, message, TRIALS_HELP));
    }
    if let Some((message, heaviest)) = too_many_settings(&recipe) {
        let top = FieldPath::root();
        let shared_key = if recipe.probe.is_some() {
            "custom_patterns"
        } else {
            "workload_config"
        };
        let (node, path) = match heaviest {
            Some(i) => match root
                .get("cells")
                .and_then(Node::as_seq)
                .and_then(|c| c.get(i))
            {
                Some(n) => (n, top.key("cells").index(i)),
                None => (
                    root.get("mitigation_axis").unwrap_or(&root),
                    top.key("mitigation_axis"),
                ),
            },
            None => (root.get(shared_key).unwrap_or(&root), top.key(shared_key)),
        };
        return Err(cx.err(DiagKind::Limit, node, &path, message, SETTINGS_HELP));
    }
    Ok(recipe)
}

/// The value that decides a cell's trial count, for the planned-trials limit: the stop rule's
/// cap, the largest cell-level override, or the recipe's `trials`.
fn trials_node<'n>(root: &'n Node, recipe: &Recipe) -> (&'n Node, FieldPath) {
    let top = FieldPath::root();
    if let Some(n) = root.get("stop_after").and_then(|s| s.get("max_trials")) {
        return (n, top.key("stop_after").key("max_trials"));
    }
    let biggest = recipe
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.trials.map(|t| (t, i)))
        .max();
    if let Some((t, i)) = biggest {
        if t > recipe.trials {
            if let Some(n) = root
                .get("cells")
                .and_then(Node::as_seq)
                .and_then(|cells| cells.get(i))
                .and_then(|c| c.get("trials"))
            {
                return (n, top.key("cells").index(i).key("trials"));
            }
        }
    }
    (root.get("trials").unwrap_or(root), top.key("trials"))
}

/// What `aorta sweep run` needs before validation: the recipe's `mode`, read leniently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeekedMode {
    Known(Mode),
    /// Unreadable, or a `mode` value the loader will reject with a proper diagnostic.
    Unknown,
}

/// Only a recipe's `redaction:` block (AORTA §10.1.3: what `aorta bundle` reads from a recipe
/// or a run's recipe.resolved.yaml, with no registry validation). `None` when it has none; a
/// file that is not a mapping, or a bad block, is an error (fail closed).
pub fn load_redaction(path: &Path) -> Result<Option<crate::Redaction>, Box<Diag>> {
    let file = SourceFile::read_limited(path, MAX_RECIPE_BYTES, "recipe")?;
    let root = parse_document(&file, Syntax::for_path(path))?;
    let cx = Ctx { file: &file };
    if root.as_map().is_none() {
        return Err(cx.schema(
            &root,
            &FieldPath::root(),
            "a recipe must be a mapping",
            "pass the recipe file the run was built from",
        ));
    }
    root.get("redaction")
        .map(|node| crate::blocks::redaction(&cx, node, &FieldPath::root().key("redaction")))
        .transpose()
}

pub fn peek_mode(path: &Path) -> PeekedMode {
    let Ok(file) = SourceFile::read_limited(path, MAX_RECIPE_BYTES, "recipe") else {
        return PeekedMode::Unknown;
    };
    let Ok(root) = parse_document(&file, Syntax::for_path(path)) else {
        return PeekedMode::Unknown;
    };
    if root.as_map().is_none() {
        return PeekedMode::Unknown;
    }
    match root.get("mode").map(|n| &n.value) {
        None => PeekedMode::Known(Mode::Triage),
        Some(Value::Str(s)) if s == "triage" => PeekedMode::Known(Mode::Triage),
        Some(Value::Str(s)) if s == "probe" => PeekedMode::Known(Mode::Probe),
        _ => PeekedMode::Unknown,
    }
}

fn at(span: std::ops::Range<usize>) -> Node {
    Node::new(Value::Null, span)
}

fn top_level(cx: &Ctx, root: &Node) -> Res<Mode> {
    let top = FieldPath::root();
    let entries = match &root.value {
        Value::Map(m) => m,
        Value::Null => {
            return Err(cx.schema(
                root,
                &top,
                "the recipe is empty",
                "start with `schema_version: 1`; see recipes/quickstart.yaml",
            ))
        }
        _ => {
            return Err(cx.schema(
                root,
                &top,
                format!("a recipe must be a mapping, got {}", root.type_name()),
                "start with `schema_version: 1`; see recipes/quickstart.yaml",
            ))
        }
    };
    // YAML keys are unique; PyYAML (AORTA) silently keeps the last of two, which hides a typo'd
    // edit: refused here, both places shown (docs/compatibility.md).
    let mut seen: std::collections::HashMap<&str, &Node> = std::collections::HashMap::new();
    for (k, _) in entries {
        let Some(name) = k.as_str() else { continue };
        if let Some(first) = seen.insert(name, k) {
            return Err(Box::new(
                aorta_source::Diag::new(
                    aorta_source::DiagKind::Schema,
                    format!("'{name}' is set twice"),
                )
                .with_path(&top.key(name))
                .at(cx.file, k.span.clone(), "second time")
                .also_at(first.span.clone(), "first set here")
                .with_help("keep one of them: a recipe's keys are unique (AORTA 0.2.1 silently used the last)"),
            ));
        }
    }
    if let Some((k, _)) = root.get_entry("condition") {
        return Err(cx.schema(
            k,
            &top.key("condition"),
            "a top-level 'condition' is not supported (deferred to Phase 3 in AORTA)",
            "conditions belong to custom_patterns[i].match.condition",
        ));
    }
    let mode = match root.get_entry("mode") {
        None => Mode::Triage,
        Some((_, v)) => match v.as_str() {
            Some("triage") => Mode::Triage,
            Some("probe") => Mode::Probe,
            other => {
                let mut msg = format!("unknown mode {}", v.repr());
                if let Some(s) = other.and_then(|m| suggest::did_you_mean(m, ["triage", "probe"])) {
                    msg.push_str(&format!(" (did you mean '{s}'?)"));
                }
                // AORTA 0.3.0's RocJITsu recipes select code objects for a standalone run;
                // aorta runs a command under the same hook instead (docs/diagnostics.md).
                let help = match other {
                    Some("sanitizer") => "mode is 'triage' (the default) or 'probe'; AORTA 0.3.0's `mode: sanitizer` (RocJITsu over selected code objects) is not supported: to run a command under ConSan or Waitcheck, put rocjitsu_consan or rocjitsu_waitcheck on a probe recipe's diagnostic_axis (docs/diagnostics.md)",
                    _ => "mode is 'triage' (the default) or 'probe'",
                };
                return Err(cx.schema(v, &top.key("mode"), msg, help));
            }
        },
    };
    let mut union: Vec<&str> = TRIAGE_KEYS.iter().chain(PROBE_KEYS).copied().collect();
    union.sort_unstable();
    union.dedup();
    for (k, _) in entries {
        let name = k.as_str();
        if !name.is_some_and(|n| union.contains(&n)) {
            let shown = name.map_or_else(|| k.repr(), |s| format!("'{s}'"));
            let mut msg = format!("unknown key {shown}");
            if let Some(s) = name.and_then(|n| suggest::did_you_mean(n, union.iter().copied())) {
                msg.push_str(&format!(" (did you mean '{s}'?)"));
            }
            return Err(cx.schema(k, &top, msg, format!("allowed keys: {}", union.join(", "))));
        }
    }
    let (bank, other_mode_hint) = match mode {
        Mode::Triage => (
            TRIAGE_KEYS,
            "is a probe-mode key; set 'mode: probe' to use it",
        ),
        Mode::Probe => (
            PROBE_KEYS,
            "is a triage-mode key and not allowed in a probe recipe (mode: probe)",
        ),
    };
    for (k, _) in entries {
        let name = k.as_str().unwrap_or("");
        if name != "mode" && !bank.contains(&name) {
            let help = match mode {
                Mode::Triage => "probe recipes wrap your command: mode: probe, mitigation_axis, diagnostic_axis",
                Mode::Probe => "probe recipes build cells from mitigation_axis × diagnostic_axis instead of workload/cells",
            };
            return Err(cx.schema(
                k,
                &top.key(name),
                format!("'{name}' {other_mode_hint}"),
                help,
            ));
        }
    }
    let required = match mode {
        Mode::Triage => TRIAGE_REQUIRED,
        Mode::Probe => PROBE_REQUIRED,
    };
    for key in required {
        if root.get(key).is_none() {
            let mode_name = if mode == Mode::Probe {
                "probe"
            } else {
                "triage"
            };
            return Err(cx.schema(
                &at(root.head_span()),
                &top,
                format!("missing required key '{key}'"),
                format!("a {mode_name} recipe needs: {}", required.join(", ")),
            ));
        }
    }
    let version = root.get("schema_version").unwrap_or(root);
    match version.value {
        Value::Int(crate::SCHEMA_VERSION) => {}
        Value::Int(v) => {
            return Err(cx.schema(
                version,
                &top.key("schema_version"),
                format!("unsupported version {v}; this build understands version 1"),
                "set schema_version: 1",
            ))
        }
        _ => {
            return Err(cx.schema(
                version,
                &top.key("schema_version"),
                format!(
                    "must be the integer 1, got {} {}",
                    version.type_name(),
                    version.repr()
                ),
                "set schema_version: 1",
            ))
        }
    }
    Ok(mode)
}
