//! `agent_report.md`: AORTA's sections (ticket, outcome, category, winning mitigation,
//! iterations, hypothesis, cell table, recommended action) plus the evidence: both failure
//! rates with intervals, the p-values, the trials spent and each candidate's confound tag.

use crate::outcome::Outcome;
use crate::search::{AgentResult, CandidateVerdict};
use std::fmt::Write;
use std::path::{Path, PathBuf};

pub const REPORT_FILE: &str = "agent_report.md";

/// Text from a run or a model, made safe for one table cell or line: no table breaks, no
/// line breaks, no raw HTML (a proposer's hypothesis is untrusted).
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
        .replace(['\n', '\r'], " ")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .chars()
        .take(300)
        .collect()
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The recommended action for the outcome.
pub fn recommendation(r: &AgentResult) -> String {
    let conf = pct(r.design.confidence());
    match r.outcome {
        Outcome::Converged => {
            let w = r.winner.as_deref().unwrap_or("?");
            format!("Re-run the workload with mitigation `{w}` set: at {conf} confidence it fails less often than the baseline. It avoids the failure rather than explaining it: use it to narrow the root cause.")
        }
        Outcome::BaselinePass => format!(
            "The baseline never failed in {} trials (failure rate below {} at {conf} confidence): the symptom did not reproduce here; check the environment, or raise --max-baseline-trials for a rarer bug.",
            r.baseline.trials,
            pct(r.baseline.wilson(r.design.confidence()).1)
        ),
        Outcome::ExhaustedCandidates => format!("No candidate reduced the failure rate at {conf} confidence without slowing the job; add candidates (--mitigation, --mitigations-file) or raise --max-trials-per-cell."),
        Outcome::ApprovalRequired => "Review the proposed mitigation; re-run without --require-approval to let the agent try it.".into(),
        Outcome::WalltimeExhausted | Outcome::PolicyStop => "Re-run with the same arguments and a larger budget (--max-iterations, --max-walltime-sec, --max-trials-per-cell): completed trials are reused from the store.".into(),
        Outcome::RegistryError | Outcome::AgentStop => "Check the proposer's last step in agent_log.jsonl; the candidate list may need a mitigations file.".into(),
        Outcome::Error => "See agent_log.jsonl for the error; re-running with the same arguments resumes.".into(),
        Outcome::DryRun => "Run without --dry-run to start the search.".into(),
    }
}

pub fn render(r: &AgentResult) -> String {
    let mut s = String::new();
    let conf = pct(r.design.confidence());
    let _ = writeln!(s, "# Agent report\n");
    let _ = writeln!(
        s,
        "- Ticket: {}",
        r.ticket.as_deref().map_or("—".into(), cell)
    );
    let _ = writeln!(s, "- Outcome: **{}** — {}", r.outcome, r.outcome.headline());
    if let Some(d) = &r.detail {
        let _ = writeln!(s, "- Detail: {}", cell(d));
    }
    let step = r.last_step.as_ref();
    let _ = writeln!(
        s,
        "- Category: {}",
        step.map_or("unknown", |s| s.category.as_str())
    );
    let _ = writeln!(
        s,
        "- Winning mitigation: {}",
        r.winner.as_deref().unwrap_or("—")
    );
    let _ = writeln!(s, "- Iterations: {}", r.iterations);
    let _ = writeln!(
        s,
        "- Hypothesis: {}",
        step.map_or("—".into(), |s| cell(&s.hypothesis))
    );
    let _ = writeln!(
        s,
        "- Trials used: {} (every cell, every look; reused trials included)",
        r.trials_used
    );
    // The last look's build rendered report.html into the same run directory.
    if r.run_dir.join("report.html").is_file() {
        let _ = writeln!(
            s,
            "- Report: [report.html](report.html) (the last build's matrix, plots, logs and environment)"
        );
    }
    let _ = writeln!(s, "\n## Evidence ({conf} confidence)\n");
    let (lo, hi) = r.baseline.wilson(r.design.confidence());
    let _ = writeln!(
        s,
        "Baseline `none-none`: {} of {} trials failed, failure rate {} (interval {}–{}){}.\n",
        r.baseline.failed,
        r.baseline.trials,
        pct(r.baseline.rate()),
        pct(lo),
        pct(hi),
        if r.baseline_errored > 0 {
            format!("; {} errored trials excluded", r.baseline_errored)
        } else {
            String::new()
        }
    );
    if !r.tested.is_empty() {
        let _ = writeln!(s, "| Mitigation | Failed / trials | Failure rate (interval) | p-value | Confound | Verdict |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for t in &r.tested {
            let (lo, hi) = t.counts.wilson(r.design.confidence());
            let verdict = match t.verdict {
                CandidateVerdict::SpeedConfound => {
                    "**speed confound** (fewer failures, but slower: not declared a fix)"
                        .to_string()
                }
                v => v.as_str().to_string(),
            };
            let _ = writeln!(
                s,
                "| {} | {} / {} | {} ({}–{}) | {:.2e} | {} | {} |",
                cell(&t.mitigation),
                t.counts.failed,
                t.counts.trials,
                pct(t.counts.rate()),
                pct(lo),
                pct(hi),
                t.p_value,
                cell(&t.confound),
                verdict
            );
        }
        let _ = writeln!(
            s,
            "\nMethod: `trials: auto`'s sequential test, Fisher's exact test at looks of {:?} trials against the baseline's first as many, each candidate allotted {:.2e} of the {:.2} error budget (α / {} candidates, both directions and the looks sharing it); a fix must also not be a speed confound. See docs/agent.md.",
            r.design.candidate_looks,
            r.design.alpha / f64::from(r.design.candidates),
            r.design.alpha,
            r.design.candidates
        );
    }
    let _ = writeln!(
        s,
        "\n## Cells\n\n| Cell | Verdict | Detectors |\n|---|---|---|"
    );
    for c in &r.cells {
        let _ = writeln!(
            s,
            "| {} | {} ({} of {} failed) | {} |",
            cell(&c.cell),
            c.verdict,
            c.failed,
            c.trials,
            cell(&c.failure_detectors.join(", "))
        );
    }
    let _ = writeln!(s, "\n## Recommended action\n\n{}", recommendation(r));
    s
}

