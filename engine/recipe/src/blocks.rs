//! Sub-blocks shared by both modes or owned by probe mode (AORTA §2.6, §5.6–5.8).

use crate::check::{Ctx, Res};
use crate::model::*;
use aorta_classify::Disables;
use aorta_condition::Condition;
use aorta_source::{FieldPath, Node, Value};
use std::collections::BTreeMap;

/// Collectors of a workload (triage) recipe: AORTA's, whose options are strings passed through
/// to them, and aorta's kernel profilers (docs/diagnostics.md), which wrap the workload
/// executable (ncu) or ask it for a profile (torch_profiler: the hook, or libtorch's profiler
/// in aorta's own torch workloads).
pub const COLLECTORS: &[&str] = &[
    "rocprof",
    "proton",
    "numerics",
    "layer_numerics",
    "amd_log",
    "ncu",
    "torch_profiler",
];

/// Backtracking budget for user regexes, so a pathological pattern cannot hang a scan.
pub const REGEX_BACKTRACK_LIMIT: usize = 1_000_000;

/// Compiles a user regex the way every consumer must: with the backtracking budget.
pub fn compile_regex(pattern: &str) -> Result<fancy_regex::Regex, fancy_regex::Error> {
    fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(REGEX_BACKTRACK_LIMIT)
        .build()
}

