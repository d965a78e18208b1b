//! Text rendering of a [`Plan`]. The first lines follow AORTA 0.2.1's dry-run output so its
//! users recognise it; the per-cell blocks add what AORTA never showed (env origins, key inputs).

use crate::Plan;
use aorta_recipe::Mode;
use std::fmt::Write;

fn json_inline(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn py_list(items: &[String]) -> String {
    let inner: Vec<String> = items
        .iter()
        .map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", inner.join(", "))
}

impl Plan {
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let ticket = self.ticket.as_deref().unwrap_or("(none)");
        let _ = match self.mode {
            Mode::Probe => writeln!(
                out,
                "Dry run (probe): ticket={ticket} cells={} trials/cell={}",
                self.cells.len(),
                self.cells.first().map_or(0, |c| c.trials)
            ),
            Mode::Triage => writeln!(out, "Dry run: {} / ticket={ticket}", self.workload),
        };
        if let Some(label) = &self.label {
            let _ = writeln!(out, "Target: {label}");
        }
        if let Some(p) = &self.recipe_path {
            let _ = writeln!(
                out,
                "Recipe: {} (blake3 {})",
                p.display(),
                self.recipe_blake3.as_deref().map_or("", |h| &h[..16])
            );
        }
        for f in &self.registry_files {
            let _ = writeln!(out, "Registry file: {}", f.display());
        }
        if self.mode == Mode::Probe {
            match &self.argv {
                Some(a) => {
                    let _ = writeln!(out, "Argv (forwarded byte-for-byte): {}", py_list(a));
                }
                None => {
                    let _ = writeln!(out, "Argv: (none yet: give the command after --)");
                }
            }
            if let Some(m) = self.env_passthrough_mode {
                let _ = writeln!(out, "Env-passthrough mode: {}", m.as_str());
            }
            let timeout = self
                .timeout_per_trial
                .map_or("none".to_string(), |t| format!("{t} s"));
            let _ = writeln!(out, "Timeout per trial: {timeout}");
            let disabled: Vec<String> = self
                .disabled_tiers
                .iter()
                .chain(&self.disabled_detectors)
                .cloned()
                .collect();
            if !disabled.is_empty() {
                let _ = writeln!(out, "Disabled detectors: {}", disabled.join(", "));
            }
        } else if !self.recipe_workload_config.is_empty() {
            let _ = writeln!(
                out,
                "Recipe workload_config: {}",
                json_inline(&serde_json::Value::Object(
                    self.recipe_workload_config.clone()
                ))
            );
        }
        if let Some(s) = self.stop_after {
            let _ = writeln!(
                out,
                "Stop after: {} {} trial(s), up to {} per cell",
                s.events,
                s.event_verdict.as_str(),
                s.max_trials
            );
        }
        if let Some(a) = &self.auto {
            let mut budget = Vec::new();
            if let Some(w) = a.max_walltime_sec {
                budget.push(format!("{w} s of wall time"));
            }
            if let Some(g) = a.max_gpu_hours {
                budget.push(format!("{g} GPU-hours"));
            }
            let _ = writeln!(
                out,
                "Trials: auto: each cell until decided at {} confidence, at most {} (the counts below are caps){}",
                a.confidence,
                a.max_trials_per_cell,
                if budget.is_empty() {
                    String::new()
                } else {
                    format!("; budget {}", budget.join(", "))
                }
            );
        }
        let _ = writeln!(
            out,
            "Cells ({}), {} trial(s) in all:",
            self.cells.len(),
            self.total_trials
        );
        for c in &self.cells {
            let mut line = format!(
                "  - {}: mitigations={} environment={} trials={} steps={}",
                c.name,
                py_list(&c.mitigations),
                c.environment.name,
                if self.stop_after.is_some() {
                    format!("up to {}", c.trials)
                } else {
                    c.trials.to_string()
                },
                c.steps
            );
            if c.workload_config_overridden {
                let _ = write!(
                    line,
                    " workload_config={}",
                    json_inline(&serde_json::Value::Object(c.workload_config.clone()))
                );
            }
            if !c.collect.is_empty() || c.collect_overridden {
                let _ = write!(
                    line,
                    " collect={}{}",
                    py_list(&c.collect),
                    if c.collect_overridden {
                        " (cell override)"
                    } else {
                        ""
                    }
                );
            }
            let _ = writeln!(out, "{line}");
            if !c.resources.is_empty() {
                let _ = writeln!(
                    out,
                    "      resources (not in the key): {}",
                    resources_line(&c.resources)
                );
            }
            if let Some(t) = c.sanitizer {
                let _ = writeln!(
                    out,
                    "      runs under: {} (timeout and hang window x{})",
                    t.runs_under(),
                    aorta_registry::SANITIZER_TIMEOUT_FACTOR
                );
            }
            if c.env.is_empty() {
                let _ = writeln!(out, "      env: (no env)");
            }
            for e in &c.env {
                let _ = writeln!(out, "      env: {}={}  [{}]", e.key, e.value, e.origin);
            }
            let k = &c.key_inputs;
            let _ = writeln!(
                out,
                "      key inputs: {} config={} env={} environment=({})",
                k.workload_identity, k.config_blake3, k.env_blake3, k.environment
            );
            let shown: Vec<String> = k
                .trial_keys
                .iter()
                .take(3)
                .enumerate()
                .map(|(i, key)| format!("{i}:{}", &key[..12.min(key.len())]))
                .collect();
            let more = if k.trial_keys.len() > 3 {
                format!(" … ({} in all)", k.trial_keys.len())
            } else {
                String::new()
            };
            let _ = writeln!(out, "      trial keys: {}{more}", shown.join(" "));
        }
        if !self.inline_environments.is_empty() {
            let _ = writeln!(out, "Inline docker environments:");
            for (name, r) in &self.inline_environments {
                let _ = writeln!(out, "  - {name} -> {r}");
            }
        }
        let rule = if self.baseline_explicit {
            self.baseline_cell.clone()
        } else {
            format!("{} (auto)", self.baseline_cell)
        };
        let _ = writeln!(out, "Baseline rule: {rule}");
        let _ = writeln!(out, "Confound threshold: {}", self.confound_threshold);
        let _ = writeln!(
            out,
            "Every trial key hashes: key schema v{}, workload identity, effective workload config, the cell's resolved env vars, the environment descriptor, the environment snapshot key ({}), and the trial index.",
            crate::KEY_SCHEMA_VERSION,
            self.cells.first().map_or("", |c| &c.key_inputs.env_snapshot[..12.min(c.key_inputs.env_snapshot.len())])
        );
        out
    }
}

/// `gpus_per_trial=2 partition=gpu ...`: the set resource keys in recipe order.
fn resources_line(r: &aorta_recipe::Resources) -> String {
    let mut parts = Vec::new();
    if let Some(g) = r.gpus_per_trial {
        parts.push(format!("gpus_per_trial={g}"));
    }
    if let Some(c) = r.cpus_per_trial {
        parts.push(format!("cpus_per_trial={c}"));
    }
    if let Some(m) = &r.mem_per_trial {
        parts.push(format!("mem_per_trial={m}"));
    }
    if let Some(t) = r.time_limit_secs {
        parts.push(format!("time_limit={t}s"));
    }
    for (k, v) in [
        ("partition", &r.partition),
        ("account", &r.account),
        ("constraint", &r.constraint),
    ] {
        if let Some(v) = v {
            parts.push(format!("{k}={v}"));
        }
    }
    if let Some(a) = &r.sbatch_args {
        parts.push(format!("sbatch_args={}", py_list(a)));
    }
    parts.join(" ")
}
