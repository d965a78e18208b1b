//! Triage mode: the explicit `cells:` list, each resolved to concrete env vars.

use crate::blocks;
use crate::check::{Ctx, Res};
use crate::common::{check_explicit_baseline, common};
use crate::limits::{cell_settings_bytes, own_settings_past_limit, MAX_CELLS, SETTINGS_HELP};
use crate::model::*;
use crate::names::{inline_environment_name, valid_cell_name, RESERVED_CELL_NAMES};
use aorta_registry::Registry;
use aorta_source::{DiagKind, FieldPath, Node, Value};
use std::collections::BTreeMap;

const CELL_KEYS: &[&str] = crate::resources::with_resource_keys![
    "name",
    "mitigations",
    "environment",
    "extra_env",
    "trials",
    "steps",
    "workload_config",
    "collect",
];
const CELL_EXAMPLE: &str = "- {name: baseline, mitigations: [none], environment: local}";

pub(crate) fn triage(cx: &Ctx, root: &Node, registry: &Registry) -> Res<Recipe> {
    let top = FieldPath::root();
    let common = common(cx, root)?;
    let workload_node = root.get("workload").unwrap_or(root);
    let workload = cx
        .non_empty_string(
            workload_node,
            &top.key("workload"),
            "the workload to run, e.g. training",
        )?
        .to_string();
    let steps = cx.positive_u32(root.get("steps").unwrap_or(root), &top.key("steps"))?;
    let save_logs = match root.get("save_logs") {
        None => false,
        Some(n) => cx.boolean(n, &top.key("save_logs"))?,
    };
    let collect = match root.get("collect") {
        None => Collect::default(),
        Some(n) => blocks::collect(cx, n, &top.key("collect"))?,
    };
    let workload_config = match root.get("workload_config") {
        None => JsonMap::new(),
        Some(n) => blocks::workload_config(cx, n, &top.key("workload_config"))?,
    };
    let extra_env = extra_env(cx, root, &top)?;
    let trial_isolation = match root.get("trial_isolation") {
        None => TrialIsolation::Auto,
        Some(n) => {
            let p = top.key("trial_isolation");
            let words = format!("one of {}", TrialIsolation::WORDS.join(", "));
            let word = cx.string(n, &p, &words)?;
            TrialIsolation::parse(word).ok_or_else(|| {
                cx.schema(
                    n,
                    &p,
                    format!("unknown trial_isolation '{word}'"),
                    format!("{words} (aorta runs every trial as its own process)"),
                )
            })?
        }
    };
    let cells_node = root.get("cells").unwrap_or(root);
    let cp = top.key("cells");
    let items = cx.list(cells_node, &cp, CELL_EXAMPLE)?;
    if items.is_empty() {
        return Err(cx.schema(
            cells_node,
            &cp,
            "must be a non-empty list of cells",
            CELL_EXAMPLE,
        ));
    }
    if items.len() as u64 > MAX_CELLS {
        return Err(cx.err(
            DiagKind::Limit,
            cells_node,
            &cp,
            format!(
                "{} cells; a recipe may have at most {MAX_CELLS}",
                items.len()
            ),
            "split the sweep into several recipes; see \"Limits\" in docs/recipes.md",
        ));
    }
    let mut cells: Vec<Cell> = Vec::new();
    let mut name_nodes: Vec<&Node> = Vec::new();
    let mut by_name: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut inline: Vec<InlineEnvironment> = Vec::new();
    let mut own_settings = 0u64;
    for (i, item) in items.iter().enumerate() {
        let p = cp.index(i);
        let (cell, name_node) = cell(cx, item, &p, registry, &mut inline, &extra_env)?;
        own_settings += cell_settings_bytes(&cell);
        if let Some(message) = own_settings_past_limit(own_settings, i + 1) {
            return Err(cx.err(DiagKind::Limit, item, &p, message, SETTINGS_HELP));
        }
        if let Some(&j) = by_name.get(&cell.name) {
            return Err(Box::new(
                aorta_source::Diag::new(
                    DiagKind::Cell,
                    format!("duplicate cell name '{}'", cell.name),
                )
                .with_path(&p.key("name"))
                .at(cx.file, name_node.span.clone(), "second use")
                .also_at(name_nodes[j].span.clone(), "first defined here")
                .with_help("cell names must be unique: they become directory names"),
            ));
        }
        if common.stop_after.is_some() && cell.trials.is_some() {
            let t = item.get("trials").unwrap_or(item);
            return Err(cx.schema(
                t,
                &p.key("trials"),
                "a per-cell 'trials' override conflicts with stop_after",
                "stop_after.max_trials caps every cell; remove the cell's trials",
            ));
        }
        if common.auto.is_some() && cell.trials.is_some() {
            let t = item.get("trials").unwrap_or(item);
            return Err(cx.schema(
                t,
                &p.key("trials"),
                "a per-cell 'trials' override conflicts with trials: auto",
                "max_trials_per_cell caps every cell; remove the cell's trials",
            ));
        }
        name_nodes.push(name_node);
        by_name.insert(cell.name.clone(), cells.len());
        cells.push(cell);
    }
    let resolved_baseline = match &common.baseline_cell {
        Some((name, node)) => {
            check_explicit_baseline(cx, &cells, name, node)?;
            name.clone()
        }
        None => auto_baseline(&cells).ok_or_else(|| {
            cx.err(
                DiagKind::Cell,
                cells_node,
                &cp,
                "cannot choose a baseline cell: no cell is named 'baseline-*' or uses exactly [none]",
                "set confound.baseline_cell to the cell the others are compared against",
            )
        })?,
    };
    Ok(Recipe {
        source: None,
        mode: Mode::Triage,
        ticket: common.ticket,
        workload,
        trials: common.trials,
        steps,
        save_logs,
        workload_config,
        collect,
        extra_env,
        trial_isolation,
        confound: Confound {
            threshold: common.threshold,
            baseline_cell: common.baseline_cell.map(|(n, _)| n),
            resolved_baseline,
        },
        stop_after: common.stop_after,
        auto: common.auto,
        env_key: common.env_key,
        inputs: common.inputs,
        ignore_inputs: common.ignore_inputs,
        resources: common.resources,
        doctor: common.doctor,
        cells,
        inline_environments: inline,
        probe: None,
        registry_files: Vec::new(),
    })
}

