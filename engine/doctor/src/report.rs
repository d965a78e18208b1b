//! What `aorta doctor` hands back: every check, the overall status, and its two renderings
//! (the terminal's table and `--json`, also written as doctor.json into a sweep's run
//! directory).

use serde::{Deserialize, Serialize};

use crate::verdict::{Check, Status};

/// Bumped when a field changes meaning.
pub const REPORT_SCHEMA: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Passive only: vendor tools, sysfs, the kernel log; no kernel launches (≤ 5 s).
    Quick,
    /// Quick plus the active checks on every selected GPU (≤ 60 s a GPU).
    Medium,
    /// Medium with the memory test over most of free memory and a longer GEMM.
    Long,
}

impl Level {
    pub fn word(self) -> &'static str {
        match self {
            Level::Quick => "quick",
            Level::Medium => "medium",
            Level::Long => "long",
        }
    }
}

/// One GPU as the report names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// `"0 00000000:00:06.0"`, as in each check's `gpu`.
    pub label: String,
    pub name: Option<String>,
    pub vendor: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub level: Level,
    /// The worst verdict of any check (not applicable only when every check is).
    pub status: Status,
    pub host: Option<String>,
    pub gpus: Vec<GpuSummary>,
    pub checks: Vec<Check>,
    pub elapsed_sec: f64,
}

impl Report {
    pub fn new(
        level: Level,
        host: Option<String>,
        gpus: Vec<GpuSummary>,
        checks: Vec<Check>,
        elapsed_sec: f64,
    ) -> Report {
        let status = checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::NotApplicable);
        Report {
            schema: REPORT_SCHEMA,
            level,
            status,
            host,
            gpus,
            checks,
            elapsed_sec,
        }
    }

    /// Whether a sweep should refuse this node.
    pub fn failed(&self) -> bool {
        self.status == Status::Fail
    }

    pub fn count(&self, s: Status) -> usize {
        self.checks.iter().filter(|c| c.status == s).count()
    }

    /// The failing checks, one line each: `fail pcie.link [0 00000000:00:06.0]: remedy`.
    pub fn failures(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| {
                format!(
                    "{}{}: {}",
                    c.id,
                    c.gpu
                        .as_deref()
                        .map(|g| format!(" [GPU {g}]"))
                        .unwrap_or_default(),
                    c.remedy.as_deref().unwrap_or("")
                )
            })
            .collect()
    }

    /// One line: `doctor quick: fail (2 fail, 1 warn, 30 pass, 6 n/a) in 1.2 s`.
    pub fn summary_line(&self) -> String {
        format!(
            "doctor {}: {} ({} fail, {} warn, {} pass, {} n/a) in {:.1} s",
            self.level.word(),
            self.status,
            self.count(Status::Fail),
            self.count(Status::Warn),
            self.count(Status::Pass),
            self.count(Status::NotApplicable),
            self.elapsed_sec
        )
    }

    /// The terminal table: one line per check, the remedy (or the reason) indented under it.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for g in &self.gpus {
            out.push_str(&format!(
                "GPU {} {} ({})\n",
                g.label,
                g.name.as_deref().unwrap_or("?"),
                g.vendor
            ));
        }
        let id_w = self.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
        let gpu_w = self
            .checks
            .iter()
            .map(|c| {
                c.gpu
                    .as_deref()
                    .map_or(4, |g| g.split(' ').next().unwrap_or("").len() + 3)
            })
            .max()
            .unwrap_or(4);
        for c in &self.checks {
            let gpu = c
                .gpu
                .as_deref()
                .map(|g| format!("gpu{}", g.split(' ').next().unwrap_or("")))
                .unwrap_or_else(|| "node".into());
            let mut line = format!("{:<4}  {:<id_w$}  {:<gpu_w$}", c.status.word(), c.id, gpu);
            if let Some(m) = &c.measured {
                line.push_str("  ");
                line.push_str(m);
            }
            if let (Some(t), true) = (
                &c.threshold,
                matches!(c.status, Status::Warn | Status::Fail),
            ) {
                line.push_str(&format!("  (expected {t})"));
            }
            out.push_str(line.trim_end());
            out.push('\n');
            if let Some(r) = &c.remedy {
                out.push_str(&format!("      do: {r}\n"));
            }
            if let Some(r) = &c.reason {
                out.push_str(&format!("      why: {r}\n"));
            }
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }
}

/// What a doctor report says about the GPU an Xid names (`aorta classify --doctor`): the
/// GPU's worst verdict and its failing or warning checks, and NVIDIA's catalogue reading of
/// the Xid. `None` when the report has no GPU at that PCI address.
pub fn xid_link(report: &Report, xid: Option<&str>, pci: &str) -> Option<String> {
    let gpu = report.gpus.iter().find(|g| {
        g.label
            .split(' ')
            .nth(1)
            .is_some_and(|bus| crate::kernel_log::pci_matches(pci, bus))
    })?;
    let mine: Vec<&Check> = report
        .checks
        .iter()
        .filter(|c| c.gpu.as_deref() == Some(gpu.label.as_str()))
        .collect();
    let worst = mine
        .iter()
        .map(|c| c.status)
        .max()
        .unwrap_or(Status::NotApplicable);
    let bad: Vec<String> = mine
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
        .map(|c| format!("{} {}", c.status, c.id))
        .collect();
    let catalogue = xid
        .and_then(|x| x.parse::<u32>().ok())
        .map(|x| format!("; Xid {x}: {}", crate::kernel_log::xid_weight(x).1))
        .unwrap_or_default();
    Some(format!(
        "doctor {} said GPU {} was {worst}{}{catalogue}",
        report.level.word(),
        gpu.label,
        if bad.is_empty() {
            String::new()
        } else {
            format!(" ({})", bad.join(", "))
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overall_is_the_worst_and_renders() {
        let checks = vec![
            Check::new("a.b", Some("0 00000000:00:06.0"), "s")
                .measured("1")
                .pass(),
            Check::new("c.d", None, "s").not_applicable("nothing"),
            Check::new("e.f", Some("0 00000000:00:06.0"), "s")
                .measured("x8")
                .threshold("x16")
                .fail("reseat"),
        ];
        let r = Report::new(Level::Quick, None, vec![], checks, 0.5);
        assert_eq!(r.status, Status::Fail);
        assert!(r.failed());
        assert_eq!(r.failures(), ["e.f [GPU 0 00000000:00:06.0]: reseat"]);
        let t = r.render_text();
        assert!(
            t.contains("fail  e.f  gpu0  x8  (expected x16)\n      do: reseat\n"),
            "{t}"
        );
        assert!(t.contains("n/a   c.d  node\n      why: nothing\n"), "{t}");
        assert!(t.ends_with("doctor quick: fail (1 fail, 0 warn, 1 pass, 1 n/a) in 0.5 s\n"));
        let gpus = vec![GpuSummary {
            label: "0 00000000:00:06.0".into(),
            name: None,
            vendor: "nvidia".into(),
        }];
        let linked = Report::new(Level::Quick, None, gpus, r.checks.clone(), 0.5);
        assert_eq!(
            xid_link(&linked, Some("79"), "PCI:0000:00:06").unwrap(),
            "doctor quick said GPU 0 00000000:00:06.0 was fail (fail e.f); Xid 79: the GPU fell off the bus: drain the node, reseat the card / check the riser and power; RMA if it recurs"
        );
        assert!(xid_link(&linked, Some("79"), "PCI:0000:18:00").is_none());
        let empty = Report::new(Level::Quick, None, vec![], vec![], 0.0);
        assert_eq!(empty.status, Status::NotApplicable);
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
