//! `aorta env probe|diff|key`: the environment snapshot (engine/probe) from the command line.

use crate::args::EnvCommand;
use crate::cmd_sweep::usage;
use aorta_probe::{diff, probe, KeyRules, ProbeCache, ProbeOptions, Snapshot};
use aorta_registry::Registry;
use std::process::ExitCode;

fn load(path: &std::path::Path) -> miette::Result<Snapshot> {
    let text = std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read {}: {e}", path.display()), "pass an env.json written by `aorta env probe`"))?;
    Snapshot::from_json(&text).map_err(|e| usage(format!("{}: {e}", path.display()), "pass an env.json written by `aorta env probe`"))
}

fn rules(include: &[String], exclude: &[String]) -> miette::Result<KeyRules> {
    let r = KeyRules::new(include.to_vec(), exclude.to_vec());
    r.validate().map_err(|e| usage(format!("--key-include/--key-exclude: {e}"), "dotted field paths with * globs, e.g. env_vars.NCCL_*"))?;
    Ok(r)
}

pub fn env(cmd: &EnvCommand) -> miette::Result<ExitCode> {
    match cmd {
        EnvCommand::Probe { output, summary, field, python, no_cache, deep } => {
            if *summary && field.is_some() {
                return Err(usage("--summary and --field cannot be combined", "use one of them"));
            }
            let mut opts = ProbeOptions::current();
            opts.python = python.clone();
            opts.extra_env_vars = Registry::builtin().mitigation_env_vars();
            opts.deep = *deep;
            if !no_cache {
                opts.cache = Some(ProbeCache::new(crate::cmd_cache::probe_cache_dir(None)?));
            }
            let snap = probe(&opts);
            if let Some(f) = field {
                let v = snap.field(f).map_err(|e| usage(e.to_string(), "fields are dotted paths such as gpu.devices"))?;
                println!("{}", serde_json::to_string(&v).unwrap_or_default());
                return Ok(ExitCode::SUCCESS);
            }
            if *summary {
                print!("{}", snap.summary());
                return Ok(ExitCode::SUCCESS);
            }
            let out = output.clone().unwrap_or_else(|| "env.json".into());
            let abs = std::path::absolute(&out).unwrap_or(out);
            aorta_build::write_atomic(&abs, (snap.to_json_pretty() + "\n").as_bytes())
                .map_err(|e| usage(format!("cannot write {}: {e}", abs.display()), "check the directory exists and is writable"))?;
            println!("Wrote env probe to {} (schema_version={}){}", abs.display(), snap.schema_version, if snap.partial { " [PARTIAL]" } else { "" });
            print!("{}", snap.summary());
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Diff { a, b, key_only, json, key_include, key_exclude } => {
            let (sa, sb) = (load(a)?, load(b)?);
            let d = diff(&sa, &sb, &rules(key_include, key_exclude)?);
            let d = if *key_only { d.key_only() } else { d };
            if *json {
                println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default());
            } else {
                print!("{}", d.render(&a.display().to_string(), &b.display().to_string()));
            }
            Ok(if d.key_changed() { ExitCode::from(crate::EXIT_FAILURE) } else { ExitCode::SUCCESS })
        }
        EnvCommand::Key { file, deep, key_include, key_exclude } => {
            let rules = rules(key_include, key_exclude)?;
            let snap = match file {
                Some(f) => load(f)?,
                None => {
                    let mut opts = ProbeOptions::current();
                    opts.extra_env_vars = Registry::builtin().mitigation_env_vars();
                    opts.cache = Some(ProbeCache::new(crate::cmd_cache::probe_cache_dir(None)?));
                    opts.deep = *deep || rules.needs_deep();
                    probe(&opts)
                }
            };
            let k = snap.key(&rules);
            println!("{}", k.hash);
            for (p, v) in &k.fields {
                println!("  {p} = {v}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