/// AORTA §6.1.1: first `baseline-*` cell, then the first `[none]` cell, then a lone cell.
pub(crate) fn auto_baseline(cells: &[Cell]) -> Option<String> {
    cells
        .iter()
        .find(|c| c.name.starts_with("baseline-"))
        .or_else(|| cells.iter().find(|c| c.mitigations == ["none"]))
        .or_else(|| (cells.len() == 1).then(|| &cells[0]))
        .map(|c| c.name.clone())
}

fn cell<'n>(
    cx: &Ctx,
    item: &'n Node,
    p: &FieldPath,
    registry: &Registry,
    inline: &mut Vec<InlineEnvironment>,
    recipe_env: &BTreeMap<String, String>,
) -> Res<(Cell, &'n Node)> {
    let entries = cx.map(item, p, CELL_EXAMPLE)?;
    cx.only_keys(entries, p, CELL_KEYS, "a cell")?;
    for key in ["name", "mitigations", "environment"] {
        if item.get(key).is_none() {
            return Err(cx.schema(
                &Node::new(Value::Null, item.head_span()),
                p,
                format!("missing required key '{key}'"),
                format!("every cell needs name, mitigations and environment: {CELL_EXAMPLE}"),
            ));
        }
    }
    let name_node = item.get("name").unwrap_or(item);
    let name = cell_name(cx, name_node, &p.key("name"))?;
    let mit_node = item.get("mitigations").unwrap_or(item);
    let mp = p.key("mitigations");
    let mit_items = cx.list(
        mit_node,
        &mp,
        "a list of mitigation names, e.g. [none] or [tf32_off, xnack]",
    )?;
    if mit_items.is_empty() {
        return Err(cx.schema(
            mit_node,
            &mp,
            "must not be empty",
            "use ['none'] for the explicit baseline",
        ));
    }
    let named: Vec<(&Node, FieldPath)> = mit_items
        .iter()
        .enumerate()
        .map(|(i, n)| (n, mp.index(i)))
        .collect();
    let (mitigations, mut resolved_env, mut env_origin) =
        resolve_bundles(cx, &name, &named, registry)?;
    let environment = environment(
        cx,
        item.get("environment").unwrap_or(item),
        &p.key("environment"),
        registry,
        inline,
    )?;
    let extra_env = extra_env(cx, item, p)?;
    // The recipe's extra_env over the mitigations, the cell's own over both (AORTA 0.3.0).
    for (k, v) in recipe_env {
        resolved_env.insert(k.clone(), v.clone());
        env_origin.insert(k.clone(), "extra_env (recipe)".into());
    }
    for (k, v) in &extra_env {
        resolved_env.insert(k.clone(), v.clone());
        env_origin.insert(k.clone(), "extra_env".into());
    }
    let trials = item
        .get("trials")
        .map(|n| cx.positive_u32(n, &p.key("trials")))
        .transpose()?;
    let steps = item
        .get("steps")
        .map(|n| cx.positive_u32(n, &p.key("steps")))
        .transpose()?;
    let workload_config = item
        .get("workload_config")
        .map(|n| blocks::workload_config(cx, n, &p.key("workload_config")))
        .transpose()?;
    let collect = match item.get("collect") {
        None => None,
        Some(n) if n.is_null() => {
            return Err(cx.schema(
                n,
                &p.key("collect"),
                "must not be null",
                "omit it to inherit the recipe's collectors, or write [] to disable them",
            ));
        }
        Some(n) => Some(blocks::collect(cx, n, &p.key("collect"))?),
    };
    let cell = Cell {
        name,
        mitigations,
        environment,
        extra_env,
        trials,
        steps,
        workload_config,
        collect,
        resolved_env,
        env_origin,
        resources: crate::resources::resources(cx, item, p)?,
        sanitizer: None,
    };
    Ok((cell, name_node))
}

