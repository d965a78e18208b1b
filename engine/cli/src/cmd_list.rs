//! `aorta mitigations list`, `aorta environments list`, `aorta sweep list-*`.

use aorta_classify::{Pattern, PATTERN_LIBRARY_VERSION, TIER3_LOG_PATTERNS, TIER4_PATTERNS};
use aorta_registry::Registry;
use std::path::PathBuf;
use std::process::ExitCode;

fn registry(files: &[PathBuf]) -> miette::Result<Registry> {
    Registry::load(None, files).map_err(|d| miette::Report::new(*d))
}

fn print_json<T: serde::Serialize>(value: &T) -> crate::exit::CliResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| miette::miette!("cannot serialise: {e}"))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

pub fn mitigations(files: &[PathBuf], json: bool) -> crate::exit::CliResult {
    let reg = registry(files)?;
    if json {
        return print_json(&reg.mitigations().collect::<Vec<_>>());
    }
    print!("{}", ensure_newline(reg.mitigations_table()));
    Ok(ExitCode::SUCCESS)
}

pub fn environments(files: &[PathBuf], json: bool) -> crate::exit::CliResult {
    let reg = registry(files)?;
    if json {
        return print_json(&reg.environments().collect::<Vec<_>>());
    }
    print!("{}", ensure_newline(reg.environments_table()));
    Ok(ExitCode::SUCCESS)
}

fn ensure_newline(mut s: String) -> String {
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

#[derive(serde::Serialize)]
struct PatternJson<'a> {
    id: &'a str,
    tier: &'a str,
    description: &'a str,
    regex: &'a str,
    multiline: bool,
    ignore_case: bool,
    sample: &'a str,
    negative: &'a str,
}

/// AORTA's catalogue layout, Tier 4 first (what `list-patterns` always showed), then Tier 3's
/// kernel-log patterns.
pub fn patterns(version_only: bool, json: bool, banner: &str) -> crate::exit::CliResult {
    if version_only {
        println!(
            "{banner} pattern library v{PATTERN_LIBRARY_VERSION} (aorta {})",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(ExitCode::SUCCESS);
    }
    let tiers: [(&str, &[Pattern]); 2] = [("tier4", TIER4_PATTERNS), ("tier3", TIER3_LOG_PATTERNS)];
    if json {
        let all: Vec<PatternJson> = tiers
            .iter()
            .flat_map(|(tier, pats)| {
                pats.iter().map(move |p| PatternJson {
                    id: p.id,
                    tier,
                    description: p.description,
                    regex: p.regex,
                    multiline: p.flags.multiline,
                    ignore_case: p.flags.ignore_case,
                    sample: p.sample,
                    negative: p.negative,
                })
            })
            .collect();
        return print_json(
            &serde_json::json!({"version": PATTERN_LIBRARY_VERSION, "patterns": all}),
        );
    }
    println!("{banner} built-in pattern library (v{PATTERN_LIBRARY_VERSION})");
    println!();
    for (tier, pats) in tiers {
        if tier == "tier3" {
            println!("kernel log (dmesg) patterns, tier 3:");
            println!();
        }
        for p in pats {
            let mut flags = Vec::new();
            if p.flags.multiline {
                flags.push("multiline");
            }
            if p.flags.ignore_case {
                flags.push("ignore-case");
            }
            println!("  {}", p.id);
            println!("      description: {}", p.description);
            if flags.is_empty() {
                println!("      regex     : {}", p.regex);
            } else {
                println!("      regex     : {}  ({})", p.regex, flags.join(", "));
            }
            println!("      sample    : {}", p.sample);
            println!("      negative  : {}", p.negative);
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}
