//! The end-of-run summary printed to stdout (AORTA §3.8), with aorta's cache line. Unlike
//! matrix.json and matrix.md it is printed by every invocation, so it may say how this one
//! obtained its trials; the caller supplies those counts.

use crate::confound::one_line;
use crate::matrix::{Matrix, Row};

/// How the summary is printed, and what this invocation did.
#[derive(Debug, Clone, Copy, Default)]
pub struct SummaryOptions<'a> {
    /// The run directory as the user should see it (used in `Full matrix: <dir>/matrix.md`).
    pub run_dir: &'a str,
    /// Trials this invocation executed, over all cells.
    pub executed: usize,
    /// Trials this invocation took from the cache, over all cells.
    pub reused: usize,
    /// Trials of each row (by position) that ended without a result (they could not be
    /// run or recorded): such a cell is not clean, and they count as errored.
    pub unrecorded: &'a [usize],
}

impl SummaryOptions<'_> {
    /// AORTA's `resumed`, for a cell: nothing was executed and the cache served every trial.
    /// Known only for the whole invocation, so in a run that executed any trial no cell
    /// counts as resumed.
    fn resumed(&self, row: &Row) -> bool {
        self.executed == 0 && self.reused > 0 && row.stats.trials > 0
    }
}

impl Matrix<'_> {
    /// The summary, one line per `\n`, ending with a newline.
    ///
    /// All clean: `Sweep summary: all N cell(s) passed.`, the answer and the cache line.
    /// Otherwise the bucket counts, one line per cell that is not clean (with its directory),
    /// the answer (`Answer: …`, `Next: …`), the cache line, `Full matrix: …` and, without
    /// `-v`, the tip.
    pub fn summary(&self, opts: SummaryOptions) -> String {
        let n = self.rows.len();
        let resumed = self.rows.iter().filter(|r| opts.resumed(r)).count();
        let suffix = if resumed > 0 {
            format!(" {resumed} resumed from a prior run (no trials re-executed).")
        } else {
            String::new()
        };
        let cache = format!(
            "Trials: {} executed, {} reused from cache.",
            opts.executed, opts.reused
        );
        let lost = |i: usize| opts.unrecorded.get(i).copied().unwrap_or(0);
        let is_clean = |i: usize, r: &Row| r.stats.is_clean() && lost(i) == 0;
        let clean = (self.rows.iter().enumerate())
            .filter(|&(i, r)| is_clean(i, r))
            .count();
        let mut out = Vec::new();
        let answer = self.answer.lines();
        if clean == n {
            out.push(format!("Sweep summary: all {n} cell(s) passed.{suffix}"));
            out.extend(answer);
            out.push(cache);
            return lines(out);
        }
        let failing = self
            .rows
            .iter()
            .filter(|r| r.stats.error.is_none() && r.stats.failed_count > 0)
            .count();
        out.push(format!("Sweep summary: {n} cell(s) -- {clean} clean, {failing} with failing trials, {} with errors.{suffix}", n - clean - failing));
        for (i, row) in (self.rows.iter().enumerate()).filter(|&(i, r)| !is_clean(i, r)) {
            let s = &row.stats;
            let (bucket, detail) = match &s.error {
                Some(e) => ("error", format!("cell did not run ({})", one_line(e))),
                None => {
                    let mut parts = Vec::new();
                    if s.failed_count > 0 {
                        parts.push(format!("{} failed", s.failed_count));
                    }
                    if s.error_count > 0 {
                        parts.push(format!("{} errored", s.error_count));
                    }
                    if lost(i) > 0 {
                        parts.push(format!("{} not recorded", lost(i)));
                    }
                    (
                        if s.failed_count > 0 { "fail" } else { "error" },
                        format!("{} of {} trial(s)", parts.join(", "), s.trials + lost(i)),
                    )
                }
            };
            let hint = s
                .failure_hints
                .first()
                .map(|(h, _)| format!(" ({})", one_line(h)))
                .unwrap_or_default();
            let tag = if opts.resumed(row) { " [resumed]" } else { "" };
            out.push(format!(
                "  [{bucket}] {}: {detail}{hint}{tag} -> {}",
                s.name,
                self.cell_dir(&s.name)
            ));
        }
        out.extend(answer);
        out.push(cache);
        out.push(format!(
            "Full matrix: {}/matrix.md",
            opts.run_dir.trim_end_matches('/')
        ));
        lines(out)
    }
}

fn lines(v: Vec<String>) -> String {
    let mut s = v.join("\n");
    s.push('\n');
    s
}