fn cell_name(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<String> {
    let help = "use letters, digits, '_', '.' and '-', starting with a letter, digit or '_'";
    let name = cx.non_empty_string(node, path, help)?;
    if RESERVED_CELL_NAMES.contains(&name) {
        return Err(cx.err(
            DiagKind::Cell,
            node,
            path,
            format!("cell name '{name}' is reserved"),
            "names become directories next to matrix.md and matrix.json; pick another",
        ));
    }
    if !valid_cell_name(name) {
        return Err(cx.err(
            DiagKind::Cell,
            node,
            path,
            format!("cell name '{name}' is not allowed: cell names become directory names"),
            help,
        ));
    }
    Ok(name.to_string())
}

/// Resolves mitigation names and stacks their env bundles in order; two bundles setting one
/// variable to different values is an error naming both.
pub(crate) type Bundles = (
    Vec<String>,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
);

pub(crate) fn resolve_bundles(
    cx: &Ctx,
    cell: &str,
    names: &[(&Node, FieldPath)],
    registry: &Registry,
) -> Res<Bundles> {
    let mut mitigations = Vec::new();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut origin: BTreeMap<String, String> = BTreeMap::new();
    let mut origin_node: BTreeMap<String, &Node> = BTreeMap::new();
    for (node, path) in names {
        let name = cx.string(
            node,
            path,
            "a mitigation name; `aorta mitigations list` shows them",
        )?;
        if let Some(s) = aorta_registry::Sanitizer::from_name(name) {
            return Err(cx.err(
                DiagKind::UnknownName,
                node,
                path,
                format!(
                    "'{name}' is a diagnostic, not a mitigation: it runs the command under {}",
                    s.vendor().tool_name()
                ),
                "put it on a probe recipe's diagnostic_axis (docs/diagnostics.md)",
            ));
        }
        let Some(m) = registry.mitigation(name) else {
            return Err(cx.err(
                DiagKind::UnknownName,
                node,
                path,
                format!("unknown mitigation '{name}'"),
                registry.unknown_mitigation_hint(name),
            ));
        };
        for (k, v) in &m.env {
            if let Some(prev) = env.get(k) {
                if prev != v {
                    let first = origin.get(k).cloned().unwrap_or_default();
                    let mut d = aorta_source::Diag::new(
                        DiagKind::Cell,
                        format!("cell '{cell}': mitigations '{first}' and '{name}' set {k} to different values ('{prev}' vs '{v}')"),
                    )
                    .with_path(path)
                    .at(cx.file, node.span.clone(), format!("sets {k}={v}"))
                    .with_help("stacked mitigations must agree; drop one of them or split them into two cells");
                    if let Some(n) = origin_node.get(k) {
                        d = d.also_at(n.span.clone(), format!("sets {k}={prev}"));
                    }
                    return Err(Box::new(d));
                }
                continue;
            }
            env.insert(k.clone(), v.clone());
            origin.insert(k.clone(), name.to_string());
            origin_node.insert(k.clone(), node);
        }
        mitigations.push(name.to_string());
    }
    Ok((mitigations, env, origin))
}

fn environment(
    cx: &Ctx,
    node: &Node,
    path: &FieldPath,
    registry: &Registry,
    inline: &mut Vec<InlineEnvironment>,
) -> Res<EnvironmentRef> {
    let help = "a registered environment name (`aorta environments list`) or {docker: <image ref>}";
    match &node.value {
        Value::Str(name) => {
            let Some(env) = registry.environment(name) else {
                return Err(cx.err(
                    DiagKind::UnknownName,
                    node,
                    path,
                    format!("unknown environment '{name}'"),
                    registry.unknown_environment_hint(name),
                ));
            };
            Ok(EnvironmentRef {
                name: env.name.clone(),
                docker: env.docker.clone(),
                venv: env.venv.clone(),
                buck_target: env.buck_target.clone(),
                inline: false,
            })
        }
        Value::Map(entries) => {
            cx.only_keys(entries, path, &["docker"], "an inline environment")?;
            let d = node
                .get("docker")
                .ok_or_else(|| cx.schema(node, path, "missing required key 'docker'", help))?;
            let docker = cx.non_empty_string(
                d,
                &path.key("docker"),
                "an image reference such as rocm/pytorch:latest",
            )?;
            let name = inline_environment_name(docker);
            match inline.iter().find(|e| e.name == name) {
                Some(e) if e.docker != docker => {
                    return Err(cx.schema(
                        d,
                        &path.key("docker"),
                        format!(
                            "inline images '{}' and '{docker}' hash to the same name {name}",
                            e.docker
                        ),
                        "register one of them in a sidecar file under its own name",
                    ));
                }
                Some(_) => {}
                None => inline.push(InlineEnvironment {
                    name: name.clone(),
                    docker: docker.to_string(),
                }),
            }
            Ok(EnvironmentRef {
                name,
                docker: Some(docker.to_string()),
                venv: None,
                buck_target: None,
                inline: true,
            })
        }
        _ => Err(cx.schema(
            node,
            path,
            format!(
                "must be an environment name or {{docker: ref}}, got {}",
                node.type_name()
            ),
            help,
        )),
    }
}

/// Env var maps: string values, POSIX names (`[A-Za-z_][A-Za-z0-9_]*`), no NUL bytes.
/// The `extra_env` of a recipe or a cell: absent or `null` is `{}`.
fn extra_env(cx: &Ctx, parent: &Node, path: &FieldPath) -> Res<BTreeMap<String, String>> {
    match parent.get("extra_env") {
        Some(n) if !n.is_null() => env_map(cx, n, &path.key("extra_env")),
        _ => Ok(BTreeMap::new()),
    }
}

pub(crate) fn env_map(cx: &Ctx, node: &Node, path: &FieldPath) -> Res<BTreeMap<String, String>> {
    let map = cx.string_map(
        node,
        path,
        "env vars as strings, e.g. {NCCL_DEBUG: \"INFO\"}",
    )?;
    // Each key's first entry, found once (a per-key search is quadratic in a wide map).
    let mut first: std::collections::HashMap<&str, (&Node, &Node)> =
        std::collections::HashMap::new();
    for (kn, vn) in node.as_map().unwrap_or_default() {
        if let Some(k) = kn.as_str() {
            first.entry(k).or_insert((kn, vn));
        }
    }
    for (k, v) in &map {
        let key_node = first.get(k.as_str()).copied();
        if !aorta_registry::is_posix_env_name(k) {
            let n = key_node.map_or(node, |(kn, _)| kn);
            return Err(cx.schema(
                n,
                &path.key(k),
                format!("'{k}' is not a valid environment variable name"),
                "names are letters, digits and '_', not starting with a digit",
            ));
        }
        if v.contains('\0') {
            let n = key_node.map_or(node, |(_, vn)| vn);
            return Err(cx.schema(
                n,
                &path.key(k),
                "value contains a NUL byte",
                "environment values cannot hold NUL",
            ));
        }
    }
    Ok(map)
}
