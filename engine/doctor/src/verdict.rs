//! One check's verdict: pass, warn, fail or not applicable, with the figure it measured, the
//! threshold it was judged by and, unless it passed, a remedy in DCGM's failure-code style.

use serde::{Deserialize, Serialize};

/// How a check came out. Ordered by severity: a report's overall status is its worst check's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Nothing to judge here (no such hardware, counter not supported, source unreadable);
    /// `reason` says why.
    NotApplicable,
    Pass,
    /// Usable, but a sweep's numbers may suffer; the remedy says what to look at.
    Warn,
    /// Do not trust a sweep on this GPU; the remedy says what to do.
    Fail,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::NotApplicable => "n/a",
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

/// One named detector's verdict on one GPU (or on the node, `gpu: None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable id, `<area>.<what>` (`ecc.volatile_uncorrectable`, `pcie.link`); docs/doctor.md
    /// lists them.
    pub id: String,
    /// The GPU it judged: `"0 00000000:00:06.0"` (index and PCI bus id), `None` for the node.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gpu: Option<String>,
    pub status: Status,
    /// The figure measured, with its unit (`"Gen5 x16"`, `"0"`, `"712.4 TFLOP/s"`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub measured: Option<String>,
    /// What it was judged against (`"Gen5 x16 (the link's maximum)"`, `"0"`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub threshold: Option<String>,
    /// Warn and fail: what to do.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub remedy: Option<String>,
    /// Not applicable: why there is nothing to judge.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// Where the figure came from (`nvidia-smi -q -x: ecc_errors/volatile`).
    pub source: String,
}

impl Check {
    pub fn new(id: &str, gpu: Option<&str>, source: &str) -> Check {
        Check {
            id: id.to_owned(),
            gpu: gpu.map(str::to_owned),
            status: Status::Pass,
            measured: None,
            threshold: None,
            remedy: None,
            reason: None,
            source: source.to_owned(),
        }
    }

    pub fn measured(mut self, m: impl Into<String>) -> Check {
        self.measured = Some(m.into());
        self
    }

    pub fn threshold(mut self, t: impl Into<String>) -> Check {
        self.threshold = Some(t.into());
        self
    }

    pub fn pass(mut self) -> Check {
        self.status = Status::Pass;
        self
    }

    pub fn warn(mut self, remedy: impl Into<String>) -> Check {
        self.status = Status::Warn;
        self.remedy = Some(remedy.into());
        self
    }

    pub fn fail(mut self, remedy: impl Into<String>) -> Check {
        self.status = Status::Fail;
        self.remedy = Some(remedy.into());
        self
    }

    /// Not applicable, `reason` saying why (`"no NVIDIA or AMD GPU found"`).
    pub fn not_applicable(mut self, reason: impl Into<String>) -> Check {
        self.status = Status::NotApplicable;
        self.remedy = None;
        self.reason = Some(reason.into());
        self
    }

    /// Keeps the worse of the current verdict and `other` (same remedy rules).
    pub fn worst_of(self, other: Check) -> Check {
        if other.status > self.status {
            other
        } else {
            self
        }
    }
}

/// The remedies, in one place so docs/doctor.md can quote them and tests can name them.
pub mod remedy {
    pub const RMA: &str = "drain the node and file an RMA";
    pub const RESET: &str =
        "drain the node, reset the GPU (nvidia-smi -r, or reboot) and run doctor again";
    pub const ECC_OFF: &str =
        "enable ECC (nvidia-smi -e 1, then reset the GPU): without it memory errors go unseen";
    pub const PERSISTENCE: &str = "enable persistence mode (nvidia-smi -pm 1 or nvidia-persistenced): without it every process pays driver start-up and clocks reset between trials";
    pub const MIG_ON: &str = "MIG is enabled: a sweep sees one slice, not the GPU; disable it (nvidia-smi -mig 0, reset) unless the sweep is about MIG";
    pub const COOLING: &str = "check cooling (fans, airflow, inlet temperature, heatsink contact)";
    pub const POWER: &str = "check the power supply and the chassis power brake signal";
    pub const RISER: &str = "reseat the card / check the riser and the slot's BIOS link setting";
    pub const KERNEL_LOG: &str = "run with CAP_SYSLOG (root) or set kernel.dmesg_restrict=0 to let doctor read the kernel log";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_orders_by_severity() {
        assert!(Status::Fail > Status::Warn);
        assert!(Status::Warn > Status::Pass);
        assert!(Status::Pass > Status::NotApplicable);
        let c = Check::new("x", None, "s");
        let worse = c.clone().worst_of(c.clone().fail("r"));
        assert_eq!(worse.status, Status::Fail);
        assert_eq!(
            serde_json::to_string(&Status::NotApplicable).unwrap(),
            "\"not_applicable\""
        );
    }
}