pub(crate) fn stop_after(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<StopAfter> {
    let entries = cx.map(node, path, "write stop_after: {events: 3, max_trials: 20}")?;
    cx.only_keys(
        entries,
        path,
        &["events", "max_trials", "event_verdict"],
        "stop_after",
    )?;
    let Some(events_node) = node.get("events") else {
        return Err(cx.schema(
            node,
            path,
            "missing required key 'events'",
            "write stop_after: {events: 3, max_trials: 20}",
        ));
    };
    let events = cx.positive_u32(events_node, &path.key("events"))?;
    let Some(max_node) = node.get("max_trials") else {
        return Err(cx.schema(
            node,
            path,
            "missing required key 'max_trials'",
            "stop_after needs a hard cap: add max_trials >= events",
        ));
    };
    let max_trials = cx.positive_u32(max_node, &path.key("max_trials"))?;
    if max_trials < events {
        return Err(cx.schema(
            max_node,
            &path.key("max_trials"),
            format!("max_trials ({max_trials}) must be >= events ({events})"),
            "raise max_trials or lower events",
        ));
    }
    let event_verdict = match node.get("event_verdict") {
        None => Verdict::Fail,
        Some(v) => {
            let p = path.key("event_verdict");
            let s = cx.string(v, &p, "one of: fail, pass, error")?;
            Verdict::parse(s).ok_or_else(|| {
                cx.schema(
                    v,
                    &p,
                    format!("unknown verdict '{s}'"),
                    "one of: fail, pass, error",
                )
            })?
        }
    };
    Ok(StopAfter {
        events,
        max_trials,
        event_verdict,
    })
}

pub(crate) fn retain(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<Retain> {
    let levels = "levels: full, summary, log, none";
    let entries = cx.map(node, path, levels)?;
    // AORTA checks keys in sorted order so the reported error is deterministic.
    let mut sorted: Vec<&(Node, Node)> = entries.iter().collect();
    sorted.sort_by_key(|(k, _)| k.as_str().map(str::to_string).unwrap_or_else(|| k.repr()));
    let owned: Vec<(Node, Node)> = sorted.into_iter().cloned().collect();
    cx.only_keys(&owned, path, &["on_fail", "on_pass", "on_error"], "retain")?;
    let mut r = Retain {
        on_fail: RetainLevel::Full,
        on_pass: RetainLevel::Full,
        on_error: RetainLevel::Full,
    };
    for (k, v) in &owned {
        let key = k.as_str().unwrap_or("");
        let slot = match key {
            "on_fail" => &mut r.on_fail,
            "on_pass" => &mut r.on_pass,
            _ => &mut r.on_error,
        };
        let p = path.key(key);
        let s = cx.string(v, &p, levels)?;
        *slot = match s {
            "full" => RetainLevel::Full,
            "summary" => RetainLevel::Summary,
            "log" => RetainLevel::Log,
            "none" => RetainLevel::None,
            _ => return Err(cx.schema(v, &p, format!("unknown retention level '{s}'"), levels)),
        };
    }
    Ok(r)
}

pub(crate) fn redaction(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<Redaction> {
    let help =
        "redaction: {scrub_env_keys: ['AWS_*'], scrub_paths: true, scrub_ip_addresses: true}";
    if node.is_null() {
        return Err(cx.schema(
            node,
            path,
            "must be a mapping, not null",
            "remove the key to disable redaction, or fill it in",
        ));
    }
    let entries = cx.map(node, path, help)?;
    let mut sorted: Vec<&(Node, Node)> = entries.iter().collect();
    sorted.sort_by_key(|(k, _)| k.as_str().map(str::to_string).unwrap_or_else(|| k.repr()));
    let owned: Vec<(Node, Node)> = sorted.into_iter().cloned().collect();
    cx.only_keys(
        &owned,
        path,
        &["scrub_env_keys", "scrub_paths", "scrub_ip_addresses"],
        "redaction",
    )?;
    let mut r = Redaction::default();
    if let Some(v) = node.get("scrub_env_keys") {
        let p = path.key("scrub_env_keys");
        // fnmatch patterns (as AORTA's): every string is a valid pattern, `[` without `]` is literal.
        r.scrub_env_keys = cx.string_list(
            v,
            &p,
            "a list of case-sensitive fnmatch globs such as 'AWS_*'",
        )?;
    }
    if let Some(v) = node.get("scrub_paths") {
        r.scrub_paths = cx.boolean(v, &path.key("scrub_paths"))?;
    }
    if let Some(v) = node.get("scrub_ip_addresses") {
        r.scrub_ip_addresses = cx.boolean(v, &path.key("scrub_ip_addresses"))?;
    }
    Ok(r)
}

/// `collect:` as a list of names, or a mapping name → null | {option: "value"}.
pub(crate) fn collect(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<Collect> {
    collect_of(cx, node, path, COLLECTORS)
}

/// Kernel profilers a probe recipe's command runs under (docs/diagnostics.md).
pub const PROBE_COLLECTORS: &[&str] = &["ncu", "torch_profiler"];

/// [`collect`] with the names `allowed` in this place.
pub(crate) fn collect_of(
    cx: &Ctx,
    node: &Node,
    path: &FieldPath,
    allowed: &[&str],
) -> Res<Collect> {
    let valid = format!("valid collectors: {}", allowed.join(", "));
    let mut out = Collect::default();
    let mut add = |name_node: &Node, p: &FieldPath, opts: BTreeMap<String, String>| -> Res<()> {
        let name = cx.string(name_node, p, &valid)?;
        if !allowed.contains(&name) {
            return Err(cx.schema(
                name_node,
                p,
                format!("unknown collector '{name}'"),
                valid.clone(),
            ));
        }
        if !out.collectors.iter().any(|(n, _)| n == name) {
            out.collectors.push((name.to_string(), opts));
        }
        Ok(())
    };
    match &node.value {
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                add(item, &path.index(i), BTreeMap::new())?;
            }
        }
        Value::Map(entries) => {
            for (k, v) in entries {
                let opts = if v.is_null() {
                    BTreeMap::new()
                } else {
                    let name = k.as_str().unwrap_or("");
                    cx.string_map(
                        v,
                        &path.key(name),
                        "collector options are strings, e.g. {interval_ms: \"10\"}",
                    )?
                };
                add(k, path, opts)?;
            }
        }
        _ => {
            return Err(cx.schema(
                node,
                path,
                format!(
                    "must be a list of collector names or a mapping, got {}",
                    node.type_name()
                ),
                valid,
            ));
        }
    }
    Ok(out)
}

/// `workload_config`: string keys; `steps` and `_aorta_*` are reserved for the engine.
pub(crate) fn workload_config(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<JsonMap> {
    let entries = cx.map(node, path, "a mapping of workload options")?;
    let mut out = JsonMap::new();
    for (k, v) in entries {
        let key = cx.key_string(k, path)?;
        if key == "steps" {
            return Err(cx.schema(
                k,
                &path.key(key),
                "'steps' is reserved",
                "set steps at the recipe or cell level instead",
            ));
        }
        if key.starts_with("_aorta_") {
            return Err(cx.schema(
                k,
                &path.key(key),
                "keys starting with '_aorta_' are reserved for the engine",
                "rename the key",
            ));
        }
        out.insert(key.to_string(), v.to_json());
    }
    Ok(out)
}

pub(crate) fn custom_patterns(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<Vec<CustomPattern>> {
    let example = "custom_patterns: [{id: oom, match: {regex: 'out of memory'}, on_match: fail}]";
    let items = cx.list(node, path, example)?;
    if items.is_empty() {
        return Err(cx.schema(
            node,
            path,
            "must not be empty",
            "remove the key, or add a pattern",
        ));
    }
    let mut out: Vec<CustomPattern> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = path.index(i);
        let entries = cx.map(item, &p, example)?;
        cx.only_keys(
            entries,
            &p,
            &["id", "match", "on_match", "required_for_pass"],
            "a custom pattern",
        )?;
        let id_node = item
            .get("id")
            .ok_or_else(|| cx.schema(item, &p, "missing required key 'id'", example))?;
        let id = cx.non_empty_string(
            id_node,
            &p.key("id"),
            "a unique name; the detector becomes custom:<id>",
        )?;
        if out.iter().any(|c| c.id == id) {
            return Err(cx.schema(
                id_node,
                &p.key("id"),
                format!("duplicate custom pattern id '{id}'"),
                "ids must be unique",
            ));
        }
        let m = item
            .get("match")
            .ok_or_else(|| cx.schema(item, &p, "missing required key 'match'", example))?;
        let mp = p.key("match");
        let m_entries = cx.map(m, &mp, "match: {regex: '...', condition: '...'}")?;
        cx.only_keys(m_entries, &mp, &["regex", "condition"], "match")?;
        let re_node = m.get("regex").ok_or_else(|| {
            cx.schema(
                m,
                &mp,
                "missing required key 'regex'",
                "match: {regex: '...'}",
            )
        })?;
        let regex = cx.non_empty_string(
            re_node,
            &mp.key("regex"),
            "a Python-style regular expression",
        )?;
        let compiled = compile_regex(regex).map_err(|e| {
            cx.schema(
                re_node,
                &mp.key("regex"),
                format!("regex does not compile: {e}"),
                "Python `re` syntax; see docs/recipes.md for the supported dialect",
            )
        })?;
        // A trial's `capture` keeps these names for the classifier's and engine's own notes.
        if let Some(name) = compiled
            .capture_names()
            .flatten()
            .find(|n| aorta_trial::RESERVED_CAPTURE_KEYS.contains(n))
        {
            return Err(cx.schema(
                re_node,
                &mp.key("regex"),
                format!(
                    "the group name `{name}` is reserved for the classifier's notes in `capture`"
                ),
                "rename the group, e.g. (?P<my_error>...)",
            ));
        }
        let condition = match m.get("condition") {
            None => None,
            Some(c) => Some(condition(cx, c, &mp.key("condition"))?),
        };
        let on_match = match item.get("on_match") {
            None => OnMatch::Fail,
            Some(v) => {
                let s = cx.string(v, &p.key("on_match"), "one of: fail, warn, info")?;
                match s {
                    "fail" => OnMatch::Fail,
                    "warn" => OnMatch::Warn,
                    "info" => OnMatch::Info,
                    _ => {
                        return Err(cx.schema(
                            v,
                            &p.key("on_match"),
                            format!("unknown on_match '{s}'"),
                            "one of: fail, warn, info",
                        ))
                    }
                }
            }
        };
        let required_for_pass = match item.get("required_for_pass") {
            None => false,
            Some(v) => cx.boolean(v, &p.key("required_for_pass"))?,
        };
        if required_for_pass && on_match != OnMatch::Fail {
            let v = item.get("required_for_pass").unwrap_or(item);
            return Err(cx.schema(
                v,
                &p.key("required_for_pass"),
                "required_for_pass is only allowed with on_match: fail",
                "drop required_for_pass or set on_match: fail",
            ));
        }
        out.push(CustomPattern {
            id: id.to_string(),
            regex: regex.to_string(),
            condition,
            on_match,
            required_for_pass,
        });
    }
    Ok(out)
}

/// Validates a condition with the sandbox's parser; the span points inside the string.
fn condition(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<String> {
    let help = "allowed: capture['name'], exit_code, walltime_sec, peak_vram_mib, float(), int(), len(), math.isnan(), math.isinf(), + - / //, comparisons, and/or/not, x if c else y";
    let s = cx.string(node, path, help)?;
    if let Err(e) = Condition::parse(s) {
        // Point inside the YAML scalar when it is written plainly; otherwise at the whole value.
        let raw = &cx.file.text()[node.span.clone()];
        let inner = raw.find(s).filter(|_| !s.is_empty()).map(|off| {
            let start = node.span.start + off + e.span.start.min(s.len());
            let end =
                node.span.start + off + e.span.end.min(s.len()).max(e.span.start.min(s.len()));
            start..end.max(start)
        });
        let at = Node::new(Value::Null, inner.unwrap_or_else(|| node.span.clone()));
        return Err(cx.schema(&at, path, e.message, help));
    }
    Ok(s.to_string())
}

/// `disable_detectors` / `disable_detector_tiers` lists.
pub(crate) fn disables(cx: &Ctx, root: &Node) -> Res<Disables> {
    let mut d = Disables::default();
    if let Some(n) = root.get("disable_detector_tiers") {
        let p = FieldPath::root().key("disable_detector_tiers");
        for (i, item) in cx
            .list(n, &p, "a list such as [tier2, tier3]")?
            .iter()
            .enumerate()
        {
            let s = cx.string(item, &p.index(i), "tier1 … tier5")?;
            let tier = Disables::parse_tier(s)
                .map_err(|e| cx.schema(item, &p.index(i), e.message, e.hint))?;
            d.add_tier(tier);
        }
    }
    if let Some(n) = root.get("disable_detectors") {
        let p = FieldPath::root().key("disable_detectors");
        for (i, item) in cx
            .list(n, &p, "a list such as [tier2:hang, custom:my_id]")?
            .iter()
            .enumerate()
        {
            let s = cx.string(item, &p.index(i), "'<tier>:<id>'")?;
            let id = Disables::parse_detector(s)
                .map_err(|e| cx.schema(item, &p.index(i), e.message, e.hint))?;
            d.add_detector(id);
        }
    }
    Ok(d)
}

/// `env_key: {include: [...], exclude: [...]}`: patterns checked with the probe's own rules, so
/// a pattern that loads here is one the key computation understands.
pub(crate) fn env_key(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<EnvKeyRules> {
    let help = "env_key: {include: [host.hostname], exclude: ['env_vars.NCCL_DEBUG*']}";
    let entries = cx.map(node, path, help)?;
    cx.only_keys(entries, path, &["include", "exclude"], "env_key")?;
    let mut rules = EnvKeyRules::default();
    for (name, slot) in [
        ("include", &mut rules.include),
        ("exclude", &mut rules.exclude),
    ] {
        let Some(list) = node.get(name) else { continue };
        let p = path.key(name);
        let items = cx.list(list, &p, help)?;
        for (i, item) in items.iter().enumerate() {
            let ip = p.index(i);
            let pat = cx.non_empty_string(
                item,
                &ip,
                "a dotted snapshot field path such as cuda.libraries.*.version",
            )?;
            aorta_fieldpattern::validate(pat).map_err(|e| {
                cx.schema(
                    item,
                    &ip,
                    e.to_string(),
                    "`aorta env key` lists the keyed fields and their paths",
                )
            })?;
            slot.push(pat.to_string());
        }
    }
    Ok(rules)
}
