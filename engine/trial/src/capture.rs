//! A record's `capture`: what was noted beside the verdict. In AORTA it is one free-form dict;
//! here each key the classifier or engine writes has a typed field, and only the named groups
//! of regexes (custom patterns, the kernel log's Xid) are a string map.
//!
//! The JSON is AORTA's dict: the groups and the set fields side by side in one object. A group
//! may not take a field's name ([`RESERVED`]); the recipe loader rejects such a pattern.

use crate::SmallMap;
use serde::de::{Deserializer, Error as _, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How much of a trial's directory retention keeps (AORTA §3.12's `retain` levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetainLevel {
    Full,
    Summary,
    Log,
    None,
}

/// What retention did to one trial directory (`capture.retention`), stamped whenever the
/// recipe has `retain`, also when nothing was deleted, as AORTA does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    pub level: RetainLevel,
    /// Trial-relative paths, sorted.
    pub deleted: Vec<String>,
    pub freed_bytes: u64,
}

/// The keys of `capture` that are fields, not regex groups.
pub const RESERVED: [&str; 7] = [
    "tier2_hang_latched_but_reconciled",
    "classifier_error",
    "disabled_detectors",
    "disabled_detector_tiers",
    "error_message",
    "scheduler_state",
    "retention",
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capture {
    /// Named groups of the regexes that fired: custom patterns' and the first kernel-log Xid
    /// line's (`xid`, `xid_pci`). A later firing overwrites an earlier one's group.
    pub groups: SmallMap<String>,
    /// The hang monitor latched a hang but the process exited 0 on its own.
    pub tier2_hang_latched_but_reconciled: bool,
    /// Unreadable logs, regex runtime errors, a contained panic: why the verdict may be partial.
    pub classifier_error: Option<String>,
    /// The effective disables (ids, sorted), present when the recipe configured any.
    pub disabled_detectors: Option<Vec<String>>,
    /// The effective disabled tiers (`tier1` …, sorted), present with `disabled_detectors`.
    pub disabled_detector_tiers: Option<Vec<String>>,
    /// Why aorta could not start the trial's workload (the record's verdict is then `error`).
    pub error_message: Option<String>,
    /// The batch scheduler's word for a task it killed (Slurm's `TIMEOUT`, `OUT_OF_MEMORY`).
    pub scheduler_state: Option<String>,
    pub retention: Option<Retention>,
}

impl Capture {
    pub fn is_empty(&self) -> bool {
        *self == Capture::default()
    }

    /// A group's value (`capture['name']`).
    pub fn group(&self, name: &str) -> Option<&str> {
        self.groups.get(name).map(String::as_str)
    }
}

impl Serialize for Capture {
    /// In the order AORTA's classifier and executor inserted the keys.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        fn entry<M: SerializeMap, T: Serialize>(
            m: &mut M,
            key: &str,
            value: Option<&T>,
        ) -> Result<(), M::Error> {
            value.map_or(Ok(()), |v| m.serialize_entry(key, v))
        }
        let mut m = s.serialize_map(None)?;
        let reconciled = self.tier2_hang_latched_but_reconciled.then_some(&true);
        entry(&mut m, "tier2_hang_latched_but_reconciled", reconciled)?;
        for (k, v) in self.groups.iter() {
            m.serialize_entry(k, v)?;
        }
        entry(&mut m, "classifier_error", self.classifier_error.as_ref())?;
        entry(
            &mut m,
            "disabled_detectors",
            self.disabled_detectors.as_ref(),
        )?;
        entry(
            &mut m,
            "disabled_detector_tiers",
            self.disabled_detector_tiers.as_ref(),
        )?;
        entry(&mut m, "error_message", self.error_message.as_ref())?;
        entry(&mut m, "scheduler_state", self.scheduler_state.as_ref())?;
        entry(&mut m, "retention", self.retention.as_ref())?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for Capture {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Capture;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a capture object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Capture, A::Error> {
                let mut c = Capture::default();
                while let Some(k) = a.next_key::<String>()? {
                    match k.as_str() {
                        "tier2_hang_latched_but_reconciled" => {
                            c.tier2_hang_latched_but_reconciled = a.next_value()?
                        }
                        "classifier_error" => c.classifier_error = a.next_value()?,
                        "disabled_detectors" => c.disabled_detectors = a.next_value()?,
                        "disabled_detector_tiers" => c.disabled_detector_tiers = a.next_value()?,
                        "error_message" => c.error_message = a.next_value()?,
                        "scheduler_state" => c.scheduler_state = a.next_value()?,
                        "retention" => c.retention = a.next_value()?,
                        _ => {
                            let v: String = a.next_value().map_err(|e| {
                                A::Error::custom(format_args!("capture group `{k}`: {e}"))
                            })?;
                            c.groups.insert(k, v);
                        }
                    }
                }
                Ok(c)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_is_aortas_flat_dict_and_round_trips() {
        let mut c = Capture::default();
        c.groups.insert("xid".into(), "79".into());
        c.groups.insert("loss".into(), "2.5".into());
        c.tier2_hang_latched_but_reconciled = true;
        c.classifier_error = Some("boom".into());
        c.disabled_detectors = Some(vec!["tier4:nan_inf".into()]);
        c.disabled_detector_tiers = Some(vec![]);
        c.scheduler_state = Some("TIMEOUT".into());
        c.retention = Some(Retention {
            level: RetainLevel::Log,
            deleted: vec!["a.bin".into()],
            freed_bytes: 3,
        });
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"tier2_hang_latched_but_reconciled":true,"loss":"2.5","xid":"79","classifier_error":"boom","disabled_detectors":["tier4:nan_inf"],"disabled_detector_tiers":[],"scheduler_state":"TIMEOUT","retention":{"level":"log","deleted":["a.bin"],"freed_bytes":3}}"#
        );
        let back: Capture = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert_eq!(serde_json::to_string(&Capture::default()).unwrap(), "{}");
        assert!(serde_json::from_str::<Capture>("{}").unwrap().is_empty());
    }

    #[test]
    fn a_group_that_is_not_a_string_is_a_clear_error() {
        let e = serde_json::from_str::<Capture>(r#"{"loss": 2.5}"#).unwrap_err();
        assert!(e.to_string().contains("capture group `loss`"), "{e}");
        let e = serde_json::from_str::<Capture>(r#"{"retention": "x"}"#).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
    }
}
