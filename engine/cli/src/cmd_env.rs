//! `aorta env probe|diff|key`: the environment snapshot (engine/probe) from the command line.

use crate::args::EnvCommand;
use crate::exit::{usage, CliError, CliResult};
use aorta_engine::environment::{
    default_probe_cache_dir, diff, load_for_diff, load_snapshot, probe_machine, SnapshotFileError,
    AORTA_SNAPSHOT_HELP,
};
use aorta_engine::KeyRules;
use std::process::ExitCode;

fn bad_snapshot(e: SnapshotFileError) -> CliError {
    let help = match e.is_aorta() {
        true => AORTA_SNAPSHOT_HELP,
        false => "pass an env.json written by `aorta env probe` (or, to `aorta env diff`, AORTA's own env.json)",
    };
    usage(e.to_string(), help)
}

fn rules(include: &[String], exclude: &[String]) -> Result<KeyRules, CliError> {
    let r = KeyRules::new(include.to_vec(), exclude.to_vec());
    r.validate().map_err(|e| {
        usage(
            format!("--key-include/--key-exclude: {e}"),
            "dotted field paths with * globs, e.g. env_vars.NCCL_*",
        )
    })?;
    Ok(r)
}

pub fn env(cmd: &EnvCommand) -> CliResult {
    match cmd {
        EnvCommand::Probe {
            output,
            summary,
            field,
            python,
            no_cache,
            deep,
            execution_context,
            extended: _,
            buck_target,
            buck_option,
            buck_mode_file,
            buck_config,
            buck_modifier,
            buck_default_context,
            buck_timeout,
        } => {
            let buck = [
                ("--buck-target", !buck_target.is_empty()),
                ("--buck-option", !buck_option.is_empty()),
                ("--buck-mode-file", !buck_mode_file.is_empty()),
                ("--buck-config", !buck_config.is_empty()),
                ("--buck-modifier", !buck_modifier.is_empty()),
                ("--buck-default-context", *buck_default_context),
                ("--buck-timeout", !buck_timeout.is_empty()),
            ];
            if let Some((flag, _)) = buck.iter().find(|(_, set)| *set) {
                return Err(usage(
                    format!("{flag} is AORTA 0.3.0's Buck cquery for library identity; aorta env probe does not query Buck"),
                    "the snapshot already records the libraries the process loads (path, version, blake3); to capture a Buck2 action's environment, run `aorta env probe --execution-context buck2_action -o OUT` as the action (docs/env-snapshot.md)",
                ));
            }
            if *summary && field.is_some() {
                return Err(usage(
                    "--summary and --field cannot be combined",
                    "use one of them",
                ));
            }
            let mut snap = probe_machine(
                python.clone(),
                (!no_cache).then(default_probe_cache_dir),
                *deep,
            );
            if execution_context != "direct" {
                let declared = ["AORTA_RE_IMAGE", "AORTA_DOCKER_IMAGE"]
                    .iter()
                    .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
                // AORTA 0.3.0's rule: no isolation signal of any kind (container_detected) and
                // no launcher image named.
                let isolated = snap.host.runtime.container_detected == Some(true);
                if !isolated && !declared {
                    eprintln!("aorta: warning: --execution-context {execution_context} says the probe runs inside an action or container, but none was detected (host.runtime.container_detected is false) and neither $AORTA_RE_IMAGE nor $AORTA_DOCKER_IMAGE is set: this may be the wrong place to probe");
                }
                snap.probe.invocation = Some(execution_context.clone());
            }
            if let Some(m) = &snap.gpu.driver_identity.mismatch {
                eprintln!("aorta: warning: driver mismatch: {m}");
            }
            if let Some(f) = field {
                let v = snap.field(f).map_err(|e| {
                    usage(e.to_string(), "fields are dotted paths such as gpu.devices")
                })?;
                println!("{}", serde_json::to_string(&v).unwrap_or_default());
                return Ok(ExitCode::SUCCESS);
            }
            if *summary {
                print!("{}", snap.summary());
                return Ok(ExitCode::SUCCESS);
            }
            let out = output.clone().unwrap_or_else(|| "env.json".into());
            let abs = std::path::absolute(&out).unwrap_or(out);
            // A user-named path: written through a device, FIFO or symlink, never renamed over.
            aorta_engine::write_user_file(&abs, (snap.to_json_pretty() + "\n").as_bytes())
                .map_err(|e| {
                    aorta_engine::EngineError::output(format!("cannot write {}", abs.display()), &e)
                })?;
            println!(
                "Wrote env probe to {} (schema_version={}){}",
                abs.display(),
                snap.schema_version,
                if snap.partial { " [PARTIAL]" } else { "" }
            );
            print!("{}", snap.summary());
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Containment => {
            println!("containment: {}", aorta_engine::containment());
            Ok(ExitCode::SUCCESS)
        }
        EnvCommand::Diff {
            a,
            b,
            key_only,
            json,
            key_include,
            key_exclude,
        } => {
            // AORTA's env.json too: comparing is all it can be used for.
            let (sa, sb) = (
                load_for_diff(a).map_err(bad_snapshot)?,
                load_for_diff(b).map_err(bad_snapshot)?,
            );
            let d = diff(&sa, &sb, &rules(key_include, key_exclude)?);
            let d = if *key_only { d.key_only() } else { d };
            if *json {
                println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default());
            } else {
                print!(
                    "{}",
                    d.render(&a.display().to_string(), &b.display().to_string())
                );
            }
            Ok(if d.key_changed() {
                ExitCode::from(crate::exit::INCOMPLETE)
            } else {
                ExitCode::SUCCESS
            })
        }
        EnvCommand::Key {
            file,
            deep,
            key_include,
            key_exclude,
        } => {
            let rules = rules(key_include, key_exclude)?;
            let snap = match file {
                Some(f) => load_snapshot(f).map_err(bad_snapshot)?,
                None => probe_machine(
                    None,
                    Some(default_probe_cache_dir()),
                    *deep || rules.needs_deep(),
                ),
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
