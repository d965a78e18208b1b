//! The command line: `aorta-trace --out TRACE_FILE -- PROGRAM [ARGS...]` (and `aorta __trace`,
//! the same entry point inside the `aorta` binary, which is how the engine runs it: the tracer
//! is wherever aorta is, a Slurm node included). Runs PROGRAM, records the files its process
//! tree opens and executes into TRACE_FILE (JSON), and exits as PROGRAM did.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

const USAGE: &str = "usage: aorta-trace --out TRACE_FILE -- PROGRAM [ARGS...]";

/// `--out FILE -- PROGRAM...` (also `--out=FILE`); `None` on anything else.
fn parse(args: &[OsString]) -> Option<(PathBuf, Vec<OsString>)> {
    let (out, rest) = match args.first()?.to_str()? {
        "--out" => (args.get(1)?.clone(), args.get(2..)?),
        a => (OsString::from(a.strip_prefix("--out=")?), &args[1..]),
    };
    if out.is_empty() || rest.first()? != "--" || rest.len() < 2 {
        return None;
    }
    Some((PathBuf::from(out), rest[1..].to_vec()))
}

/// To stderr, never panicking (`eprintln!` panics if stderr is a closed pipe).
fn warn(msg: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Runs the command line `args` (after the program name) and exits as the traced command did.
pub fn main_with(args: Vec<OsString>) -> ! {
    if matches!(args.first().and_then(|a| a.to_str()), Some("-h" | "--help")) {
        let _ = writeln!(std::io::stdout(), "{USAGE}");
        std::process::exit(0);
    }
    let Some((out, argv)) = parse(&args) else {
        warn(format_args!("{USAGE}"));
        std::process::exit(2);
    };
    // Fail before running anything if the trace could never be written.
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() || out.file_name().is_none() {
        warn(format_args!(
            "aorta-trace: {}: not a file in an existing directory\n{USAGE}",
            out.display()
        ));
        std::process::exit(2);
    }
    let traced = match crate::trace_command(&argv) {
        Ok(t) => t,
        Err(e) => {
            warn(format_args!("aorta-trace: {e}"));
            std::process::exit(125);
        }
    };
    if let Some(e) = &traced.exec_error {
        warn(format_args!(
            "aorta-trace: {}: {e}",
            argv[0].to_string_lossy()
        ));
    }
    // A trace that cannot be written is reported, and the command's status still passed on:
    // the engine treats a missing trace like an unavailable one.
    if let Err(e) = crate::write_trace(&out, &traced.trace) {
        warn(format_args!("aorta-trace: {e}"));
    }
    traced.exit.exit_process()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Option<(PathBuf, Vec<OsString>)> {
        parse(&a.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_only_the_documented_form() {
        let (out, argv) = p(&["--out", "t.json", "--", "cat", "-"]).unwrap();
        assert_eq!(
            (out, argv),
            (PathBuf::from("t.json"), vec!["cat".into(), "-".into()])
        );
        assert!(p(&["--out=t.json", "--", "true"]).is_some());
        for bad in [
            &["--out", "t.json", "--"][..],
            &["--out", "t.json", "true"],
            &["--out"],
            &["--out=", "--", "true"],
            &["true"],
            &[],
        ] {
            assert!(p(bad).is_none(), "{bad:?}");
        }
    }
}
