//! A proposer's step and AORTA's policy over it (§10.2 g): categories from a fixed set,
//! mitigation names that are safe, registered and not `none`, confidence clamped. A step is
//! parsed leniently (AORTA's `AgentStep.from_dict`: a field of the wrong type takes its
//! default) and then validated strictly: a violation stops the search.

use aorta_registry::Registry;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// AORTA's failure categories.
pub const CATEGORIES: [&str; 8] = [
    "rccl_hang",
    "thermal_throttle",
    "illegal_mem",
    "oom_fragment",
    "checkpoint_race",
    "launch_error",
    "perf_regression",
    "unknown",
];

/// Mitigations that change what the program computes or how fast by orders of magnitude:
/// `--require-approval` pauses before trying them (AORTA's set).
pub const NEEDS_APPROVAL: [&str; 2] = ["hip_launch_blocking", "hsa_disable_cache"];

/// A field that takes its default when the reply gives it another type.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Lenient<T> {
    Ok(T),
    Other(IgnoredAny),
}

impl<T: Default> Lenient<T> {
    fn get(self) -> T {
        match self {
            Lenient::Ok(v) => v,
            Lenient::Other(_) => T::default(),
        }
    }
}

/// One list entry: a string, or anything else (which the policy then rejects).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Name {
    Str(String),
    Other(IgnoredAny),
}

/// A step as a proposer's JSON gives it, before validation.
#[derive(Debug, Clone, Deserialize)]
pub struct RawStep {
    #[serde(default)]
    category: Option<Lenient<String>>,
    #[serde(default)]
    hypothesis: Option<Lenient<String>>,
    #[serde(default)]
    next_mitigations: Option<Lenient<Vec<Name>>>,
    #[serde(default)]
    diagnostics: Option<Lenient<Vec<Name>>>,
    /// A `Number`, not an `f64`: serde_json's arbitrary_precision (which starlark turns on for
    /// the whole build) buffers numbers inside untagged enums in a form `f64` cannot read.
    #[serde(default)]
    confidence: Option<Lenient<Option<serde_json::Number>>>,
    #[serde(default)]
    stop: Option<Lenient<bool>>,
    #[serde(default)]
    stop_reason: Option<Lenient<String>>,
}

/// A validated step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentStep {
    pub category: String,
    pub hypothesis: String,
    pub next_mitigations: Vec<String>,
    /// Diagnostic mitigations to add to the diagnostic axis (aorta extension).
    #[serde(default)]
    pub diagnostics: Vec<String>,
    pub confidence: f64,
    pub stop: bool,
    pub stop_reason: Option<String>,
}

impl AgentStep {
    /// A stop with a reason (the fake proposer's and an invalid reply's).
    pub fn stop(category: &str, reason: &str) -> AgentStep {
        AgentStep {
            category: category.into(),
            hypothesis: String::new(),
            next_mitigations: Vec::new(),
            diagnostics: Vec::new(),
            confidence: 0.0,
            stop: true,
            stop_reason: Some(reason.into()),
        }
    }
}

/// Why a step was refused: `policy_stop` or `registry_error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error("policy: {0}")]
    Policy(String),
    #[error("registry: {0}")]
    Registry(String),
}

/// The most fresh mitigations one step may have tested, by proposer: the fake proposer names
/// one at a time, a model up to three (more are dropped, in its order). With
/// `--max-iterations` this bounds how many candidates a run can test, which is what its
/// error rate is spread over.
pub fn mitigations_per_step(backend: &str) -> u32 {
    match backend {
        "fake" => 1,
        _ => 3,
    }
}

/// AORTA's name rule: `^[A-Za-z0-9_][A-Za-z0-9_.\-]*$` (so no spaces, no leading `-`).
pub fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn names(
    field: &str,
    list: Option<Lenient<Vec<Name>>>,
    registry: &Registry,
) -> Result<Vec<String>, Violation> {
    let mut out: Vec<String> = Vec::new();
    for n in list.map(Lenient::get).unwrap_or_default() {
        let Name::Str(s) = n else {
            return Err(Violation::Policy(format!(
                "{field}: an entry is not a string"
            )));
        };
        if s.is_empty() || !valid_name(&s) {
            return Err(Violation::Policy(format!(
                "{field}: {s:?} is not a mitigation name (letters, digits, _ . -; not starting with -)"
            )));
        }
        if registry.mitigation(&s).is_none() {
            return Err(Violation::Registry(format!(
                "{field}: {s:?} is not a registered mitigation"
            )));
        }
        if s != "none" && !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

impl RawStep {
    /// AORTA's policy validation.
    pub fn validate(self, registry: &Registry) -> Result<AgentStep, Violation> {
        let category = self
            .category
            .map(Lenient::get)
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "unknown".into());
        if !CATEGORIES.contains(&category.as_str()) {
            return Err(Violation::Policy(format!(
                "category {category:?} is not one of {}",
                CATEGORIES.join(", ")
            )));
        }
        let confidence = self
            .confidence
            .and_then(Lenient::get)
            .and_then(|n| n.as_f64())
            .unwrap_or(0.0);
        let confidence = if confidence.is_finite() {
            confidence.clamp(0.0, 1.0)
        } else {
            0.0
        };
        Ok(AgentStep {
            category,
            hypothesis: self.hypothesis.map(Lenient::get).unwrap_or_default(),
            next_mitigations: names("next_mitigations", self.next_mitigations, registry)?,
            diagnostics: names("diagnostics", self.diagnostics, registry)?,
            confidence,
            stop: self.stop.map(Lenient::get).unwrap_or(false),
            stop_reason: self.stop_reason.map(Lenient::get).filter(|s| !s.is_empty()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(json: &str) -> Result<AgentStep, Violation> {
        serde_json::from_str::<RawStep>(json)
            .unwrap()
            .validate(&Registry::builtin())
    }

    #[test]
    fn aortas_defensive_defaults() {
        let s = step(
            r#"{"stop": "yes", "next_mitigations": "xnack", "confidence": "high", "category": 7}"#,
        )
        .unwrap();
        assert!(!s.stop);
        assert!(s.next_mitigations.is_empty());
        assert_eq!(s.confidence, 0.0);
        assert_eq!(s.category, "unknown");
    }

    #[test]
    fn names_are_checked_deduplicated_and_none_is_dropped() {
        let s = step(r#"{"category":"rccl_hang","next_mitigations":["none","xnack","xnack"],"confidence":7}"#).unwrap();
        assert_eq!(s.next_mitigations, ["xnack"]);
        assert_eq!(s.confidence, 1.0);
        assert_eq!(step(r#"{"confidence":0.25}"#).unwrap().confidence, 0.25);
        assert_eq!(step(r#"{"confidence":-3.5e2}"#).unwrap().confidence, 0.0);
        for bad in [
            r#"["-rf"]"#,
            r#"["a b"]"#,
            r#"[""]"#,
            r#"[3]"#,
            r#"["$(id)"]"#,
        ] {
            let json = format!(r#"{{"next_mitigations": {bad}}}"#);
            assert!(matches!(step(&json), Err(Violation::Policy(_))), "{bad}");
        }
        assert!(matches!(
            step(r#"{"next_mitigations":["made_up"]}"#),
            Err(Violation::Registry(_))
        ));
        assert!(matches!(
            step(r#"{"category":"cosmic_rays"}"#),
            Err(Violation::Policy(_))
        ));
    }
}
