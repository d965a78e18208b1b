//! Detector disabling (AORTA §5.8): whole tiers (`tier3`) or single detectors (`tier2:hang`,
//! `custom:my_id`). Tokens are normalised and de-duplicated in first-seen order.

use crate::catalogue::{detector_ids, Tier};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DisableError {
    pub message: String,
    pub hint: String,
}

fn err(message: String, hint: String) -> DisableError {
    DisableError { message, hint }
}

/// The disabled tiers and detector ids of a recipe, after CLI overlays.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Disables {
    pub tiers: Vec<Tier>,
    pub detectors: Vec<String>,
}

impl Disables {
    pub fn is_empty(&self) -> bool {
        self.tiers.is_empty() && self.detectors.is_empty()
    }

    /// `tier1` … `tier5`, case-insensitive, surrounding whitespace ignored.
    pub fn parse_tier(token: &str) -> Result<Tier, DisableError> {
        Tier::parse(token).ok_or_else(|| {
            err(
                format!("unknown detector tier '{token}'"),
                "valid tiers: tier1, tier2, tier3, tier4, tier5 (tier5 = custom patterns)".into(),
            )
        })
    }

    /// `<prefix>:<id>` with prefix tier1..tier4 or custom; built-in ids must exist.
    pub fn parse_detector(token: &str) -> Result<String, DisableError> {
        let Some((prefix, id)) = token.split_once(':') else {
            return Err(err(
                format!("detector '{token}' must look like '<tier>:<id>'"),
                "for example tier2:hang or custom:my_pattern; use disable_detector_tiers for whole tiers".into(),
            ));
        };
        let prefix = prefix.trim().to_ascii_lowercase();
        let id = id.trim();
        if id.is_empty() {
            return Err(err(
                format!("detector '{token}' has an empty id"),
                "write '<tier>:<id>', e.g. tier2:hang".into(),
            ));
        }
        if prefix == "custom" {
            return Ok(format!("custom:{id}"));
        }
        let tier = match Tier::parse(&prefix) {
            Some(t) if t != Tier::Tier5 => t,
            _ => {
                return Err(err(
                    format!("detector '{token}' has unknown prefix '{prefix}'"),
                    "prefixes: tier1, tier2, tier3, tier4, custom".into(),
                ))
            }
        };
        let full = format!("{prefix}:{id}");
        let known = detector_ids(tier);
        if known.contains(&full.as_str()) {
            Ok(full)
        } else {
            Err(err(
                format!("unknown {prefix} detector '{full}'"),
                format!("valid {prefix} detectors: {}", known.join(", ")),
            ))
        }
    }

    pub fn add_tier(&mut self, tier: Tier) {
        if !self.tiers.contains(&tier) {
            self.tiers.push(tier);
        }
    }

    pub fn add_detector(&mut self, id: String) {
        if !self.detectors.contains(&id) {
            self.detectors.push(id);
        }
    }

    /// A `--disable-detector` token: with a colon it is a detector id, otherwise a tier.
    pub fn add_cli_token(&mut self, token: &str) -> Result<(), DisableError> {
        if token.contains(':') {
            self.add_detector(Self::parse_detector(token)?);
        } else {
            self.add_tier(Self::parse_tier(token)?);
        }
        Ok(())
    }

    pub fn tier_disabled(&self, tier: Tier) -> bool {
        self.tiers.contains(&tier)
    }

    pub fn detector_disabled(&self, id: &str) -> bool {
        self.detectors.iter().any(|d| d == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_case_insensitive_and_trimmed() {
        assert_eq!(Disables::parse_tier(" TIER3 ").unwrap(), Tier::Tier3);
        assert!(Disables::parse_tier("tier9").is_err());
    }

    #[test]
    fn detector_prefix_lowercased_id_kept() {
        assert_eq!(
            Disables::parse_detector("TIER2: hang").unwrap(),
            "tier2:hang"
        );
        assert_eq!(
            Disables::parse_detector("custom:MyId").unwrap(),
            "custom:MyId"
        );
        let e = Disables::parse_detector("tier3:vram_growht").unwrap_err();
        assert!(e.hint.contains("tier3:vram_growth"), "{}", e.hint);
        assert!(Disables::parse_detector("tier2").is_err());
        assert!(Disables::parse_detector("tier2:").is_err());
        assert!(Disables::parse_detector("tier5:x").is_err());
        assert!(
            Disables::parse_detector("tier2:Hang").is_err(),
            "ids keep their case"
        );
    }

    #[test]
    fn cli_tokens_union_without_duplicates() {
        let mut d = Disables::default();
        d.add_cli_token("tier3").unwrap();
        d.add_cli_token("tier2:hang").unwrap();
        d.add_cli_token("Tier3").unwrap();
        d.add_cli_token("tier2:hang").unwrap();
        assert_eq!(d.tiers, vec![Tier::Tier3]);
        assert_eq!(d.detectors, vec!["tier2:hang".to_string()]);
        assert!(d.add_cli_token("bogus").is_err());
    }
}
