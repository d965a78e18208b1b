//! `aorta classify`: logs that already exist through the trials' classifier
//! (`aorta_classify::classify_logs`); this module opens the inputs and prints the findings.

use crate::args::ClassifyArgs;
use crate::exit::{usage, CliError, CliResult};
use aorta_classify::{classify_logs, ClassifierConfig, LogClassification, LogInput, LogKind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn classify(a: &ClassifyArgs) -> CliResult {
    let cfg = match &a.recipe {
        Some(spec) => recipe_classifier(spec, &a.mitigations_files)?,
        None => ClassifierConfig::default(),
    };
    let mut named: Vec<(&Path, LogKind)> = a
        .logs
        .iter()
        .map(|p| (p.as_path(), LogKind::Output))
        .collect();
    named.extend(a.dmesg.iter().map(|p| (p.as_path(), LogKind::Kernel)));
    if named.is_empty() {
        named.push((Path::new("-"), LogKind::Output));
    }
    if named.iter().filter(|(p, _)| is_stdin(p)).count() > 1 {
        return Err(usage(
            "stdin (`-`) is named more than once",
            "pipe one log in and pass the others as files",
        ));
    }
    let mut inputs = Vec::new();
    for (path, kind) in named {
        inputs.push(open(path, kind)?);
    }
    let result = classify_logs(inputs, &cfg)
        .map_err(|e| usage(e.to_string(), "pass a readable file, or `-` for stdin"))?;
    let links = match &a.doctor {
        Some(p) => doctor_links(&result, p)?,
        None => Vec::new(),
    };
    if a.json {
        let mut v = serde_json::to_value(&result).unwrap_or_default();
        if a.doctor.is_some() {
            v["doctor"] = serde_json::json!(links);
        }
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print_human(&result);
        if !result.fired() && a.dmesg.is_empty() {
            hint_kernel_logs(&a.logs, &cfg);
        }
        for l in &links {
            println!("{l}");
        }
    }
    Ok(if result.fired() {
        ExitCode::from(crate::exit::INCOMPLETE)
    } else {
        ExitCode::SUCCESS
    })
}

/// A kernel log passed as an ordinary log matches none of Tiers 4 and 5: when read as a
/// kernel log one would fire, say so rather than leave "no detector fired" standing.
fn hint_kernel_logs(logs: &[PathBuf], cfg: &ClassifierConfig) {
    for path in logs.iter().filter(|p| !is_stdin(p)) {
        let Ok(input) = open(path, LogKind::Kernel) else {
            continue;
        };
        let Ok(r) = classify_logs([input], cfg) else {
            continue;
        };
        if let Some(f) = r.findings.iter().find(|f| f.line.is_some()) {
            eprintln!(
                "hint: {} reads like a kernel log ({} at line {}): pass it with --dmesg {}",
                path.display(),
                f.detector,
                f.line.unwrap_or_default(),
                path.display()
            );
        }
    }
}

/// For each Xid finding (`xid`, `pci` captured by `tier3:nvidia_xid`), the doctor's verdict on
/// that GPU: `LOG:LINE: doctor quick said GPU 0 … was fail (…); Xid 79: …`.
fn doctor_links(r: &LogClassification, report: &Path) -> Result<Vec<String>, CliError> {
    let report = aorta_engine::doctor::read_recorded(report).map_err(|e| {
        usage(
            e.to_string(),
            "pass a report written by `aorta doctor --json` or a run's doctor.json",
        )
    })?;
    let verdict = report.verdict();
    Ok(r.findings
        .iter()
        .filter_map(|f| {
            let pci = f.capture.get("xid_pci").or_else(|| f.capture.get("pci"))?;
            let link = aorta_doctor::report::xid_line(
                &verdict,
                f.capture.get("xid").map(String::as_str),
                pci,
            );
            Some(format!("{}:{}: {link}", f.log, f.line.unwrap_or(0)))
        })
        .collect())
}

fn is_stdin(p: &Path) -> bool {
    p.as_os_str() == "-"
}

fn open(path: &Path, kind: LogKind) -> Result<LogInput<'static>, CliError> {
    if is_stdin(path) {
        return Ok(LogInput {
            name: "-".into(),
            kind,
            reader: Box::new(std::io::stdin()),
        });
    }
    let file = std::fs::File::open(path).map_err(|e| {
        usage(
            format!("cannot open {}: {e}", path.display()),
            "pass an existing, readable log file, or `-` for stdin",
        )
    })?;
    Ok(LogInput {
        name: path.display().to_string(),
        kind,
        reader: Box::new(file),
    })
}

/// The recipe's classifier: resolved like a build target (label or file), loaded, validated.
fn recipe_classifier(spec: &str, sidecars: &[PathBuf]) -> Result<ClassifierConfig, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| crate::exit::infra(format!("cannot read the current directory: {e}")))?;
    let root = aorta_labels::find_workspace_root(&cwd);
    let targets = aorta_labels::resolve(&root, spec)?;
    let [t] = targets.as_slice() else {
        return Err(usage(
            format!("--recipe {spec} names {} recipes", targets.len()),
            "name one recipe: a label such as //recipes:quickstart, or a file",
        ));
    };
    let files: Vec<PathBuf> = t
        .mitigations_files
        .iter()
        .chain(sidecars)
        .cloned()
        .collect();
    let session = aorta_engine::Session::open(aorta_engine::SessionOptions::default())?;
    let id = session.add_target(aorta_engine::TargetSpec {
        label: None,
        origin: aorta_engine::RecipeOrigin::File {
            path: t.recipe.clone(),
            sidecars: files,
            overlays: Default::default(),
        },
        argv: None,
    });
    let recipe = session.recipe(id)?;
    aorta_engine::classifier_config(&recipe)
        .map_err(|e| usage(format!("{spec}: {e}"), "fix the recipe's custom_patterns"))
}

/// `LOG:LINE: DETECTOR [severity]  TEXT` per finding, like grep, then a one-line summary.
fn print_human(r: &LogClassification) {
    for f in &r.findings {
        let sev = match f.severity {
            aorta_classify::Severity::Fail => "",
            aorta_classify::Severity::Warn => " [warn]",
            aorta_classify::Severity::Info => " [info]",
        };
        match f.line {
            Some(line) => println!("{}:{line}: {}{sev}  {}", f.log, f.detector, f.text),
            None => println!(
                "{}{sev}  (a required_for_pass pattern matched no log)",
                f.detector
            ),
        }
        if !f.capture.is_empty() {
            let groups: Vec<String> = f.capture.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("    capture: {}", groups.join(" "));
        }
    }
    for e in &r.errors {
        println!("classifier error: {e}");
    }
    let fired = r
        .findings
        .iter()
        .filter(|f| f.severity != aorta_classify::Severity::Info)
        .count();
    let bytes: u64 = r.logs.iter().map(|l| l.bytes_read).sum();
    println!(
        "{} in {} log(s), {bytes} bytes read (pattern library {})",
        match fired {
            0 => "no detector fired".to_string(),
            1 => "1 detector fired".to_string(),
            n => format!("{n} detectors fired"),
        },
        r.logs.len(),
        r.pattern_library
    );
}
