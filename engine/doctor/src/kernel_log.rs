//! Xid, SXid and amdgpu events in the kernel log since boot, found by the classifier's Tier 3
//! patterns (`aorta_classify::TIER3_LOG_PATTERNS`, the same regexes that judge a trial's
//! dmesg), each event then weighed by NVIDIA's Xid catalogue.
//!
//! The log comes from `/dev/kmsg` read whole (one record per read), else `dmesg`; where neither
//! is readable the check is not applicable, with the reason.

use std::sync::LazyLock;

use aorta_classify::{KernelLog, TIER3_LOG_PATTERNS};

use crate::proc::run_captured;

/// One event: the Tier 3 detector that fired, the Xid number and PCI address where it is an
/// NVIDIA Xid or SXid, and the log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub detector: String,
    pub xid: Option<u32>,
    pub pci: Option<String>,
    pub line: String,
}

/// How a kernel event weighs on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Weight {
    /// Usually the application's fault (Xid 13, 31, 43, 45): noted, not held against the GPU.
    Application,
    /// Worth a look (a contained ECC error, an SXid that is not fatal).
    Warn,
    /// The hardware or the driver is in trouble: do not trust the node until it is reset.
    Fail,
}

/// NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), for the numbers a sweep meets:
/// the weight and the catalogue's action.
pub fn xid_weight(xid: u32) -> (Weight, &'static str) {
    match xid {
        13 | 31 | 43 | 45 | 68 | 69 => (
            Weight::Application,
            "usually the application's fault (illegal access, stopped channel); a GPU fault only if it recurs across applications",
        ),
        63 => (
            Weight::Warn,
            "a row remap or page retirement was recorded: reset the GPU at the next drain so it takes effect",
        ),
        92 => (Weight::Warn, "high single-bit ECC rate: watch the ECC counters; RMA if it keeps rising"),
        94 => (
            Weight::Warn,
            "contained uncorrectable ECC error: the affected application was stopped; reset the GPU to remap the row",
        ),
        48 => (Weight::Fail, "double-bit ECC error: drain the node, reset the GPU; RMA if it recurs"),
        64 => (Weight::Fail, "row remapping failed: drain the node and file an RMA"),
        74 => (Weight::Fail, "NVLink error: drain the node, reset the GPUs, check the NVLink bridge / baseboard"),
        79 => (
            Weight::Fail,
            "the GPU fell off the bus: drain the node, reseat the card / check the riser and power; RMA if it recurs",
        ),
        95 => (Weight::Fail, "uncontained ECC error: drain the node and reset the GPU; RMA if it recurs"),
        119 | 120 => (Weight::Fail, "GSP firmware error or timeout: drain the node and reset the GPU; update the driver if it recurs"),
        140 => (Weight::Fail, "unrecovered ECC error: drain the node and reset the GPU"),
        154 => (Weight::Fail, "the driver asks for a recovery action (nvidia-smi -q: GPU Recovery Action): do it before trusting the GPU"),
        _ => (
            Weight::Warn,
            "look the Xid up in NVIDIA's catalogue (docs.nvidia.com/deploy/xid-errors) before trusting the GPU",
        ),
    }
}

/// The classifier's Tier 3 patterns, compiled once (a pattern that does not compile is the
/// classifier's bug, caught by its own tests; doctor skips it).
static PATTERNS: LazyLock<Vec<(&'static str, fancy_regex::Regex)>> = LazyLock::new(|| {
    TIER3_LOG_PATTERNS
        .iter()
        .filter_map(|p| p.compile().ok().map(|r| (p.id, r)))
        .collect()
});

/// NVSwitch errors: the classifier's catalogue deliberately keeps them out of the GPU Xid
/// detectors (an SXid is not a GPU Xid), so doctor counts them with this one pattern of its own.
static SXID: LazyLock<fancy_regex::Regex> = LazyLock::new(|| {
    fancy_regex::Regex::new(r"SXid \((?P<pci>[^)]*)\): (?P<xid>\d+)").expect("a valid regex")
});

fn line_of(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    text[start..end].trim().to_owned()
}