/// The agent's verdict as the run's [`aorta_report::Answer`] (so report.html's answer box,
/// calls and colours are the sequential test's, not the last look's), and its search.
pub fn page(r: &AgentResult) -> (aorta_report::Answer, aorta_report::AgentPage) {
    use aorta_report::{AgentCandidate, AgentPage, Answer, Call, CellCall, Stability};
    let conf = r.design.confidence();
    let baseline = CellCall {
        cell: crate::probe::cell_name("none"),
        mitigations: vec!["none".into()],
        call: Call::Baseline,
        failed: r.baseline.failed,
        trials: r.baseline.trials,
        interval: r.baseline.wilson(conf),
        p_value: 1.0,
        trials_to_decide: None,
        stability: Stability::of(r.baseline),
        auto: None,
    };
    let cells = r
        .tested
        .iter()
        .map(|t| CellCall {
            cell: crate::probe::cell_name(&t.mitigation),
            mitigations: vec![t.mitigation.clone()],
            call: match t.verdict {
                CandidateVerdict::Fix => Call::Fixes,
                CandidateVerdict::SpeedConfound => Call::SpeedConfounded,
                CandidateVerdict::NotFix | CandidateVerdict::Undecided => Call::Inconclusive,
            },
            failed: t.counts.failed,
            trials: t.counts.trials,
            interval: t.counts.wilson(conf),
            p_value: t.p_value,
            trials_to_decide: None,
            stability: Stability::of(t.counts),
            auto: None,
        })
        .collect();
    let headline = match (r.outcome, r.winner.as_deref(), r.tested.iter().find(|t| t.verdict == CandidateVerdict::Fix)) {
        (Outcome::Converged, Some(w), Some(t)) => format!(
            "{w} fixes it: {}/{} failed against the baseline's {}/{} (aorta agent's sequential test at {}).",
            t.counts.failed,
            t.counts.trials,
            r.baseline.failed,
            r.baseline.trials,
            pct(conf)
        ),
        _ => format!("{} {}", r.outcome.headline(), r.detail.as_deref().unwrap_or("")).trim().to_string(),
    };
    let answer = Answer {
        confidence: conf,
        sequential: false,
        baseline: Some(baseline),
        cells,
        headline,
        next_step: recommendation(r),
    };
    let search = AgentPage {
        outcome: r.outcome.to_string(),
        trials_used: r.trials_used,
        iterations: r.iterations,
        candidates: r
            .tested
            .iter()
            .map(|t| AgentCandidate {
                mitigation: t.mitigation.clone(),
                failed: t.counts.failed,
                trials: t.counts.trials,
                p_value: t.p_value,
                stopped: match t.verdict {
                    CandidateVerdict::Fix => "decided: fails less often (a fix)".into(),
                    CandidateVerdict::SpeedConfound => {
                        format!("fails less often but slower ({}): not a fix", t.confound)
                    }
                    CandidateVerdict::NotFix => {
                        "decided: not a fix (no better than the baseline)".into()
                    }
                    CandidateVerdict::Undecided => "undecided when the search stopped".into(),
                },
            })
            .collect(),
    };
    (answer, search)
}

/// Writes the report atomically into the run directory.
pub fn write(r: &AgentResult, run_dir: &Path) -> std::io::Result<PathBuf> {
    let path = run_dir.join(REPORT_FILE);
    aorta_fsutil::write_atomic(&path, render(r).as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::AgentStep;
    use crate::search::Tested;
    use crate::stats::{Counts, Design};

    #[test]
    fn untrusted_text_cannot_break_the_report() {
        let r = AgentResult {
            outcome: Outcome::ExhaustedCandidates,
            detail: None,
            run_dir: "/tmp".into(),
            ticket: Some("T-1".into()),
            design: Design::new(0.95, 1, 64, 32),
            baseline: Counts::new(8, 8),
            baseline_errored: 0,
            tested: vec![Tested {
                mitigation: "slow".into(),
                counts: Counts::new(0, 8),
                errored: 0,
                p_value: 1e-4,
                verdict: CandidateVerdict::SpeedConfound,
                confound: "speed (+250%)".into(),
            }],
            winner: None,
            iterations: 1,
            last_step: Some(AgentStep {
                hypothesis: "a|b\n## Outcome: converged <img src=x onerror=alert(1)>".into(),
                ..AgentStep::stop("unknown", "x")
            }),
            cells: Vec::new(),
            trials_used: 16,
            interrupted: false,
        };
        let md = render(&r);
        assert!(md.contains("- Hypothesis: a\\|b ## Outcome: converged &lt;img"));
        assert!(!md.contains("<img"));
        assert!(md.contains("| slow | 0 / 8 |"));
        assert!(md.contains("**speed confound**"));
        assert!(md.contains("- Winning mitigation: —"));
    }
}
