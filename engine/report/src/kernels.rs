//! Kernel profiles per cell (`collect: [ncu]`, `[torch_profiler]`) and how a cell's kernels
//! differ from the baseline's: which appear, which disappear, which change in time — so "this
//! mitigation makes it pass and costs 54%" comes with where the time went (Holistic Trace
//! Analysis' TraceDiff idea, on per-kernel totals).

use aorta_trial::{KernelStat, TrialRecord};

/// One profiler's kernels over a cell's trials.
#[derive(Debug, Clone, PartialEq)]
pub struct CellProfile {
    pub tool: String,
    /// Trials whose profile has kernels; the figures are means over them.
    pub trials: usize,
    /// Mean per trial, largest total first.
    pub kernels: Vec<KernelStat>,
    /// Distinct notes of trials without a profile (tool missing, no output).
    pub notes: Vec<String>,
}

impl CellProfile {
    pub fn total_us(&self) -> f64 {
        // From +0.0: f64's `sum` starts at -0.0, which a cell without kernels showed as "-0.000 ms".
        self.kernels.iter().fold(0.0, |t, k| t + k.total_us)
    }
}

/// Per tool, in the order the tools first appear.
pub fn cell_profiles(trials: &[&TrialRecord]) -> Vec<CellProfile> {
    let mut out: Vec<CellProfile> = Vec::new();
    let mut sums: Vec<Vec<KernelStat>> = Vec::new();
    for t in trials {
        for p in &t.profiles {
            let i = match out.iter().position(|c| c.tool == p.tool) {
                Some(i) => i,
                None => {
                    out.push(CellProfile {
                        tool: p.tool.clone(),
                        trials: 0,
                        kernels: Vec::new(),
                        notes: Vec::new(),
                    });
                    sums.push(Vec::new());
                    out.len() - 1
                }
            };
            if let Some(n) = &p.note {
                if !out[i].notes.contains(n) {
                    out[i].notes.push(n.clone());
                }
            }
            if !p.kernels.is_empty() {
                out[i].trials += 1;
                sums[i].extend(p.kernels.iter().cloned());
            }
        }
    }
    for (c, rows) in out.iter_mut().zip(sums) {
        let n = c.trials.max(1) as f64;
        // Summed over the cell's trials, then the mean per trial (order kept: n is common).
        c.kernels = KernelStat::sum_by_name(rows)
            .into_iter()
            .map(|mut s| {
                s.calls = (s.calls as f64 / n).round() as u64;
                s.total_us /= n;
                s
            })
            .collect();
    }
    out
}

/// One profiler's table over a run's cells: what matrix.md and report.html both show.
pub struct KernelTable {
    pub tool: String,
    pub rows: Vec<KernelRow>,
}

pub struct KernelRow {
    pub cell: String,
    pub baseline: bool,
    /// Trials profiled, or `0 (why not)`.
    pub trials: String,
    pub total_us: f64,
    /// The top three kernels: short name, mean time per trial, calls.
    pub top: Vec<(String, f64, u64)>,
    /// `(baseline)`, the [`diff_line`] against it, or `—`.
    pub against_baseline: String,
}

/// The tables of every profiler some cell ran under, in the order the tools first appear.
pub fn tables<'a>(
    cells: impl IntoIterator<Item = (&'a str, &'a [CellProfile])>,
    baseline: &str,
) -> Vec<KernelTable> {
    let cells: Vec<(&str, &[CellProfile])> = cells.into_iter().collect();
    let mut tools: Vec<&str> = Vec::new();
    for (_, profiles) in &cells {
        for p in profiles.iter() {
            if !tools.contains(&p.tool.as_str()) {
                tools.push(&p.tool);
            }
        }
    }
    let of =
        |profiles: &[CellProfile], tool: &str| profiles.iter().find(|p| p.tool == tool).cloned();
    tools
        .into_iter()
        .map(|tool| {
            let base = cells
                .iter()
                .find(|(name, _)| *name == baseline)
                .and_then(|(_, p)| of(p, tool))
                .filter(|p| p.trials > 0);
            let rows = cells
                .iter()
                .filter_map(|(name, profiles)| {
                    let p = of(profiles, tool)?;
                    let is_base = *name == baseline;
                    let against_baseline = match (&base, is_base) {
                        (_, true) => "(baseline)".to_string(),
                        (Some(b), false) if p.trials > 0 => diff_line(b, &p),
                        _ => "—".to_string(),
                    };
                    Some(KernelRow {
                        cell: name.to_string(),
                        baseline: is_base,
                        trials: if p.trials == 0 {
                            format!("0 ({})", p.notes.join("; "))
                        } else {
                            p.trials.to_string()
                        },
                        total_us: p.total_us(),
                        top: p
                            .kernels
                            .iter()
                            .take(3)
                            .map(|k| (short(&k.name), k.total_us, k.calls))
                            .collect(),
                        against_baseline,
                    })
                })
                .collect();
            KernelTable {
                tool: tool.to_string(),
                rows,
            }
        })
        .collect()
}

