//! `Key` and `Digest`: validated 64-char lowercase blake3 hex.
//!
//! Both end up as file names inside the store (`cas/ab/abcd…`, `ac/12/1234….json`), so they are
//! newtypes that can only be built from a string that passed [`validate_hex`]. A path is never
//! made from an unvalidated string: that is what keeps `../../etc/passwd` or `AB…` (a second
//! spelling of the same hash) out of the store. Serde goes through the same validation.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Why a string is not a valid key or digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason} (expected 64 lowercase hex characters, a blake3 hash)")]
pub struct HexError {
    /// `"trial key"` or `"blob digest"`.
    pub what: &'static str,
    /// The offending input, cut to 80 characters so a garbage file name can't flood a message.
    pub value: String,
    pub reason: &'static str,
}

/// Checks `s` is exactly 64 characters of `[0-9a-f]`.
pub fn validate_hex(s: &str, what: &'static str) -> Result<(), HexError> {
    let err = |reason| HexError {
        what,
        value: s.chars().take(80).collect(),
        reason,
    };
    if s.len() != 64 {
        return Err(err("wrong length"));
    }
    if !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(err("not lowercase hex"));
    }
    Ok(())
}

macro_rules! hex_newtype {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Parses and validates; anything but 64 lowercase hex characters is rejected.
            pub fn parse(s: &str) -> Result<Self, HexError> {
                validate_hex(s, $what)?;
                Ok(Self(s.to_owned()))
            }

            /// Wraps a blake3 hash (always valid).
            pub fn from_hash(hash: blake3::Hash) -> Self {
                Self(hash.to_hex().to_string())
            }

            /// The blake3 hash of `bytes`.
            pub fn of_bytes(bytes: &[u8]) -> Self {
                Self::from_hash(blake3::hash(bytes))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The first two hex characters: the fan-out directory inside the store.
            pub fn shard(&self) -> &str {
                &self.0[..2]
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0)
            }
        }

        impl FromStr for $name {
            type Err = HexError;
            fn from_str(s: &str) -> Result<Self, HexError> {
                Self::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = HexError;
            fn try_from(s: String) -> Result<Self, HexError> {
                validate_hex(&s, $what)?;
                Ok(Self(s))
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::try_from(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

hex_newtype!(
    /// A trial's cache key (computed by the planner from argv, recipe, env, …): names an AC entry.
    Key,
    "trial key"
);

hex_newtype!(
    /// The blake3 digest of a blob's content: names a CAS entry.
    Digest,
    "blob digest"
);

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";

    #[test]
    fn accepts_blake3_hex() {
        let d = Digest::parse(GOOD).unwrap();
        assert_eq!(d.as_str(), GOOD);
        assert_eq!(d.shard(), "af");
        assert_eq!(
            Digest::of_bytes(b""),
            d,
            "GOOD is blake3 of the empty string"
        );
        assert_eq!(Key::parse(GOOD).unwrap().to_string(), GOOD);
    }

    #[test]
    fn rejects_everything_else() {
        let upper = GOOD.to_uppercase();
        let short = &GOOD[..63];
        let long = format!("{GOOD}0");
        let dotted = format!("../{}", &GOOD[3..]);
        let nonascii = format!("é{}", &GOOD[2..]);
        for bad in [
            "",
            short,
            &long,
            &upper,
            &dotted,
            &nonascii,
            &GOOD.replace('a', "g"),
        ] {
            assert!(Key::parse(bad).is_err(), "{bad:?} accepted as key");
            assert!(Digest::parse(bad).is_err(), "{bad:?} accepted as digest");
        }
        let e = Key::parse("xyz").unwrap_err();
        assert!(e.to_string().contains("trial key"), "{e}");
    }

    #[test]
    fn serde_validates() {
        let ok: Digest = serde_json::from_str(&format!("\"{GOOD}\"")).unwrap();
        assert_eq!(ok.as_str(), GOOD);
        assert_eq!(serde_json::to_string(&ok).unwrap(), format!("\"{GOOD}\""));
        assert!(serde_json::from_str::<Digest>("\"../../etc/passwd\"").is_err());
    }
}
