//! `aorta run --workload NAME --trials N --steps S`: one workload, one cell, no matrix to read.
//! The cell is built as a JSON recipe and goes through the same loader, so every rule applies.

use crate::args::RunArgs;
use crate::cmd_sweep::usage;
use aorta_registry::Registry;
use aorta_source::{SourceFile, Syntax};
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(a: &RunArgs) -> miette::Result<ExitCode> {
    let mitigations: Vec<&str> = a.mitigations.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let mitigations = if mitigations.is_empty() { vec!["none"] } else { mitigations };
    let mut extra_env = serde_json::Map::new();
    for pair in a.extra_env.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(usage(format!("--extra-env: '{pair}' is not K=V"), "e.g. --extra-env NCCL_DEBUG=INFO,CUDA_LAUNCH_BLOCKING=1"));
        };
        extra_env.insert(k.trim().to_string(), v.to_string().into());
    }
    let config: serde_json::Value = match &a.config {
        Some(text) => serde_json::from_str(text).map_err(|e| usage(format!("--config is not JSON: {e}"), "e.g. --config '{\"model\": \"mlp\"}'"))?,
        None => serde_json::json!({}),
    };
    let steps = a.steps.unwrap_or(1);
    let recipe_json = serde_json::json!({
        "schema_version": 1,
        "workload": a.workload,
        "trials": a.trials,
        "steps": steps,
        "workload_config": config,
        "cells": [{"name": "run", "mitigations": mitigations, "environment": a.environment, "extra_env": extra_env}],
    });
    let file = SourceFile::new("<aorta run flags>", serde_json::to_string_pretty(&recipe_json).unwrap_or_default());
    let registry = Registry::load(None, &a.mitigations_files).map_err(|d| miette::Report::new(*d))?;
    let recipe = aorta_recipe::parse_recipe(&file, Syntax::Json, &registry).map_err(|d| miette::Report::new(*d))?;
    let mut exec = a.exec.clone();
    if exec.output.is_none() {
        exec.output = Some(a.results_dir.clone().unwrap_or_else(|| PathBuf::from("results")));
    }
    let out = crate::cmd_exec::execute(&recipe, None, &exec, a.verbose)?;
    if out.cancelled {
        return Ok(crate::cmd_exec::report(&out, recipe.mode));
    }
    let records = std::fs::read_to_string(out.run_dir.join("matrix.json")).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let cell = records.as_ref().and_then(|m| m["cells"].get(0).cloned()).unwrap_or_default();
    if let Some(err) = cell["error"].as_str() {
        return Err(usage(format!("the workload could not run: {err}"), "see docs/workload-protocol.md for where workloads are looked up"));
    }
    let passed = cell["passed_count"].as_u64().unwrap_or(0);
    let total = cell["trials"].as_u64().unwrap_or(0);
    if passed == total && total > 0 {
        println!("All {total} trial(s) passed. Results in: {}", out.run_dir.display());
        println!("({} executed, {} reused from the cache)", out.executed, out.reused);
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{}/{total} trials failed. Results in: {}", total - passed, out.run_dir.display());
        println!("({} executed, {} reused from the cache)", out.executed, out.reused);
        Ok(ExitCode::from(crate::EXIT_FAILURE))
    }
}
