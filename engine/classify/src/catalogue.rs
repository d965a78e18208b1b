//! Detector ids per tier and the built-in regex patterns (with a sample line each).
//!
//! AORTA 0.2.1's library "1" has seven Tier-4 patterns and five AMD dmesg patterns. aorta adds
//! the NVIDIA side (Xid, ECC/row remap, CUDA/cuBLAS/cuDNN/NCCL errors, OOM, illegal access,
//! device-side asserts), hence library version "2". The AORTA ids keep their exact spelling.

use std::fmt;

/// Bumped whenever a pattern is added or a regex changes (it names what a verdict was judged by).
pub const PATTERN_LIBRARY_VERSION: &str = "2";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Tier1,
    Tier2,
    Tier3,
    Tier4,
    Tier5,
}

impl Tier {
    pub const ALL: [Tier; 5] = [Tier::Tier1, Tier::Tier2, Tier::Tier3, Tier::Tier4, Tier::Tier5];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Tier1 => "tier1",
            Tier::Tier2 => "tier2",
            Tier::Tier3 => "tier3",
            Tier::Tier4 => "tier4",
            Tier::Tier5 => "tier5",
        }
    }

    /// What each tier looks at, for help texts.
    pub fn summary(self) -> &'static str {
        match self {
            Tier::Tier1 => "process exit: non-zero exit, signals, timeout, core dump, exec failure",
            Tier::Tier2 => "hang monitor: output silence, idle I/O and idle GPU over the whole process tree",
            Tier::Tier3 => "kernel and GPU: dmesg (amdgpu, NVRM Xid, ECC, AER), VRAM growth, throttling",
            Tier::Tier4 => "built-in log patterns (this catalogue)",
            Tier::Tier5 => "the recipe's custom_patterns",
        }
    }

    pub fn parse(token: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(token.trim()))
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PatternFlags {
    pub multiline: bool,
    pub ignore_case: bool,
}

/// A built-in regex detector. `regex` is Python `re` syntax (fancy-regex compiles it).
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    pub id: &'static str,
    pub description: &'static str,
    pub regex: &'static str,
    pub flags: PatternFlags,
    pub sample: &'static str,
}

impl Pattern {
    /// The regex with its flags folded in as an inline group, ready for fancy-regex.
    pub fn compile(&self) -> Result<fancy_regex::Regex, Box<fancy_regex::Error>> {
        let mut prefix = String::new();
        if self.flags.multiline || self.flags.ignore_case {
            prefix.push_str("(?");
            if self.flags.multiline {
                prefix.push('m');
            }
            if self.flags.ignore_case {
                prefix.push('i');
            }
            prefix.push(')');
        }
        fancy_regex::Regex::new(&format!("{prefix}{}", self.regex)).map_err(Box::new)
    }
}

const NONE: PatternFlags = PatternFlags { multiline: false, ignore_case: false };
const M: PatternFlags = PatternFlags { multiline: true, ignore_case: false };
const MI: PatternFlags = PatternFlags { multiline: true, ignore_case: true };
const I: PatternFlags = PatternFlags { multiline: false, ignore_case: true };

const fn p(id: &'static str, description: &'static str, regex: &'static str, flags: PatternFlags, sample: &'static str) -> Pattern {
    Pattern { id, description, regex, flags, sample }
}

