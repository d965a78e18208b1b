//! recipe.resolved.yaml: the recipe this run executed, with every default spelled out, in a
//! form `aorta_recipe::parse_recipe` reloads into an equal `Recipe`.
//!
//! AORTA wrote probe runs through its triage serializer (§12.1.1), dropping `mode`, the axes
//! and every classifier knob, so the file could neither rerun the probe nor tell the bundler
//! what to redact. Here each mode is written in its own shape. Registered mitigation and
//! environment names stay names (their values are in matrix.json's `resolved_env_vars`);
//! inline docker environments are written back as `{docker: <ref>}` so the same
//! `_inline_<hex>` name re-derives. The recipe's own `baseline_cell` is written only when the
//! recipe set one: the automatic choice is re-derived by the same rule on reload.

use crate::yaml::{render, Y};
use aorta_recipe::{Cell, Collect, CustomPattern, Mode, OnMatch, Recipe, RetainLevel};

/// The text of recipe.resolved.yaml.
pub fn resolved_recipe_yaml(recipe: &Recipe) -> String {
    let mut out = String::from(
        "# Resolved by aorta: the recipe this run executed, every default explicit.\n",
    );
    if let Some(src) = &recipe.source {
        out.push_str(&format!(
            "# Source: {} (blake3:{})\n",
            src.path.display().to_string().replace(['\n', '\r'], " "),
            src.blake3
        ));
    }
    out.push_str(&format!(
        "# Baseline cell (as chosen at load): {}\n",
        recipe.confound.resolved_baseline
    ));
    let entries = match recipe.mode {
        Mode::Triage => triage(recipe),
        Mode::Probe => probe(recipe),
    };
    out.push_str(&render(&entries));
    out
}

fn kv(k: &str, v: Y) -> (String, Y) {
    (k.to_string(), v)
}

fn triage(r: &Recipe) -> Vec<(String, Y)> {
    let mut e = vec![
        kv("schema_version", Y::int(aorta_recipe::SCHEMA_VERSION)),
        kv("mode", Y::str("triage")),
        kv("workload", Y::str(&r.workload)),
    ];
    trials(r, &mut e);
    e.push(kv("steps", Y::int(r.steps)));
    if let Some(t) = &r.ticket {
        e.push(kv("ticket", Y::str(t)));
    }
    e.push(kv("save_logs", Y::bool(r.save_logs)));
    if !r.workload_config.is_empty() {
        e.push(kv(
            "workload_config",
            Y::json(&serde_json::Value::Object(r.workload_config.clone())),
        ));
    }
    if !r.collect.is_empty() {
        e.push(kv("collect", collect(&r.collect)));
    }
    if !r.extra_env.is_empty() {
        e.push(kv("extra_env", env_map(&r.extra_env)));
    }
    if r.trial_isolation != aorta_recipe::TrialIsolation::Auto {
        e.push(kv("trial_isolation", Y::str(r.trial_isolation.as_str())));
    }
    e.push(kv("confound", confound(r)));
    stop_after(r, &mut e);
    doctor(r, &mut e);
    e.push(kv("cells", Y::Seq(r.cells.iter().map(cell).collect())));
    e
}

fn env_map(m: &std::collections::BTreeMap<String, String>) -> Y {
    Y::Map(m.iter().map(|(k, v)| (k.clone(), Y::str(v))).collect())
}

fn cell(c: &Cell) -> Y {
    let mut e = vec![
        kv("name", Y::str(&c.name)),
        kv("mitigations", Y::strs(&c.mitigations)),
    ];
    let env = if c.environment.inline {
        Y::Map(vec![kv(
            "docker",
            Y::str(c.environment.docker.as_deref().unwrap_or_default()),
        )])
    } else {
        Y::str(&c.environment.name)
    };
    e.push(kv("environment", env));
    if !c.extra_env.is_empty() {
        e.push(kv("extra_env", env_map(&c.extra_env)));
    }
    if let Some(t) = c.trials {
        e.push(kv("trials", Y::int(t)));
    }
    if let Some(s) = c.steps {
        e.push(kv("steps", Y::int(s)));
    }
    if let Some(wc) = &c.workload_config {
        e.push(kv(
            "workload_config",
            Y::json(&serde_json::Value::Object(wc.clone())),
        ));
    }
    if let Some(col) = &c.collect {
        e.push(kv("collect", collect(col)));
    }
    Y::Map(e)
}

/// A list when no collector has options (so `[]` round-trips), else a mapping with `null`
/// for option-less collectors.
fn collect(c: &Collect) -> Y {
    if c.collectors.iter().all(|(_, o)| o.is_empty()) {
        return Y::strs(c.names());
    }
    Y::Map(
        c.collectors
            .iter()
            .map(|(n, o)| {
                let v = if o.is_empty() {
                    Y::null()
                } else {
                    Y::Map(o.iter().map(|(k, v)| (k.clone(), Y::str(v))).collect())
                };
                (n.clone(), v)
            })
            .collect(),
    )
}

fn confound(r: &Recipe) -> Y {
    let mut e = vec![kv("threshold", Y::float(r.confound.threshold))];
    if let Some(b) = &r.confound.baseline_cell {
        e.push(kv("baseline_cell", Y::str(b)));
    }
    Y::Map(e)
}

