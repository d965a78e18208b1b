//! `aorta run --workload NAME --trials N --steps S`: one workload, one cell, no matrix to read.
//! The cell is built as a JSON recipe and goes through the same loader, so every rule applies.

use crate::args::RunArgs;
use crate::exit::{usage, CliResult};
use aorta_engine::{RecipeOrigin, TargetSpec};
use aorta_registry::Registry;
use aorta_source::{SourceFile, Syntax};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(a: &RunArgs) -> CliResult {
    let mitigations: Vec<&str> = a
        .mitigations
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let mitigations = if mitigations.is_empty() {
        vec!["none"]
    } else {
        mitigations
    };
    let mut extra_env = serde_json::Map::new();
    for pair in a
        .extra_env
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(usage(
                format!("--extra-env: '{pair}' is not K=V"),
                "e.g. --extra-env NCCL_DEBUG=INFO,CUDA_LAUNCH_BLOCKING=1",
            ));
        };
        extra_env.insert(k.trim().to_string(), v.to_string().into());
    }
    let config: serde_json::Value = match &a.config {
        Some(text) => serde_json::from_str(text).map_err(|e| {
            usage(
                format!("--config is not JSON: {e}"),
                "e.g. --config '{\"model\": \"mlp\"}'",
            )
        })?,
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
    let text = serde_json::to_string_pretty(&recipe_json)
        .map_err(|e| crate::exit::infra(format!("cannot encode the recipe: {e}")))?;
    let file = SourceFile::new("<aorta run flags>", text);
    let registry = Registry::load(None, &a.mitigations_files)?;
    let recipe = aorta_recipe::parse_recipe(&file, Syntax::Json, &registry)?;
    let mut exec = a.exec.clone();
    if exec.output.is_none() {
        exec.output = Some(
            a.results_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("results")),
        );
    }
    let session = exec.session()?;
    let id = session.add_target(TargetSpec {
        label: None,
        origin: RecipeOrigin::Given(Arc::new(recipe)),
        argv: None,
    });
    let c = session.compile(id)?;
    if let Some(Err(e)) = &c.workload {
        return Err(crate::exit::CliError { code: crate::exit::INFRASTRUCTURE, ..usage(format!("the workload could not run: {e}"), "see docs/workload-protocol.md for where workloads are looked up; `aorta run --workload example` runs the one shipped next to aorta") });
    }
    let out = crate::execute::build(&session, &c, a.verbose)?;
    if out.cancelled {
        return Ok(crate::execute::report(&out, c.recipe.mode, exec.strict));
    }
    let (passed, total) = out
        .cells
        .first()
        .map_or((0, 0), |cell| (cell.passed, cell.trials));
    let cached = format!(
        "({} executed, {} reused from the cache)",
        out.executed, out.reused
    );
    if passed == total && total > 0 {
        println!(
            "All {total} trial(s) passed. Results in: {}",
            out.run_dir.display()
        );
        println!("{cached}");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{}/{total} trials failed. Results in: {}",
            total - passed,
            out.run_dir.display()
        );
        println!("{cached}");
        Ok(ExitCode::from(crate::exit::INCOMPLETE))
    }
}
