//! AORTA's "missing `--`" guard: in `sweep run` and `probe`, the user's command must follow
//! `--`. A bare word in the option zone is almost always a forgotten separator, and letting it
//! through would silently run a different command.

use aorta_source::{Diag, DiagKind};
use std::borrow::Cow;
use std::ffi::OsString;

/// Checks raw argv (`cli`: the command tree clap then parses it with) before clap sees it.
pub fn check(raw: &[OsString], cli: &clap::Command) -> miette::Result<()> {
    let words: Vec<Cow<'_, str>> = raw.iter().map(|w| w.to_string_lossy()).collect();
    let mut rest = words.iter().skip(1).map(|w| w.as_ref()).peekable();
    // Walk to the subcommand that takes a trailing command.
    // `build` takes labels as bare words: only its mistyped flags are caught here (clap's
    // own tip would tell the user to pass them after `--`, as part of the command).
    let mut bare_words_are_targets = false;
    let (name, sub) = match rest.next() {
        Some("build") => {
            bare_words_are_targets = true;
            ("aorta build", cli.find_subcommand("build"))
        }
        Some("probe") => ("aorta probe", cli.find_subcommand("probe")),
        Some("agent") => ("aorta agent", cli.find_subcommand("agent")),
        Some(s @ ("sweep" | "triage")) if rest.peek() == Some(&"run") => {
            rest.next();
            let label = if s == "sweep" {
                "aorta sweep run"
            } else {
                "aorta triage run"
            };
            (
                label,
                cli.find_subcommand(s)
                    .and_then(|c| c.find_subcommand("run")),
            )
        }
        _ => return Ok(()),
    };
    let Some(sub) = sub else { return Ok(()) };
    let takes_value = |flag: &str| {
        sub.get_arguments().any(|a| {
            let named = a.get_long().is_some_and(|l| flag == format!("--{l}"))
                || a.get_all_aliases()
                    .is_some_and(|al| al.iter().any(|l| flag == format!("--{l}")))
                || a.get_short().is_some_and(|s| flag == format!("-{s}"));
            named && a.get_action().takes_values()
        })
    };
    let known = |flag: &str| {
        let flag = flag.split_once('=').map_or(flag, |(f, _)| f);
        sub.get_arguments().any(|a| {
            a.get_long().is_some_and(|l| flag == format!("--{l}"))
                || a.get_all_aliases()
                    .is_some_and(|al| al.iter().any(|l| flag == format!("--{l}")))
                || a.get_short().is_some_and(|s| flag == format!("-{s}"))
        })
    };
    let mut tokens = rest;
    while let Some(tok) = tokens.next() {
        match tok {
            "--" => return after_separator(name, tokens.collect()),
            "-h" | "--help" | "-V" | "--version" => return Ok(()),
            // A mistyped flag: its value would otherwise read as a command missing its `--`.
            t if t.starts_with("--") && !known(t) => return Err(unknown_flag(name, t, sub)),
            t if t.starts_with('-') => {
                if !t.contains('=') && takes_value(t) {
                    tokens.next();
                }
            }
            _ if bare_words_are_targets => {}
            bare => {
                return Err(Diag::new(
                    DiagKind::Usage,
                    format!("{name}: missing '--' separator before the command '{bare}'"),
                )
                .with_help(format!(
                    "put the command after --, e.g. {name} --recipe r.yaml -- {bare} …"
                ))
                .into())
            }
        }
    }
    Ok(())
}

fn unknown_flag(name: &str, flag: &str, sub: &clap::Command) -> miette::Report {
    let flag = flag.split_once('=').map_or(flag, |(f, _)| f);
    let longs: Vec<String> = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    let guess = aorta_source::suggest::did_you_mean(flag, longs.iter().map(String::as_str));
    let mut message = format!("{name}: unknown flag '{flag}'");
    if let Some(g) = guess {
        message.push_str(&format!(" (did you mean '{g}'?)"));
    }
    let help = if guess.is_none()
        && aorta_source::suggest::did_you_mean(flag, ["--trials", "--steps"]).is_some()
    {
        format!("a recipe sets its own `trials:` and `steps:`; `aorta sweep run --workload W --trials N` and `aorta run --trials N` take them as flags (`{name} --help` lists its flags)")
    } else {
        format!("`{name} --help` lists its flags; the command to run goes after --")
    };
    Diag::new(DiagKind::Usage, message).with_help(help).into()
}

fn after_separator(name: &str, argv: Vec<&str>) -> miette::Result<()> {
    match argv.first() {
        None => Err(Diag::new(DiagKind::Usage, format!("{name}: no command after '--'"))
            .with_help(format!("write the command to run after --, e.g. {name} --recipe r.yaml -- bash launch.sh"))
            .into()),
        Some(first) if first.starts_with('-') => Err(Diag::new(DiagKind::Usage, format!("{name}: the command after '--' starts with '{first}', which looks like a flag"))
            .with_help("put aorta's own options before --; the command's first word must be a program")
            .into()),
        Some(_) => Ok(()),
    }
}