/// Every Tier 3 event in `text`, in log order within each detector. The ECC pattern also
/// matches ECC-class Xid lines that `tier3:nvidia_xid` reports; both are kept (the checks
/// weigh Xids by number and count the rest).
pub fn scan(text: &str) -> Vec<Event> {
    let mut out = Vec::new();
    let patterns = PATTERNS
        .iter()
        .map(|(id, re)| (*id, re))
        .chain([("sxid", &*SXID)]);
    for (id, re) in patterns {
        for caps in re.captures_iter(text).flatten() {
            let m = caps.get(0).expect("group 0");
            out.push(Event {
                detector: id.to_owned(),
                xid: caps.name("xid").and_then(|x| x.as_str().parse().ok()),
                pci: caps.name("pci").map(|p| p.as_str().to_owned()),
                line: line_of(text, m.start()),
            });
        }
    }
    out
}

/// Whether an Xid's `PCI:0000:18:00` names the GPU at bus id `00000000:18:00.0`.
pub fn pci_matches(xid_pci: &str, bus_id: &str) -> bool {
    let norm = |s: &str| {
        let s = s.trim().trim_start_matches("PCI:").to_ascii_lowercase();
        let s = s.split('.').next().unwrap_or("").to_owned();
        let parts: Vec<&str> = s.split(':').collect();
        match parts.as_slice() {
            [dom, bus, dev] => Some((
                u32::from_str_radix(dom, 16).ok()?,
                u32::from_str_radix(bus, 16).ok()?,
                u32::from_str_radix(dev, 16).ok()?,
            )),
            [bus, dev] => Some((
                0,
                u32::from_str_radix(bus, 16).ok()?,
                u32::from_str_radix(dev, 16).ok()?,
            )),
            _ => None,
        }
    };
    matches!((norm(xid_pci), norm(bus_id)), (Some(a), Some(b)) if a == b)
}

/// The kernel log since boot and where it came from, or why it could not be read.
pub fn read() -> Result<(String, &'static str), String> {
    match KernelLog::read_all() {
        Ok(t) => Ok((t, "/dev/kmsg")),
        Err(kmsg) => match run_captured("dmesg", &[], std::time::Duration::from_secs(10)) {
            Ok(t) => Ok((t, "dmesg")),
            Err(dmesg) => Err(format!("{kmsg}; {dmesg}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_healthy_recording_has_no_events() {
        let text = crate::nvidia::tests::fixture("h100-cuda13/kmsg.txt");
        assert_eq!(scan(&text), vec![]);
    }

    #[test]
    fn xid_79_is_found_with_its_gpu() {
        let text = crate::nvidia::tests::fixture("doctor/kmsg-xid79.txt");
        let ev = scan(&text);
        let xid: Vec<_> = ev
            .iter()
            .filter(|e| e.detector == "tier3:nvidia_xid")
            .collect();
        assert_eq!(xid.len(), 1, "{ev:?}");
        assert_eq!(xid[0].xid, Some(79));
        assert!(pci_matches(
            xid[0].pci.as_deref().unwrap(),
            "00000000:00:06.0"
        ));
        assert!(!pci_matches("PCI:0000:18:00", "00000000:00:06.0"));
        assert_eq!(xid_weight(79).0, Weight::Fail);
        assert_eq!(xid_weight(13).0, Weight::Application);
    }

    #[test]
    fn an_ecc_line_without_an_xid_warns_at_node_level() {
        let ev =
            scan("[3.0] NVRM: GPU at PCI:0000:00:06: GPU-1: uncorrectable ECC error detected\n");
        let mut out = Vec::new();
        crate::checks::kernel_events(&ev, None, &[], "recorded", &mut out);
        assert_eq!(out[0].status, crate::Status::Warn, "{out:?}");
    }

    #[test]
    fn sxid_and_amd_events() {
        let ev = scan("[1.0] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32\n[2.0] amdgpu 0000:c1:00.0: amdgpu: GPU reset(2) succeeded!\n");
        let ids: Vec<_> = ev.iter().map(|e| e.detector.as_str()).collect();
        assert!(ids.contains(&"sxid"), "{ids:?}");
        assert!(ids.contains(&"tier3:amdgpu_reset"), "{ids:?}");
        let s = ev.iter().find(|e| e.detector == "sxid").unwrap();
        assert_eq!(s.xid, Some(12028));
        assert!(s.line.starts_with("[1.0] nvidia-nvswitch0"));
    }

    #[test]
    fn reads_a_kmsg_dump_record_by_record() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kmsg");
        std::fs::write(
            &p,
            "3,1,5000000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1, GPU has fallen off the bus.\n",
        )
        .unwrap();
        let text = KernelLog::read_all_path(&p).unwrap();
        assert!(text.contains("NVRM: Xid (PCI:0000:00:06): 79"), "{text}");
        assert_eq!(scan(&text)[0].xid, Some(79));
    }
}
