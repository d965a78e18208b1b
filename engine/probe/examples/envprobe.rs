//! A stand-in for `aorta env probe|key|diff` until the CLI is wired, for trying the library
//! on a real machine (the GPU machine has no Rust toolchain: build here, carry the binary).
//!
//! ```text
//! envprobe probe [--python P] [--cache DIR] [-o FILE] [--field a.b.c]
//! envprobe key FILE
//! envprobe diff A B [--key-only]      (exit 1 when the key changed)
//! ```

use aorta_probe::{diff, probe, KeyRules, ProbeCache, ProbeOptions, Snapshot};
use std::time::Instant;

fn load(path: &str) -> Snapshot {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| die(&format!("{path}: {e}")));
    Snapshot::from_json(&text).unwrap_or_else(|e| die(&format!("{path}: {e}")))
}

/// Prints without panicking on a closed pipe (`envprobe key F | head`).
fn emit(s: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

fn die(msg: &str) -> ! {
    eprintln!("envprobe: {msg}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    match args.first().map(String::as_str) {
        Some("probe") => {
            let mut opts = ProbeOptions::current();
            opts.python = flag("--python").map(Into::into);
            opts.cache = flag("--cache").map(ProbeCache::new);
            let t = Instant::now();
            let snap = probe(&opts);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if let Some(f) = flag("--field") {
                match snap.field(&f) {
                    Ok(v) => emit(&format!(
                        "{}\n",
                        serde_json::to_string(&v).unwrap_or_default()
                    )),
                    Err(e) => die(&e.to_string()),
                }
                return;
            }
            if let Some(o) = flag("-o") {
                std::fs::write(&o, snap.to_json_pretty() + "\n")
                    .unwrap_or_else(|e| die(&format!("{o}: {e}")));
                emit(&format!(
                    "Wrote env probe to {o} (schema_version={})\n",
                    snap.schema_version
                ));
            }
            emit(&snap.summary());
            emit(&format!(
                "probe took {ms:.0} ms (python cache {:?}, steps {:?})\n",
                snap.probe.python_cache, snap.probe.steps_ms
            ));
        }
        Some("key") => {
            let k = load(
                args.get(1)
                    .map(String::as_str)
                    .unwrap_or_else(|| die("key FILE")),
            )
            .key(&KeyRules::default());
            emit(&format!("{}\n", k.hash));
            for (p, v) in &k.fields {
                emit(&format!("  {p} = {v}\n"));
            }
        }
        Some("diff") => {
            let (a, b) = (
                args.get(1).unwrap_or_else(|| die("diff A B")),
                args.get(2).unwrap_or_else(|| die("diff A B")),
            );
            let mut d = diff(&load(a), &load(b), &KeyRules::default());
            if args.iter().any(|x| x == "--key-only") {
                d = d.key_only();
            }
            emit(&d.render(a, b));
            std::process::exit(i32::from(d.key_changed()));
        }
        _ => die("usage: envprobe probe|key|diff ..."),
    }
}
