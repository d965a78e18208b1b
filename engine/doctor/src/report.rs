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

    /// What a run's artifacts show of this report ([`NodeVerdict`]).
    pub fn verdict(&self, marked: bool) -> NodeVerdict {
        NodeVerdict::of(self, marked)
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

/// A run directory's doctor.json: the build's preflight report and whether the run was built
/// on a failing node anyway (`--doctor-mark`). A plain `aorta doctor --json` report reads as one
/// with `marked: false`, so `aorta classify --doctor` takes either ([`Recorded::from_json`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    #[serde(flatten)]
    pub report: Report,
    pub marked: bool,
}

impl Recorded {
    /// Reads doctor.json (or any `aorta doctor --json` report). Not through a flattened
    /// `Deserialize`: with serde_json's `arbitrary_precision` (on in the `aorta` binary's
    /// build) a flattened struct's numbers arrive as maps and `elapsed_sec` fails to read.
    pub fn from_json(text: &str) -> serde_json::Result<Recorded> {
        #[derive(Deserialize)]
        struct Marked {
            #[serde(default)]
            marked: bool,
        }
        let report: Report = serde_json::from_str(text)?;
        let Marked { marked } = serde_json::from_str(text)?;
        Ok(Recorded { report, marked })
    }

    /// What the run's artifacts show of it.
    pub fn verdict(&self) -> NodeVerdict {
        NodeVerdict::of(&self.report, self.marked)
    }
}

/// How many checks came out each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub fail: usize,
    pub warn: usize,
    pub pass: usize,
    pub not_applicable: usize,
}

/// One GPU and the worst verdict of its checks: what an Xid's PCI address is matched against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuVerdict {
    /// `"0 00000000:00:06.0"`, as in each check's `gpu`.
    pub label: String,
    pub name: Option<String>,
    pub status: Status,
}

/// What a run's artifacts say about the node (env.json's `doctor`, matrix.md, report.html):
/// the verdict and what to act on. Checks that passed or did not apply are only counted, so a
/// preflight on a later build changes the artifacts' keys (and re-renders them) only when the
/// verdict or a flagged figure changed, never because a passing figure moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeVerdict {
    pub level: Level,
    /// The worst verdict of any check.
    pub status: Status,
    /// Built on a failing node anyway (`--doctor-mark`).
    pub marked: bool,
    pub counts: Counts,
    pub gpus: Vec<GpuVerdict>,
    /// The checks that warned or failed, in the report's order, with figure, threshold and
    /// remedy.
    pub flagged: Vec<Check>,
}

impl NodeVerdict {
    pub fn of(report: &Report, marked: bool) -> NodeVerdict {
        let gpus = report
            .gpus
            .iter()
            .map(|g| GpuVerdict {
                label: g.label.clone(),
                name: g.name.clone(),
                status: report
                    .checks
                    .iter()
                    .filter(|c| c.gpu.as_deref() == Some(g.label.as_str()))
                    .map(|c| c.status)
                    .max()
                    .unwrap_or(Status::NotApplicable),
            })
            .collect();
        NodeVerdict {
            level: report.level,
            status: report.status,
            marked,
            counts: Counts {
                fail: report.count(Status::Fail),
                warn: report.count(Status::Warn),
                pass: report.count(Status::Pass),
                not_applicable: report.count(Status::NotApplicable),
            },
            gpus,
            flagged: report
                .checks
                .iter()
                .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
                .cloned()
                .collect(),
        }
    }

    /// `doctor quick: fail (2 fail, 1 warn, 30 pass, 6 n/a)`.
    pub fn summary_line(&self) -> String {
        let c = &self.counts;
        format!(
            "doctor {}: {} ({} fail, {} warn, {} pass, {} n/a)",
            self.level.word(),
            self.status,
            c.fail,
            c.warn,
            c.pass,
            c.not_applicable
        )
    }
}

/// What a doctor's verdict says about the GPU an Xid names (`aorta classify --doctor`, a
/// trial's Xid in report.html): the GPU's worst verdict and its failing or warning checks, and
/// NVIDIA's catalogue reading of the Xid. `None` when the verdict has no GPU at that PCI
/// address.
pub fn xid_link(verdict: &NodeVerdict, xid: Option<&str>, pci: &str) -> Option<String> {
    let gpu = verdict.gpus.iter().find(|g| {
        g.label
            .split(' ')
            .nth(1)
            .is_some_and(|bus| crate::kernel_log::pci_matches(pci, bus))
    })?;
    let bad: Vec<String> = verdict
        .flagged
        .iter()
        .filter(|c| c.gpu.as_deref() == Some(gpu.label.as_str()))
        .map(|c| format!("{} {}", c.status, c.id))
        .collect();
    let catalogue = xid
        .and_then(|x| x.parse::<u32>().ok())
        .map(|x| format!("; Xid {x}: {}", crate::kernel_log::xid_weight(x).1))
        .unwrap_or_default();
    Some(format!(
        "doctor {} said GPU {} was {}{}{catalogue}",
        verdict.level.word(),
        gpu.label,
        gpu.status,
        if bad.is_empty() {
            String::new()
        } else {
            format!(" ({})", bad.join(", "))
        }
    ))
}