/// `trials: N`, or `trials: auto` with its settings (top-level keys, as written).
fn trials(r: &Recipe, e: &mut Vec<(String, Y)>) {
    let Some(a) = r.auto else {
        e.push(kv("trials", Y::int(r.trials)));
        return;
    };
    e.push(kv("trials", Y::str("auto")));
    e.push(kv("max_trials_per_cell", Y::int(a.max_trials_per_cell)));
    e.push(kv("confidence", Y::float(a.confidence)));
    if let Some(w) = a.max_walltime_sec {
        e.push(kv("max_walltime", Y::float(w)));
    }
    if let Some(g) = a.max_gpu_hours {
        e.push(kv("max_gpu_hours", Y::float(g)));
    }
    if let Some(m) = a.comparisons {
        e.push(kv("comparisons", Y::int(m)));
    }
}

fn doctor(r: &Recipe, e: &mut Vec<(String, Y)>) {
    if let Some(l) = r.doctor {
        e.push(kv("doctor", Y::str(l.as_str())));
    }
}

fn stop_after(r: &Recipe, e: &mut Vec<(String, Y)>) {
    if let Some(s) = r.stop_after {
        e.push(kv(
            "stop_after",
            Y::Map(vec![
                kv("events", Y::int(s.events)),
                kv("max_trials", Y::int(s.max_trials)),
                kv("event_verdict", Y::str(s.event_verdict.as_str())),
            ]),
        ));
    }
}

fn probe(r: &Recipe) -> Vec<(String, Y)> {
    let mut e = vec![
        kv("schema_version", Y::int(aorta_recipe::SCHEMA_VERSION)),
        kv("mode", Y::str("probe")),
    ];
    if let Some(t) = &r.ticket {
        e.push(kv("ticket", Y::str(t)));
    }
    trials(r, &mut e);
    let Some(p) = &r.probe else {
        // A probe recipe always has probe settings; without them only the shared keys exist.
        e.push(kv("confound", confound(r)));
        return e;
    };
    e.push(kv("mitigation_axis", Y::strs(&p.mitigation_axis)));
    e.push(kv("diagnostic_axis", Y::strs(&p.diagnostic_axis)));
    e.push(kv(
        "step_time_regex",
        p.step_time_regex.as_deref().map_or_else(Y::null, Y::str),
    ));
    e.push(kv("collect_paths", Y::strs(&p.collect_paths)));
    e.push(kv(
        "timeout_per_trial",
        p.timeout_per_trial.map_or_else(Y::null, Y::float),
    ));
    e.push(kv(
        "env_passthrough_mode",
        Y::str(p.env_passthrough_mode.as_str()),
    ));
    e.push(kv("hang_window_sec", Y::float(p.hang_window_sec)));
    e.push(kv(
        "hang_grace_period_at_start",
        Y::float(p.hang_grace_period_at_start),
    ));
    e.push(kv("tier3_vram_growth", Y::bool(p.tier3_vram_growth)));
    if !p.custom_patterns.is_empty() {
        e.push(kv(
            "custom_patterns",
            Y::Seq(p.custom_patterns.iter().map(pattern).collect()),
        ));
    }
    e.push(kv(
        "disable_detector_tiers",
        Y::strs(p.disables.tiers.iter().map(|t| t.name())),
    ));
    e.push(kv("disable_detectors", Y::strs(&p.disables.detectors)));
    if let Some(rt) = p.retain {
        let lvl = |l: RetainLevel| {
            Y::str(match l {
                RetainLevel::Full => "full",
                RetainLevel::Summary => "summary",
                RetainLevel::Log => "log",
                RetainLevel::None => "none",
            })
        };
        e.push(kv(
            "retain",
            Y::Map(vec![
                kv("on_fail", lvl(rt.on_fail)),
                kv("on_pass", lvl(rt.on_pass)),
                kv("on_error", lvl(rt.on_error)),
            ]),
        ));
    }
    if let Some(red) = &p.redaction {
        e.push(kv(
            "redaction",
            Y::Map(vec![
                kv("scrub_env_keys", Y::strs(&red.scrub_env_keys)),
                kv("scrub_paths", Y::bool(red.scrub_paths)),
                kv("scrub_ip_addresses", Y::bool(red.scrub_ip_addresses)),
            ]),
        ));
    }
    e.push(kv("confound", confound(r)));
    stop_after(r, &mut e);
    doctor(r, &mut e);
    e
}

fn pattern(c: &CustomPattern) -> Y {
    let mut m = vec![kv("regex", Y::str(&c.regex))];
    if let Some(cond) = &c.condition {
        m.push(kv("condition", Y::str(cond)));
    }
    let on_match = match c.on_match {
        OnMatch::Fail => "fail",
        OnMatch::Warn => "warn",
        OnMatch::Info => "info",
    };
    Y::Map(vec![
        kv("id", Y::str(&c.id)),
        kv("match", Y::Map(m)),
        kv("on_match", Y::str(on_match)),
        kv("required_for_pass", Y::bool(c.required_for_pass)),
    ])
}
