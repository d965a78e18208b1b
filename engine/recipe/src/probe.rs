//! Probe mode: cells are `mitigation_axis × diagnostic_axis`, named `<m>-<d>`, and the trial
//! body is the user's command judged by the classifier.

use crate::blocks;
use crate::cells::resolve_bundles;
use crate::check::{Ctx, Res};
use crate::common::{check_explicit_baseline, common};
use crate::limits::{cell_settings_bytes, own_settings_past_limit, MAX_CELLS, SETTINGS_HELP};
use crate::model::*;
use crate::names::segment;
use aorta_registry::Registry;
use aorta_source::{Diag, DiagKind, FieldPath, Node};

pub(crate) fn probe(cx: &Ctx, root: &Node, registry: &Registry) -> Res<Recipe> {
    let top = FieldPath::root();
    let common = common(cx, root)?;
    // Kernel profilers wrap the command (ncu) or hook its Python (torch_profiler). AORTA
    // 0.3.0's ROCm collectors (rocprof, proton) are not wrapped yet: said, never skipped.
    let collect = match root.get("collect") {
        None => Collect::default(),
        Some(n) => {
            let p = top.key("collect");
            if let Some(rocm) = blocks::collect(cx, n, &p).ok().and_then(|c| {
                c.names()
                    .into_iter()
                    .find(|n| !blocks::PROBE_COLLECTORS.contains(n))
                    .map(str::to_owned)
            }) {
                return Err(cx.schema(
                    n,
                    &p,
                    format!("collector '{rocm}' is not supported in a probe recipe: aorta wraps the command only in ncu or torch_profiler"),
                    "use collect: [ncu] or [torch_profiler], or put the profiler in the command itself, e.g. -- rocprofv3 --kernel-trace -- python train.py",
                ));
            }
            blocks::collect_of(cx, n, &p, blocks::PROBE_COLLECTORS)?
        }
    };
    let m_axis = axis(cx, root, "mitigation_axis")?;
    let d_axis = axis(cx, root, "diagnostic_axis")?;
    let n_cells = m_axis.len() as u64 * d_axis.len() as u64;
    if n_cells > MAX_CELLS {
        let p = top.key("mitigation_axis");
        return Err(cx.err(
            DiagKind::Limit,
            root.get("mitigation_axis").unwrap_or(root),
            &p,
            format!("mitigation_axis × diagnostic_axis makes {} × {} = {n_cells} cells; a recipe may have at most {MAX_CELLS}", m_axis.len(), d_axis.len()),
            "shorten an axis, or split the sweep into several recipes; see \"Limits\" in docs/recipes.md",
        ));
    }
    let mut cells: Vec<Cell> = Vec::new();
    let mut origins: Vec<(String, String)> = Vec::new();
    let mut by_name: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut own_settings = 0u64;
    for (m_node, m_path) in &m_axis {
        for (d_node, d_path) in &d_axis {
            let m = cx.string(m_node, m_path, "a mitigation name")?;
            let d = cx.string(d_node, d_path, "a mitigation name")?;
            let name = format!("{}-{}", segment(m), segment(d));
            // A sanitizer on the diagnostic axis sets no variables: it runs the command.
            let sanitizer = aorta_registry::Sanitizer::from_name(d);
            if sanitizer.is_none() && registry.mitigation(d).is_none() {
                return Err(cx.err(
                    DiagKind::UnknownName,
                    d_node,
                    d_path,
                    format!("unknown mitigation '{d}'"),
                    registry.unknown_diagnostic_hint(d),
                ));
            }
            let pairs = [(*m_node, m_path.clone()), (*d_node, d_path.clone())];
            let bundles = if sanitizer.is_some() {
                &pairs[..1]
            } else {
                &pairs[..]
            };
            let (mut mitigations, resolved_env, env_origin) =
                resolve_bundles(cx, &name, bundles, registry)?;
            if sanitizer.is_some() {
                mitigations.push(d.to_string());
            }
            if let Some((pm, pd)) = by_name.get(&name).map(|&j| origins[j].clone()) {
                return Err(Box::new(
                    Diag::new(DiagKind::Cell, format!("axis values ({m}, {d}) and ({pm}, {pd}) both make the cell name '{name}'"))
                        .with_path(m_path)
                        .at(cx.file, m_node.span.clone(), "")
                        .with_help("cell names replace characters outside [A-Za-z0-9_.-] with '_'; rename one mitigation"),
                ));
            }
            origins.push((m.to_string(), d.to_string()));
            by_name.insert(name.clone(), cells.len());
            let cell = Cell {
                name,
                mitigations,
                environment: EnvironmentRef {
                    name: "local".into(),
                    docker: None,
                    venv: None,
                    buck_target: None,
                    inline: false,
                },
                extra_env: Default::default(),
                trials: None,
                steps: None,
                workload_config: None,
                collect: None,
                resolved_env,
                env_origin,
                resources: Resources::default(),
                sanitizer,
            };
            own_settings += cell_settings_bytes(&cell);
            if let Some(message) = own_settings_past_limit(own_settings, cells.len() + 1) {
                return Err(cx.err(DiagKind::Limit, m_node, m_path, message, SETTINGS_HELP));
            }
            cells.push(cell);
        }
    }
    let resolved_baseline = match &common.baseline_cell {
        Some((name, node)) => {
            check_explicit_baseline(cx, &cells, name, node)?;
            name.clone()
        }
        None => cells
            .iter()
            .find(|c| c.mitigations.iter().all(|m| m == "none"))
            .unwrap_or(&cells[0])
            .name
            .clone(),
    };
    let step_time_regex = match root.get("step_time_regex") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => {
            let p = top.key("step_time_regex");
            let s = cx.string(
                n,
                &p,
                "a regex with one group capturing the step time in ms",
            )?;
            blocks::compile_regex(s).map_err(|e| {
                cx.schema(
                    n,
                    &p,
                    format!("regex does not compile: {e}"),
                    "Python `re` syntax",
                )
            })?;
            Some(s.to_string())
        }
    };
    let collect_paths = match root.get("collect_paths") {
        None => Vec::new(),
        Some(n) => cx.string_list(
            n,
            &top.key("collect_paths"),
            "a list of paths to collect after each trial",
        )?,
    };
    let timeout_per_trial = match root.get("timeout_per_trial") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => Some(cx.positive_number(n, &top.key("timeout_per_trial"))?),
    };
    let env_passthrough_mode = match root.get("env_passthrough_mode") {
        None => PassthroughMode::Inherit,
        Some(n) if n.is_null() => PassthroughMode::Inherit,
        Some(n) => {
            let p = top.key("env_passthrough_mode");
            let s = cx.string(n, &p, "inherit or file")?;
            PassthroughMode::parse(s).ok_or_else(|| {
                cx.schema(
                    n,
                    &p,
                    format!("unknown mode '{s}'"),
                    "inherit (default) or file",
                )
            })?
        }
    };
    let custom_patterns = match root.get("custom_patterns") {
        None => Vec::new(),
        Some(n) => blocks::custom_patterns(cx, n, &top.key("custom_patterns"))?,
    };
    let hang_window_sec = match root.get("hang_window_sec") {
        None => 30.0,
        Some(n) => cx.positive_number(n, &top.key("hang_window_sec"))?,
    };
    let hang_grace_period_at_start = match root.get("hang_grace_period_at_start") {
        None => 60.0,
        Some(n) => {
            let p = top.key("hang_grace_period_at_start");
            let v = cx.number(n, &p)?;
            if v < 0.0 || !v.is_finite() {
                return Err(cx.schema(
                    n,
                    &p,
                    format!("must be a number >= 0, got {}", n.repr()),
                    "0 means no grace period",
                ));
            }
            v
        }
    };
    let tier3_vram_growth = match root.get("tier3_vram_growth") {
        None => true,
        Some(n) => cx.boolean(n, &top.key("tier3_vram_growth"))?,
    };
    let disables = blocks::disables(cx, root)?;
    let retain = root
        .get("retain")
        .map(|n| blocks::retain(cx, n, &top.key("retain")))
        .transpose()?;
    let redaction = root
        .get("redaction")
        .map(|n| blocks::redaction(cx, n, &top.key("redaction")))
        .transpose()?;
    let probe = ProbeSettings {
        mitigation_axis: names(&m_axis),
        diagnostic_axis: names(&d_axis),
        step_time_regex,
        collect_paths,
        timeout_per_trial,
        env_passthrough_mode,
        custom_patterns,
        hang_window_sec,
        hang_grace_period_at_start,
        tier3_vram_growth,
        disables,
        retain,
        redaction,
    };
    Ok(Recipe {
        source: None,
        mode: Mode::Probe,
        ticket: common.ticket,
        workload: "_subprocess".into(),
        trials: common.trials,
        steps: 1,
        save_logs: false,
        workload_config: JsonMap::new(),
        collect,
        extra_env: Default::default(),
        trial_isolation: TrialIsolation::Auto,
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
        inline_environments: Vec::new(),
        probe: Some(probe),
        registry_files: Vec::new(),
    })
}

fn axis<'n>(cx: &Ctx, root: &'n Node, key: &str) -> Res<Vec<(&'n Node, FieldPath)>> {
    let p = FieldPath::root().key(key);
    let node = root.get(key).unwrap_or(root);
    let items = cx.list(
        node,
        &p,
        "a list of mitigation names, e.g. [none, tf32_off]",
    )?;
    if items.is_empty() {
        return Err(cx.schema(
            node,
            &p,
            "must be a non-empty list",
            "include 'none' for the unmitigated baseline",
        ));
    }
    for (i, n) in items.iter().enumerate() {
        cx.string(n, &p.index(i), "a mitigation name")?;
    }
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, n)| (n, p.index(i)))
        .collect())
}

fn names(axis: &[(&Node, FieldPath)]) -> Vec<String> {
    axis.iter()
        .filter_map(|(n, _)| n.as_str().map(str::to_string))
        .collect()
}
