//! Verdict resolution (AORTA §5.9), effective disables (§5.8) and `failure_details[].type`
//! (§5.10).

use aorta_trial::{Capture, Verdict};

use crate::catalogue::Tier;
use crate::disables::Disables;
use crate::model::Classification;

/// Detectors meaning "the trial could not be judged" rather than "the trial failed".
pub const ERROR_DETECTOR_IDS: [&str; 2] = ["tier1:timeout", "tier1:exec_failed"];

/// Appended when a `required_for_pass` custom pattern did not fire.
pub const MISSING_PASS_SIGNAL: &str = "meta:missing_pass_signal";

/// The disables that apply to one trial.
///
/// Exec-failure exception: a command that never launched can never pass, so for such a trial
/// the `tier1` tier disable and the `tier1:exit_nonzero` detector disable are ignored (AORTA),
/// and so is `tier1:exec_failed` (aorta: disabling it would otherwise turn "command not found"
/// into a pass).
#[derive(Debug, Clone)]
pub(crate) struct Effective {
    pub tiers: Vec<Tier>,
    pub detectors: Vec<String>,
    /// The recipe disabled something (so the effective sets are echoed even when empty).
    pub any_configured: bool,
}

impl Effective {
    pub fn new(d: &Disables, exec_failed: bool) -> Effective {
        let mut tiers = d.tiers.clone();
        let mut detectors = d.detectors.clone();
        if exec_failed {
            tiers.retain(|t| *t != Tier::Tier1);
            detectors.retain(|id| id != "tier1:exit_nonzero" && id != "tier1:exec_failed");
        }
        Effective {
            tiers,
            detectors,
            any_configured: !d.is_empty(),
        }
    }

    pub fn tier_on(&self, tier: Tier) -> bool {
        !self.tiers.contains(&tier)
    }

    pub fn detector_off(&self, id: &str) -> bool {
        self.detectors.iter().any(|d| d == id)
    }

    /// Drops disabled ids (Tiers 1–4 are filtered after their scan).
    pub fn filter(&self, ids: Vec<String>) -> Vec<String> {
        ids.into_iter()
            .filter(|id| !self.detector_off(id))
            .collect()
    }

    /// `capture.disabled_detectors` / `disabled_detector_tiers`, sorted, when any were set.
    pub fn echo(&self, capture: &mut Capture) {
        if !self.any_configured {
            return;
        }
        let mut ids = self.detectors.clone();
        ids.sort();
        let mut tiers: Vec<&str> = self.tiers.iter().map(|t| t.name()).collect();
        tiers.sort_unstable();
        capture.disabled_detectors = Some(ids);
        capture.disabled_detector_tiers = Some(tiers.into_iter().map(String::from).collect());
    }
}

/// The fired detectors of each tier (after disables), in the order they are reported.
#[derive(Debug, Default)]
pub(crate) struct Fired {
    pub tier1: Vec<String>,
    pub tier2: Vec<String>,
    pub tier3: Vec<String>,
    pub tier3_warn: Vec<String>,
    pub tier4: Vec<String>,
    pub custom_fail: Vec<String>,
    pub custom_warn: Vec<String>,
    pub missing_required: bool,
}

/// §5.9: concatenate in tier order, add the meta detector, partition error ids from failure
/// ids, then fail > error > pass.
pub(crate) fn resolve(
    f: Fired,
    capture: Capture,
    tier_durations_ms: std::collections::BTreeMap<String, f64>,
) -> Classification {
    let mut fired: Vec<String> = [f.tier1, f.tier2, f.tier3, f.tier4, f.custom_fail].concat();
    if f.missing_required {
        fired.push(MISSING_PASS_SIGNAL.into());
    }
    let (error, failure): (Vec<String>, Vec<String>) = fired
        .into_iter()
        .partition(|id| ERROR_DETECTOR_IDS.contains(&id.as_str()));
    let verdict = if !failure.is_empty() {
        Verdict::Fail
    } else if !error.is_empty() {
        Verdict::Error
    } else {
        Verdict::Pass
    };
    Classification {
        verdict,
        failure_detectors_fired: failure,
        error_detectors_fired: error,
        warn_detectors_fired: [f.tier3_warn, f.custom_warn].concat(),
        capture,
        tier_durations_ms,
    }
}

