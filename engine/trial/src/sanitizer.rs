//! What a GPU sanitizer found in one trial, grouped: the record keeps the summary, the
//! tool's full logs stay in the trial directory (`sanitizer-<pid>.log`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SanitizerReport {
    /// `memcheck`, `racecheck`, `synccheck`, `initcheck`, `consan`, `waitcheck`.
    pub tool: String,
    /// Errors the tool counted (its summary line: printed or not), else the hazards listed.
    pub errors: u64,
    /// The distinct hazards, most frequent first.
    pub hazards: Vec<Hazard>,
    /// The logs read, relative to the trial directory.
    pub logs: Vec<String>,
    /// Whether the report covers the whole run: compute-sanitizer's summary line was seen (a
    /// log cut short lacks one); RocJITsu's coverage evidence was read and accepted.
    pub complete: bool,
    /// Why the report does not cover the run, where the tool says (ConSan's coverage gate:
    /// `verdict dynamic_complete=false`, a Waitcheck analysis that failed). A report with
    /// gaps and no hazard is never a pass: AORTA 0.3.0 fails such a run closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
}

/// One kind of hazard at one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hazard {
    /// As the tool words it: `Invalid __global__ write of size 4 bytes`, `Uninitialized
    /// __global__ memory read of size 4 bytes`, `Barrier error detected. Divergent thread(s)
    /// in warp.`, `Race (Write / Write) on __shared__ memory`, `Program hit cudaErrorX …`.
    pub kind: String,
    /// The kernel (device function) as the tool names it, when it does.
    pub kernel: Option<String>,
    /// `file:line`, when the binary carries line information (`-lineinfo`); for a race, both
    /// sides joined with ` / `.
    pub location: Option<String>,
    /// Reports of this hazard at this place.
    pub count: u64,
    /// The first report's address detail: `Access to 0x… is out of bounds; and is 1 bytes
    /// after the nearest allocation at 0x… of size 512 bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl SanitizerReport {
    /// One line for matrix.md and the report: `memcheck: 129 errors; 100 × Invalid __global__
    /// write of size 4 bytes in oob(float *, int) at oob.cu:5 (…)`.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{}: {} error{}",
            self.tool,
            self.errors,
            if self.errors == 1 { "" } else { "s" }
        );
        if let Some(h) = self.hazards.first() {
            s.push_str(&format!("; {} × {}", h.count, h.kind));
            if let Some(k) = &h.kernel {
                s.push_str(&format!(" in {k}"));
            }
            if let Some(l) = &h.location {
                s.push_str(&format!(" at {l}"));
            }
            if let Some(d) = &h.detail {
                s.push_str(&format!(" ({d})"));
            }
            if self.hazards.len() > 1 {
                s.push_str(&format!("; {} more kind(s)", self.hazards.len() - 1));
            }
        }
        if !self.gaps.is_empty() {
            let shown: Vec<&str> = self.gaps.iter().take(3).map(String::as_str).collect();
            let more = self.gaps.len().saturating_sub(3);
            s.push_str(&format!(" (incomplete: {}", shown.join("; ")));
            if more > 0 {
                s.push_str(&format!("; {more} more"));
            }
            s.push(')');
        } else if !self.complete {
            s.push_str(" (log incomplete: no summary line)");
        }
        s
    }
}

/// One profiler's view of a trial's GPU kernels (a probe recipe's `collect: [ncu]` or
/// `[torch_profiler]`), summed per kernel name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// `ncu` or `torch_profiler`.
    pub tool: String,
    /// By total device time, largest first.
    pub kernels: Vec<KernelStat>,
    /// Why the profile is missing or partial (tool not found, no output, a kernel cap hit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelStat {
    pub name: String,
    pub calls: u64,
    /// Device time over all calls, microseconds.
    pub total_us: f64,
}

impl KernelStat {
    /// Rows of one kernel name added up, largest total first (then by name): one trial's
    /// launches, or a cell's trials.
    pub fn sum_by_name(rows: impl IntoIterator<Item = KernelStat>) -> Vec<KernelStat> {
        let mut by: std::collections::BTreeMap<String, KernelStat> = Default::default();
        for r in rows {
            let e = by.entry(r.name.clone()).or_insert(KernelStat {
                name: r.name,
                calls: 0,
                total_us: 0.0,
            });
            e.calls += r.calls;
            e.total_us += r.total_us;
        }
        let mut v: Vec<KernelStat> = by.into_values().collect();
        v.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then(a.name.cmp(&b.name)));
        v
    }
}
