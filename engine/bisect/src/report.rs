//! `bisect.md` (in the run directory) and the terminal's probe list: every probe with its
//! trials, failures, failure rate and 95% Wilson interval, and its call.

use crate::search::{Found, ProbeRow};
use std::fmt::Write;

/// The failure rate and its 95% Wilson interval, as `30% [12–55%]`.
pub fn rate(row: &ProbeRow) -> String {
    let c = row.verdict.counts;
    let (lo, hi) = c.wilson(0.95);
    format!(
        "{:.0}% [{:.0}–{:.0}%]",
        100.0 * c.rate(),
        100.0 * lo,
        100.0 * hi
    )
}

fn basis(row: &ProbeRow) -> String {
    if row.verdict.good_never_failed {
        "failed; the good end never failed".into()
    } else {
        format!("p = {:.2e}", row.verdict.p)
    }
}

/// The probes, one line each, for the terminal.
pub fn tree(f: &Found) -> String {
    let mut s = String::new();
    for (i, r) in f.probes.iter().enumerate() {
        let branch = if i + 1 == f.probes.len() {
            "└─"
        } else {
            "├─"
        };
        let c = r.verdict.counts;
        let _ = writeln!(
            s,
            "{branch} {:<10} {:<9} {}/{} failed  {:<16} {} ({})",
            r.role,
            r.verdict.call.as_str(),
            c.failed,
            c.trials,
            rate(r),
            r.what,
            basis(r),
        );
    }
    s
}

/// The whole report as markdown.
pub fn markdown(f: &Found, argv: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# aorta {}\n", f.command);
    let _ = writeln!(s, "{}\n", f.answer);
    let _ = writeln!(s, "- Command: `{}`", argv.join(" "));
    let _ = writeln!(s, "- Status: {:?}", f.status);
    let _ = writeln!(
        s,
        "- Search space: {}; probes by the search: {} (bound {})",
        f.size, f.search_probes, f.bound
    );
    let _ = writeln!(
        s,
        "- Each call: one-sided Fisher exact test against the ends at looks {:?}, each direction at most {:.1}% wrong per probe",
        aorta_report::sequential::Design::new(f.settings.confidence, 1, f.settings.cap).looks,
        50.0 * (1.0 - f.settings.confidence)
    );
    if f.good_never_failed {
        let _ = writeln!(
            s,
            "- The good end never failed: one failure called a probe bad (assumes the good configuration cannot fail)"
        );
    }
    let _ = writeln!(
        s,
        "- Builds: {}; trials executed {}, reused {}\n",
        f.work.builds, f.work.executed, f.work.reused
    );
    let _ = writeln!(s, "## Probes\n");
    let _ = writeln!(
        s,
        "| # | role | configuration | cell | trials | failed | rate [95% Wilson] | call | basis |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for (i, r) in f.probes.iter().enumerate() {
        let c = r.verdict.counts;
        let _ = writeln!(
            s,
            "| {} | {} | {} | `{}` | {} | {} | {} | {} | {} |",
            i + 1,
            r.role,
            r.what.replace('|', "\\|"),
            r.cell,
            c.trials,
            c.failed,
            rate(r),
            r.verdict.call.as_str(),
            basis(r)
        );
    }
    if !f.untestable.is_empty() {
        let _ = writeln!(s, "\n## Cannot be tested here\n");
        let _ = writeln!(
            s,
            "Differences no run on this machine can apply (snapshot fields):\n"
        );
        let _ = writeln!(s, "| field | good | bad |\n|---|---|---|");
        for u in &f.untestable {
            let _ = writeln!(s, "| `{}` | {} | {} |", u.field, u.good, u.bad);
        }
    }
    s
}

/// Writes `bisect.md` into the run directory (atomically, as every run-directory file).
pub fn write(
    f: &Found,
    argv: &[String],
    run_dir: &std::path::Path,
) -> std::io::Result<std::path::PathBuf> {
    let path = run_dir.join("bisect.md");
    aorta_fsutil::write_atomic(&path, markdown(f, argv).as_bytes())?;
    Ok(path)
}
