//! What matrix.md and report.html say about the node the run was built on: `aorta doctor`'s
//! verdict (the run's doctor.json, [`aorta_doctor::NodeVerdict`]) and, for a trial whose kernel
//! log named an Xid, what the doctor said about that GPU (`aorta_doctor::report::xid_link`, the
//! function `aorta classify --doctor` prints).

use aorta_doctor::{Check, NodeVerdict, Status};

/// The warning a run built on a failing node carries: its results say nothing about a
/// mitigation.
pub(crate) fn banner(v: &NodeVerdict) -> Option<String> {
    if v.status != Status::Fail {
        return None;
    }
    let how = if v.marked {
        " and was built anyway (--doctor-mark)"
    } else {
        ""
    };
    Some(format!(
        "This run's node failed aorta doctor --level {}{how}: do not credit or blame a mitigation for these results.",
        v.level.word()
    ))
}

/// `fail pcie.link [GPU 0 00000000:00:06.0]: Gen3 x8 (expected Gen5 x16); do: reseat …`.
pub(crate) fn flagged_line(c: &Check) -> String {
    let mut line = format!("{} {}", c.status, c.id);
    if let Some(g) = &c.gpu {
        line.push_str(&format!(" [GPU {g}]"));
    }
    if let Some(m) = &c.measured {
        line.push_str(&format!(": {m}"));
    }
    if let Some(t) = &c.threshold {
        line.push_str(&format!(" (expected {t})"));
    }
    if let Some(r) = &c.remedy {
        line.push_str(&format!("; do: {r}"));
    }
    line
}

/// What the doctor said about the GPU a trial's Xid names (`xid`, `pci`: the classifier's
/// Tier 3 captures `xid` and `xid_pci`).
pub(crate) fn xid_note(v: Option<&NodeVerdict>, xid: &str, pci: Option<&str>) -> String {
    let Some(v) = v else {
        return "the node was not checked (build with --doctor quick to link an Xid to the node's health)".into();
    };
    match pci {
        Some(pci) => aorta_doctor::report::xid_line(v, Some(xid), pci),
        None => format!("the Xid line names no GPU; {}", v.summary_line()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aorta_doctor::{GpuSummary, Level, Report};

    fn verdict(fail: bool, marked: bool) -> NodeVerdict {
        let c = Check::new("pcie.link", Some("0 00000000:00:06.0"), "s")
            .measured("Gen3 x8")
            .threshold("Gen5 x16");
        let c = if fail {
            c.fail("reseat the card")
        } else {
            c.pass()
        };
        let gpus = vec![GpuSummary {
            label: "0 00000000:00:06.0".into(),
            name: None,
            vendor: "nvidia".into(),
        }];
        Report::new(Level::Quick, None, gpus, vec![c], 0.1).verdict(marked)
    }

    #[test]
    fn only_a_failing_node_gets_the_banner() {
        assert_eq!(
            banner(&verdict(true, true)).unwrap(),
            "This run's node failed aorta doctor --level quick and was built anyway (--doctor-mark): do not credit or blame a mitigation for these results."
        );
        assert!(banner(&verdict(false, false)).is_none());
        assert_eq!(
            flagged_line(&verdict(true, true).flagged[0]),
            "fail pcie.link [GPU 0 00000000:00:06.0]: Gen3 x8 (expected Gen5 x16); do: reseat the card"
        );
    }

    #[test]
    fn an_xid_is_linked_to_the_gpu_at_its_address() {
        let v = verdict(true, true);
        assert_eq!(
            xid_note(Some(&v), "79", Some("PCI:0000:00:06")),
            "doctor quick said GPU 0 00000000:00:06.0 was fail (fail pcie.link); Xid 79: the GPU fell off the bus: drain the node, reseat the card / check the riser and power; RMA if it recurs"
        );
        assert_eq!(
            xid_note(Some(&v), "79", Some("PCI:0000:18:00")),
            "doctor's report has no GPU at PCI:0000:18:00"
        );
        assert!(
            xid_note(Some(&verdict(false, false)), "13", Some("PCI:0000:00:06"))
                .starts_with("doctor quick said GPU 0 00000000:00:06.0 was pass; Xid 13:")
        );
        assert!(
            xid_note(None, "79", Some("PCI:0000:00:06")).starts_with("the node was not checked")
        );
        assert_eq!(
            xid_note(Some(&v), "79", None),
            "the Xid line names no GPU; doctor quick: fail (1 fail, 0 warn, 0 pass, 0 n/a)"
        );
    }
}
