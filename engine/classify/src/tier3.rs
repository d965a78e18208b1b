//! Tier 3 — kernel log and GPU counters (AORTA §5.4), plus NVIDIA's Xid / ECC events.

use std::sync::LazyLock;

use aorta_trial::Capture;

use crate::catalogue::TIER3_LOG_PATTERNS;
use crate::model::Observation;

/// Kernel logs longer than this keep only their tail: the trial's events are the newest.
pub const MAX_DMESG_BYTES: usize = 10 * 1024 * 1024;

/// VRAM growth across a trial at or above this many MiB is reported (as a warning).
pub const VRAM_GROWTH_THRESHOLD_MIB: i64 = 256;

/// A compiled catalogue pattern, or why it does not compile.
pub(crate) type Compiled = Result<fancy_regex::Regex, Box<fancy_regex::Error>>;

/// Compiled once; a pattern that failed to compile (a catalogue bug, caught by its own tests)
/// is kept as its error so the classifier reports it instead of panicking.
pub(crate) static DMESG_REGEXES: LazyLock<Vec<(&'static str, Compiled)>> = LazyLock::new(|| {
    TIER3_LOG_PATTERNS
        .iter()
        .map(|p| (p.id, p.compile()))
        .collect()
});

/// The last `MAX_DMESG_BYTES` of `text`, starting on a character boundary.
pub(crate) fn dmesg_tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(MAX_DMESG_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// What Tier 3 found: failing ids (before disables) and advisory ids.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Tier3 {
    pub fired: Vec<String>,
    pub warn: Vec<String>,
}

/// Runs Tier 3. `check_vram` is false when the recipe or a disable turns the VRAM check off.
/// The Xid number and PCI address of the first Xid line go to `capture.xid` / `xid_pci`.
pub(crate) fn detect(
    obs: &Observation,
    check_vram: bool,
    capture: &mut Capture,
    errors: &mut Vec<String>,
) -> Tier3 {
    let mut out = Tier3::default();
    if let Some(text) = obs.dmesg_text.as_deref() {
        let text = dmesg_tail(text);
        for (id, re) in DMESG_REGEXES.iter() {
            let re = match re {
                Ok(re) => re,
                Err(e) => {
                    errors.push(format!("PatternError: {id}: {e}"));
                    continue;
                }
            };
            match re.captures(text) {
                Ok(Some(caps)) => {
                    if let Some(xid) = caps.name("xid") {
                        capture.groups.insert("xid".into(), xid.as_str().into());
                        if let Some(pci) = caps.name("pci") {
                            capture.groups.insert("xid_pci".into(), pci.as_str().into());
                        }
                    }
                    out.fired.push((*id).to_string());
                }
                Ok(None) => {}
                Err(e) => errors.push(format!("RegexRuntimeError: {id}: {e}")),
            }
        }
    }
    for id in &obs.tier3_extra {
        if !out.fired.contains(id) {
            out.fired.push(id.clone());
        }
    }
    if let (Some(pre), Some(post)) = (obs.gpu_pre, obs.gpu_post) {
        if let (true, Some(a), Some(b)) = (check_vram, pre.vram_used_mib, post.vram_used_mib) {
            if b.saturating_sub(a) >= VRAM_GROWTH_THRESHOLD_MIB {
                out.warn.push("tier3:vram_growth".into());
            }
        }
        if let (Some(a), Some(b)) = (pre.throttle, post.throttle) {
            if b > a {
                out.fired.push("tier3:thermal_throttle".into());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuSnapshot;

    fn snap(vram: i64, throttle: i64) -> Option<GpuSnapshot> {
        Some(GpuSnapshot {
            vram_used_mib: Some(vram),
            throttle: Some(throttle),
        })
    }

    fn run(obs: &Observation, check_vram: bool) -> Tier3 {
        detect(obs, check_vram, &mut Capture::default(), &mut Vec::new())
    }

    #[test]
    fn vram_delta_and_throttle() {
        let o = |pre, post| Observation {
            gpu_pre: pre,
            gpu_post: post,
            ..Default::default()
        };
        assert_eq!(
            run(&o(snap(100, 0), snap(600, 0)), true).warn,
            ["tier3:vram_growth"]
        );
        assert!(run(&o(snap(100, 0), snap(600, 0)), false).warn.is_empty());
        assert_eq!(
            run(&o(snap(100, 0), snap(356, 0)), true).warn,
            ["tier3:vram_growth"],
            "exactly 256 fires"
        );
        assert!(run(&o(snap(100, 0), snap(355, 0)), true).warn.is_empty());
        assert!(run(&o(None, snap(600, 1)), true) == Tier3::default());
        let t = run(&o(snap(0, 0), snap(0, 1)), true);
        assert_eq!(t.fired, ["tier3:thermal_throttle"]);
        assert!(t.warn.is_empty());
        let partial = Some(GpuSnapshot {
            vram_used_mib: None,
            throttle: None,
        });
        assert_eq!(run(&o(partial, snap(600, 1)), true), Tier3::default());
    }

    #[test]
    fn tail_respects_char_boundaries() {
        let text = format!("é{}", "x".repeat(MAX_DMESG_BYTES - 1));
        // 'é' is 2 bytes: the cut would fall inside it, so the tail starts after it.
        assert_eq!(dmesg_tail(&text).len(), MAX_DMESG_BYTES - 1);
        assert_eq!(dmesg_tail("short"), "short");
    }

    #[test]
    fn extra_ids_are_deduplicated() {
        let o = Observation {
            dmesg_text: Some("amdgpu: GPU reset begin!".into()),
            tier3_extra: vec!["tier3:amdgpu_reset".into(), "tier3:sdma_timeout".into()],
            ..Default::default()
        };
        assert_eq!(
            run(&o, true).fired,
            ["tier3:amdgpu_reset", "tier3:sdma_timeout"]
        );
    }
}