/// Tier-4 log patterns in scan order (AORTA's seven first, unchanged).
pub const TIER4_PATTERNS: &[Pattern] = &[
    p("tier4:python_traceback", "Python traceback header", r"^Traceback \(most recent call last\):", M, "Traceback (most recent call last):"),
    p("tier4:hip_error", "HIP error code", r"hipError_[A-Za-z0-9_]+|HIP error:", NONE, "hipError_OutOfMemory"),
    p("tier4:cuda_error", "CUDA error code", r"cudaError[A-Za-z0-9_]*|CUDA error:", NONE, "cudaErrorIllegalAddress"),
    p("tier4:rocm_error", "ROCm error-code marker", r"Error code: \d+", NONE, "Error code: 1"),
    p("tier4:nccl_rccl_error", "NCCL/RCCL collective error", r"NCCL error|RCCL ERROR", NONE, "NCCL error: unhandled system error"),
    p("tier4:collective_timeout", "torch watchdog collective timeout", r"Watchdog caught collective operation timeout", NONE, "Watchdog caught collective operation timeout: WorkNCCL ..."),
    p("tier4:nan_signature", "training-loss NaN", r"loss(?: is)? NaN|loss=nan", I, "loss is NaN"),
    p("tier4:cuda_oom", "CUDA out-of-memory (torch.OutOfMemoryError)", r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError", NONE, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    p("tier4:cublas_status", "cuBLAS / cuBLASLt status error", r"CUBLAS_STATUS_(?!SUCCESS)[A-Z_]+", NONE, "CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx`"),
    p("tier4:cudnn_error", "cuDNN status error", r"CUDNN_STATUS_(?!SUCCESS)[A-Z_]+|cuDNN error", NONE, "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"),
    p("tier4:nccl_warn", "NCCL warning line (NCCL_DEBUG=WARN or INFO)", r"NCCL WARN", NONE, "node1:812:901 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'"),
    p("tier4:illegal_memory_access", "GPU illegal memory access", r"an illegal memory access was encountered|illegal memory access", NONE, "RuntimeError: CUDA error: an illegal memory access was encountered"),
    p("tier4:device_side_assert", "GPU device-side assertion", r"device-side assert(?:ion)? triggered", NONE, "RuntimeError: CUDA error: device-side assert triggered"),
];

/// Tier-3 kernel-log (dmesg) patterns: AORTA's AMD five, then NVIDIA's driver (NVRM) events.
pub const TIER3_LOG_PATTERNS: &[Pattern] = &[
    p("tier3:amdgpu_reset", "amdgpu GPU reset", r"amdgpu: GPU reset", MI, "amdgpu: GPU reset begin!"),
    p("tier3:sdma_timeout", "SDMA semaphore timeout or hang", r"SDMA semaphore timeout|SDMA hang", MI, "amdgpu: SDMA hang detected"),
    p("tier3:vm_l2_fault", "GPU VM L2 protection fault", r"VM_L2_PROTECTION_FAULT", M, "amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031"),
    p("tier3:xgmi_link_error", "XGMI link error", r"XGMI.*(?:error|fail|link down)", MI, "amdgpu: XGMI link down on hive 0"),
    p("tier3:pcie_aer_fatal", "PCIe AER fatal error", r"AER:?\s+Fatal", M, "pcieport 0000:00:01.1: AER: Fatal error received"),
    p("tier3:nvidia_xid", "NVIDIA driver Xid error (number captured as `xid`)", r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)", M, "NVRM: Xid (PCI:0000:18:00): 79, pid=4121, GPU has fallen off the bus."),
    p("tier3:nvidia_ecc", "NVIDIA ECC or row-remap event", r"uncorrectable (?:double bit )?ECC|double bit ECC|row remap(?:ping)? (?:failure|pending|event)", MI, "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit ECC error"),
];

/// Every built-in detector id of a tier (Tier 5 ids are the recipe's `custom:<id>`).
pub fn detector_ids(tier: Tier) -> Vec<&'static str> {
    match tier {
        Tier::Tier1 => vec![
            "tier1:exit_nonzero",
            "tier1:sigsegv",
            "tier1:sigabrt",
            "tier1:sigbus",
            "tier1:timeout",
            "tier1:coredump",
            "tier1:exec_failed",
        ],
        Tier::Tier2 => vec!["tier2:hang"],
        Tier::Tier3 => {
            let mut ids: Vec<&str> = TIER3_LOG_PATTERNS.iter().map(|p| p.id).collect();
            ids.extend(["tier3:vram_growth", "tier3:thermal_throttle"]);
            ids
        }
        Tier::Tier4 => TIER4_PATTERNS.iter().map(|p| p.id).collect(),
        Tier::Tier5 => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles_and_matches_its_sample() {
        for pat in TIER4_PATTERNS.iter().chain(TIER3_LOG_PATTERNS) {
            let re = pat.compile().unwrap_or_else(|e| panic!("{}: {e}", pat.id));
            assert!(re.is_match(pat.sample).unwrap(), "{} does not match its sample", pat.id);
        }
    }

    #[test]
    fn aorta_tier4_ids_come_first_in_aorta_order() {
        let ids: Vec<_> = TIER4_PATTERNS.iter().take(7).map(|p| p.id).collect();
        assert_eq!(
            ids,
            [
                "tier4:python_traceback",
                "tier4:hip_error",
                "tier4:cuda_error",
                "tier4:rocm_error",
                "tier4:nccl_rccl_error",
                "tier4:collective_timeout",
                "tier4:nan_signature"
            ]
        );
    }

    #[test]
    fn xgmi_initialized_is_not_an_error_and_success_statuses_do_not_fire() {
        let xgmi = TIER3_LOG_PATTERNS.iter().find(|p| p.id == "tier3:xgmi_link_error").unwrap();
        assert!(!xgmi.compile().unwrap().is_match("amdgpu: XGMI initialized").unwrap());
        let cublas = TIER4_PATTERNS.iter().find(|p| p.id == "tier4:cublas_status").unwrap();
        assert!(!cublas.compile().unwrap().is_match("CUBLAS_STATUS_SUCCESS").unwrap());
    }

    #[test]
    fn ids_are_unique_and_prefixed_by_their_tier() {
        let mut seen = std::collections::HashSet::new();
        for tier in Tier::ALL {
            for id in detector_ids(tier) {
                assert!(id.starts_with(&format!("{}:", tier.name())), "{id}");
                assert!(seen.insert(id), "duplicate {id}");
            }
        }
    }
}