/// §5.10's `failure_details[].type` for a trial that did not pass (`None` for a pass):
/// never launched → `subprocess_exec_failed`; timed out → `subprocess_timeout`; non-zero exit
/// → `subprocess_nonzero_exit`; exit 0 failed by a detector → `detector_failure`.
/// (The executor's own env-file rejection is [`ENV_FILE_VALIDATION_FAILED`], with the error
/// detector [`ENV_FILE_VALIDATION_DETECTOR`].)
pub fn failure_type(
    c: &Classification,
    exit_code: i32,
    timed_out: bool,
    exec_failed: bool,
) -> Option<&'static str> {
    if c.verdict == Verdict::Pass {
        return None;
    }
    Some(if exec_failed {
        "subprocess_exec_failed"
    } else if timed_out {
        "subprocess_timeout"
    } else if exit_code != 0 {
        "subprocess_nonzero_exit"
    } else {
        "detector_failure"
    })
}

/// `failure_details[].type` (and the record's `failure_type`) when the trial's env file was
/// rejected before launch.
pub const ENV_FILE_VALIDATION_FAILED: &str = "env_file_validation_failed";

/// The error detector such a trial reports, as AORTA does (§5.9).
pub const ENV_FILE_VALIDATION_DETECTOR: &str = "meta:env_file_validation_failed";

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn run(f: Fired) -> Classification {
        resolve(f, Capture::default(), Default::default())
    }

    #[test]
    fn precedence_and_partition() {
        assert_eq!(run(Fired::default()).verdict, Verdict::Pass);
        let c = run(Fired {
            tier1: ids(&["tier1:timeout"]),
            ..Default::default()
        });
        assert_eq!(
            (c.verdict, c.error_detectors_fired.len()),
            (Verdict::Error, 1)
        );
        let c = run(Fired {
            tier1: ids(&["tier1:timeout"]),
            tier2: ids(&["tier2:hang"]),
            ..Default::default()
        });
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(
            (c.failure_detectors_fired, c.error_detectors_fired),
            (ids(&["tier2:hang"]), ids(&["tier1:timeout"]))
        );
        let c = run(Fired {
            tier3_warn: ids(&["tier3:vram_growth"]),
            custom_warn: ids(&["custom:w"]),
            ..Default::default()
        });
        assert_eq!(
            (c.verdict, c.warn_detectors_fired),
            (Verdict::Pass, ids(&["tier3:vram_growth", "custom:w"]))
        );
    }

    #[test]
    fn exec_failure_exception() {
        let mut d = Disables::default();
        d.add_tier(Tier::Tier1);
        d.add_detector("tier1:exit_nonzero".into());
        d.add_detector("tier2:hang".into());
        let e = Effective::new(&d, true);
        assert!(
            e.tier_on(Tier::Tier1)
                && !e.detector_off("tier1:exit_nonzero")
                && e.detector_off("tier2:hang")
        );
        let e = Effective::new(&d, false);
        assert!(!e.tier_on(Tier::Tier1) && e.detector_off("tier1:exit_nonzero"));
        let mut cap = Capture::default();
        e.echo(&mut cap);
        assert_eq!(
            cap.disabled_detectors.unwrap(),
            ["tier1:exit_nonzero", "tier2:hang"]
        );
        assert_eq!(cap.disabled_detector_tiers.unwrap(), ["tier1"]);
        let mut cap = Capture::default();
        Effective::new(&Disables::default(), false).echo(&mut cap);
        assert!(cap.is_empty());
    }

    #[test]
    fn failure_types() {
        let fail = run(Fired {
            tier4: ids(&["tier4:python_traceback"]),
            ..Default::default()
        });
        assert_eq!(
            failure_type(&fail, 0, false, false),
            Some("detector_failure")
        );
        assert_eq!(
            failure_type(&fail, 1, false, false),
            Some("subprocess_nonzero_exit")
        );
        assert_eq!(
            failure_type(&fail, -1, true, false),
            Some("subprocess_timeout")
        );
        assert_eq!(
            failure_type(&fail, 127, false, true),
            Some("subprocess_exec_failed")
        );
        assert_eq!(failure_type(&run(Fired::default()), 0, false, false), None);
    }
}
