//! `aorta build LABEL…`: resolve Buck-style labels through recipes/BUCK (starlark), load each
//! recipe with its target's sidecars, and print the plan.

use crate::args::BuildArgs;
use crate::cmd_sweep::usage;
use aorta_plan::Plan;
use aorta_recipe::{load_recipe, Mode};
use std::process::ExitCode;

pub fn build(a: &BuildArgs) -> miette::Result<ExitCode> {
    if a.watch {
        return crate::cmd_watch::watch(a);
    }
    let cwd = std::env::current_dir().map_err(|e| miette::miette!("cannot read the current directory: {e}"))?;
    let root = aorta_labels::find_workspace_root(&cwd);
    let mut plans = Vec::new();
    let mut runs: Vec<(aorta_recipe::Recipe, Option<Vec<String>>)> = Vec::new();
    for spec in &a.targets {
        let targets = aorta_labels::resolve(&root, spec).map_err(miette::Report::new)?;
        for t in targets {
            let sidecars: Vec<_> = t.mitigations_files.iter().chain(&a.mitigations_files).cloned().collect();
            let recipe_path = display_path(&t.recipe, &cwd);
            let recipe = load_recipe(&recipe_path, &sidecars).map_err(|d| miette::Report::new(*d))?.recipe;
            let argv = target_command(&a.command, &t.command);
            if recipe.mode == Mode::Triage && !a.command.is_empty() {
                return Err(usage(
                    format!("{}: a command was given after --, but {} is a triage (workload) recipe", t.label, recipe_path.display()),
                    "only probe recipes (mode: probe) wrap a command",
                ));
            }
            let argv = if recipe.mode == Mode::Probe { argv } else { None };
            if a.dry_run {
                plans.push(aorta_plan::plan(&recipe, Some(&t.label), &crate::context::key_context(argv.as_deref(), &recipe, &crate::context::EnvSource::from_args(&a.exec))?));
            } else {
                if recipe.mode == Mode::Probe && argv.is_none() {
                    return Err(usage(
                        format!("{}: a probe recipe needs a command: give it after -- or as the target's `command` in BUCK", t.label),
                        format!("aorta build {} -- bash launch.sh", t.label),
                    ));
                }
                runs.push((recipe, argv));
            }
        }
    }
    if a.dry_run {
        return print_plans(&plans, a.json);
    }
    let mut code = ExitCode::SUCCESS;
    for (recipe, argv) in &runs {
        let out = crate::cmd_exec::execute(recipe, argv.as_deref(), &a.exec, a.verbose)?;
        let c = crate::cmd_exec::report(&out, recipe.mode);
        if c != ExitCode::SUCCESS {
            code = c;
            if out.cancelled {
                break;
            }
        }
    }
    Ok(code)
}

/// Paths relative to the current directory read better in diagnostics than absolute ones.
/// The command a target's trials run: the one after `--` on the command line, else the one its
/// BUCK target declares, else none.
pub fn target_command(cli: &[String], declared: &[String]) -> Option<Vec<String>> {
    [cli, declared].into_iter().find(|c| !c.is_empty()).map(<[String]>::to_vec)
}

pub fn display_path(path: &std::path::Path, cwd: &std::path::Path) -> std::path::PathBuf {
    path.strip_prefix(cwd).map(std::path::Path::to_path_buf).unwrap_or_else(|_| path.to_path_buf())
}

pub fn print_plans(plans: &[Plan], json: bool) -> miette::Result<ExitCode> {
    if json {
        let text = if plans.len() == 1 { serde_json::to_string_pretty(&plans[0]) } else { serde_json::to_string_pretty(plans) };
        println!("{}", text.map_err(|e| miette::miette!("cannot serialise the plan: {e}"))?);
    } else {
        for (i, p) in plans.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", p.render_text());
        }
    }
    Ok(ExitCode::SUCCESS)
}
