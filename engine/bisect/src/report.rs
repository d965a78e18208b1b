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
            "{branch} {:<10} {:<9} {}/{} failed  {:<16} {}{} ({})",
            r.role,
            r.verdict.call.as_str(),
            c.failed,
            c.trials,
            rate(r),
            "  ".repeat(r.depth as usize),
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
    if !f.not_compared.is_empty() {
        let _ = writeln!(s, "\n## Not compared\n");
        let _ = writeln!(
            s,
            "Fields only one kind of file records (AORTA's env.json against aorta's snapshot):\n"
        );
        let _ = writeln!(s, "| field | why |\n|---|---|");
        for n in &f.not_compared {
            let _ = writeln!(s, "| `{}` | {} |", n.field, n.why);
        }
    }
    s
}

/// Writes `bisect.md` and `bisect.html` into the run directory (atomically, as every run-directory file).
pub fn write(
    f: &Found,
    argv: &[String],
    run_dir: &std::path::Path,
) -> std::io::Result<std::path::PathBuf> {
    let path = run_dir.join("bisect.md");
    aorta_fsutil::write_atomic(&path, markdown(f, argv).as_bytes())?;
    aorta_fsutil::write_atomic(&run_dir.join("bisect.html"), html(f, argv).as_bytes())?;
    Ok(path)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An inline bar: the failure rate as a dot on its 95% Wilson interval, 0–100%.
fn bar(row: &ProbeRow) -> String {
    let c = row.verdict.counts;
    let (lo, hi) = c.wilson(0.95);
    let x = |v: f64| 2.0 + 116.0 * v;
    let colour = match row.verdict.call {
        crate::judge::Call::Fails => "#D55E00",
        crate::judge::Call::Passes => "#0072B2",
        crate::judge::Call::Undecided => "#999",
    };
    format!(
        "<svg width=\"120\" height=\"12\" role=\"img\"><line x1=\"2\" y1=\"6\" x2=\"118\" y2=\"6\" stroke=\"#ddd\"/><line x1=\"{:.1}\" y1=\"6\" x2=\"{:.1}\" y2=\"6\" stroke=\"#555\" stroke-width=\"3\"/><circle cx=\"{:.1}\" cy=\"6\" r=\"3.5\" fill=\"{colour}\"/></svg>",
        x(lo),
        x(hi),
        x(c.rate()),
    )
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}.answer{background:#eef6fb;border-left:4px solid #0072B2;padding:.5em 1em}";

/// `bisect.html`: the answer first, then every probe with its rate on its interval. A page of
/// its own: report.html is re-rendered from recipe.resolved.yaml, which has no way to say a
/// probe cell's env, so the probes cannot be its matrix.
pub fn html(f: &Found, argv: &[String]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>aorta {cmd}</title><style>{STYLE}</style></head><body><h1>aorta {cmd}</h1><div class=\"answer\"><p><b>{answer}</b></p></div><p>Command: <code>{argv}</code>. Search space {size}; probes by the search {probes} (bound {bound}); {builds} build(s), {executed} trial(s) executed, {reused} reused.</p>",
        cmd = esc(f.command),
        answer = esc(&f.answer),
        argv = esc(&argv.join(" ")),
        size = f.size,
        probes = f.search_probes,
        bound = f.bound,
        builds = f.work.builds,
        executed = f.work.executed,
        reused = f.work.reused,
    );
    s.push_str("<h2>Probes</h2><p>Each probe is called against the two ends (one-sided Fisher's exact test at 4, 8, 16, … trials; docs/bisect.md). The dot is the failure rate, the bar its 95% Wilson interval.</p><table><thead><tr><th>#</th><th>Role</th><th>Configuration</th><th>Failed / trials</th><th>Rate [95%]</th><th></th><th>Call</th><th>Basis</th></tr></thead><tbody>");
    for (i, r) in f.probes.iter().enumerate() {
        let c = r.verdict.counts;
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td style=\"padding-left:{}em\">{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            r.role,
            0.5 + f64::from(r.depth),
            esc(&r.what),
            c.failed,
            c.trials,
            esc(&rate(r)),
            bar(r),
            r.verdict.call.as_str(),
            esc(&basis(r)),
        );
    }
    s.push_str("</tbody></table>");
    if !f.untestable.is_empty() {
        s.push_str("<h2>Cannot be tested here</h2><table><thead><tr><th>Field</th><th>Good</th><th>Bad</th></tr></thead><tbody>");
        for u in &f.untestable {
            let _ = write!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&u.field),
                esc(&u.good),
                esc(&u.bad)
            );
        }
        s.push_str("</tbody></table>");
    }
    if !f.not_compared.is_empty() {
        s.push_str(
            "<h2>Not compared</h2><table><thead><tr><th>Field</th><th>Why</th></tr></thead><tbody>",
        );
        for n in &f.not_compared {
            let _ = write!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td></tr>",
                esc(&n.field),
                esc(&n.why)
            );
        }
        s.push_str("</tbody></table>");
    }
    s.push_str("</body></html>\n");
    s
}