/// [`xid_link`], or the line that says the verdict has no GPU at `pci`: what a reader of a
/// log is told either way.
pub fn xid_line(verdict: &NodeVerdict, xid: Option<&str>, pci: &str) -> String {
    xid_link(verdict, xid, pci).unwrap_or_else(|| format!("doctor's report has no GPU at {pci}"))
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
        let linked = Report::new(Level::Quick, None, gpus, r.checks.clone(), 0.5).verdict(false);
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

    fn two_gpus() -> Report {
        let gpus = ["0 00000000:00:06.0", "1 00000000:00:07.0"]
            .iter()
            .map(|l| GpuSummary {
                label: (*l).into(),
                name: Some("NVIDIA H100 80GB HBM3".into()),
                vendor: "nvidia".into(),
            })
            .collect();
        let checks = vec![
            Check::new("pcie.link", Some("0 00000000:00:06.0"), "s")
                .measured("Gen3 x8")
                .threshold("Gen5 x16")
                .fail("reseat"),
            Check::new("ecc.mode", Some("0 00000000:00:06.0"), "s").pass(),
            Check::new("ecc.mode", Some("1 00000000:00:07.0"), "s").pass(),
            Check::new("mode.persistence", Some("1 00000000:00:07.0"), "s")
                .measured("Disabled")
                .warn("enable it"),
            Check::new("nvlink.state", None, "s").not_applicable("PCIe"),
        ];
        Report::new(Level::Quick, Some("node7".into()), gpus, checks, 1.25)
    }

    /// The verdict keeps what to act on (the flagged checks with figure, threshold and remedy,
    /// each GPU's worst verdict) and counts the rest; it carries no host and no timing.
    #[test]
    fn the_verdict_keeps_the_flagged_checks_and_counts_the_rest() {
        let v = two_gpus().verdict(true);
        assert_eq!(v.status, Status::Fail);
        assert!(v.marked);
        assert_eq!(
            v.counts,
            Counts {
                fail: 1,
                warn: 1,
                pass: 2,
                not_applicable: 1
            }
        );
        let ids: Vec<&str> = v.flagged.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["pcie.link", "mode.persistence"]);
        assert_eq!(v.flagged[0].measured.as_deref(), Some("Gen3 x8"));
        assert_eq!(v.flagged[0].threshold.as_deref(), Some("Gen5 x16"));
        assert_eq!(v.flagged[0].remedy.as_deref(), Some("reseat"));
        let worst: Vec<Status> = v.gpus.iter().map(|g| g.status).collect();
        assert_eq!(worst, [Status::Fail, Status::Warn]);
        assert_eq!(
            v.summary_line(),
            "doctor quick: fail (1 fail, 1 warn, 2 pass, 1 n/a)"
        );
        let json = serde_json::to_string(&v).unwrap();
        assert!(!json.contains("node7") && !json.contains("1.25"), "{json}");
        // A passing figure that moves does not change the verdict.
        let mut again = two_gpus();
        again.checks[1].measured = Some("Enabled".into());
        again.elapsed_sec = 3.0;
        assert_eq!(again.verdict(true), v);
        assert_eq!(
            xid_link(&v, Some("94"), "PCI:0000:00:07").unwrap(),
            "doctor quick said GPU 1 00000000:00:07.0 was warn (warn mode.persistence); Xid 94: contained uncorrectable ECC error: the affected application was stopped; reset the GPU to remap the row"
        );
    }

    /// doctor.json is the report with `marked` beside its fields; a plain `aorta doctor --json`
    /// report reads as an unmarked record.
    #[test]
    fn a_record_is_the_report_and_marked() {
        let rec = Recorded {
            report: two_gpus(),
            marked: true,
        };
        let text = serde_json::to_string_pretty(&rec).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["marked"], true);
        assert_eq!(v["status"], "fail");
        assert_eq!(v["level"], "quick");
        assert_eq!(Recorded::from_json(&text).unwrap(), rec);
        let plain = Recorded::from_json(&serde_json::to_string(&two_gpus()).unwrap()).unwrap();
        assert!(!plain.marked);
        assert_eq!(plain.report, two_gpus());
    }
}