/// A kernel's time in milliseconds, for tables.
pub fn ms(us: f64) -> String {
    if us >= 100_000.0 {
        format!("{:.0} ms", us / 1e3)
    } else if us >= 1_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.3} ms", us / 1e3)
    }
}

/// One line: how `cell`'s kernels differ from `base`'s (same tool). Changes below 10% and
/// 1% of the baseline's device time are left out as noise.
pub fn diff_line(base: &CellProfile, cell: &CellProfile) -> String {
    let (bt, ct) = (base.total_us(), cell.total_us());
    let mut parts = vec![if bt > 0.0 {
        format!(
            "device time {} vs {} ({:+.0}%)",
            ms(ct),
            ms(bt),
            (ct / bt - 1.0) * 100.0
        )
    } else {
        format!("device time {}", ms(ct))
    }];
    let find = |p: &CellProfile, name: &str| p.kernels.iter().find(|k| k.name == name).cloned();
    let new: Vec<String> = cell
        .kernels
        .iter()
        .filter(|k| find(base, &k.name).is_none())
        .take(3)
        .map(|k| format!("`{}` {}", short(&k.name), ms(k.total_us)))
        .collect();
    if !new.is_empty() {
        parts.push(format!("new: {}", new.join(", ")));
    }
    let gone: Vec<String> = base
        .kernels
        .iter()
        .filter(|k| find(cell, &k.name).is_none())
        .take(3)
        .map(|k| format!("`{}` {}", short(&k.name), ms(k.total_us)))
        .collect();
    if !gone.is_empty() {
        parts.push(format!("gone: {}", gone.join(", ")));
    }
    let mut changed: Vec<(f64, String)> = cell
        .kernels
        .iter()
        .filter_map(|k| {
            let b = find(base, &k.name)?;
            let delta = k.total_us - b.total_us;
            let big =
                delta.abs() >= 0.01 * bt && b.total_us > 0.0 && (delta / b.total_us).abs() >= 0.1;
            big.then(|| {
                (
                    delta.abs(),
                    format!(
                        "`{}` {} → {} ({:+.0}%)",
                        short(&k.name),
                        ms(b.total_us),
                        ms(k.total_us),
                        delta / b.total_us * 100.0
                    ),
                )
            })
        })
        .collect();
    changed.sort_by(|a, b| b.0.total_cmp(&a.0));
    if !changed.is_empty() {
        let c: Vec<String> = changed.into_iter().take(3).map(|(_, s)| s).collect();
        parts.push(format!("changed: {}", c.join(", ")));
    }
    parts.join("; ")
}

/// A kernel name without its return type and argument list, at most 60 characters:
/// `void at::native::(anonymous namespace)::reduce_kernel<512, 1>(…)` reads
/// `at::native::{anon}::reduce_kernel<512, 1>`.
pub fn short(name: &str) -> String {
    let n = name.trim();
    let n = n.strip_prefix("void ").unwrap_or(n);
    let n = n.replace("(anonymous namespace)", "{anon}");
    // The argument list: the first '(' outside template brackets.
    let mut depth = 0i32;
    let mut end = n.len();
    for (i, c) in n.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth <= 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let base = n[..end].trim();
    let base = if base.is_empty() { n.as_str() } else { base };
    if base.chars().count() > 60 {
        format!("{}…", base.chars().take(59).collect::<String>())
    } else {
        base.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prof(rows: &[(&str, f64)]) -> CellProfile {
        CellProfile {
            tool: "ncu".into(),
            trials: 1,
            kernels: rows
                .iter()
                .map(|(n, t)| KernelStat {
                    name: n.to_string(),
                    calls: 1,
                    total_us: *t,
                })
                .collect(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_cell_without_kernels_shows_zero_not_minus_zero() {
        assert_eq!(ms(prof(&[]).total_us()), "0.000 ms");
    }

    #[test]
    fn short_names_drop_the_return_type_and_the_arguments() {
        assert_eq!(short("saxpy(float, const float *, float *, int)"), "saxpy");
        assert_eq!(
            short("void at::native::(anonymous namespace)::softmax_warp<float, 4>(float*, int)"),
            "at::native::{anon}::softmax_warp<float, 4>"
        );
        assert_eq!(short("nvjet_sm90_tst_256x128"), "nvjet_sm90_tst_256x128");
    }

    #[test]
    fn the_diff_names_new_gone_and_changed_kernels() {
        let base = prof(&[
            ("gemm(float*)", 1000.0),
            ("allreduce", 500.0),
            ("tiny", 1.0),
        ]);
        let cell = prof(&[
            ("gemm(float*)", 1540.0),
            ("copy_sync", 200.0),
            ("tiny", 2.0),
        ]);
        assert_eq!(
            diff_line(&base, &cell),
            "device time 1.7 ms vs 1.5 ms (+16%); new: `copy_sync` 0.200 ms; gone: `allreduce` 0.500 ms; changed: `gemm` 1.0 ms → 1.5 ms (+54%)"
        );
    }
}
