//! Result manifests (what an action-cache entry holds) and their checksummed on-disk envelope.
//!
//! An AC file is `{"format":1,"key":K,"manifest":{…},"blake3":H}` where `H` is the blake3 of the
//! manifest's bytes *exactly as they appear in the file*. Hashing raw bytes rather than a
//! re-serialisation keeps the check stable across serde_json versions and float round-trips, and
//! it catches any bit flip or truncation inside the manifest; a truncation elsewhere makes the
//! JSON unparseable. Either way decoding yields a reason string, which the store turns into a
//! [`Lookup::Corrupt`](crate::Lookup::Corrupt) miss.

use crate::digest::{Digest, Key};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::path::{Component, Path};
use std::time::{SystemTime, UNIX_EPOCH};

/// Envelope format written by this version; entries with another format are treated as corrupt.
pub const AC_FORMAT: u32 = 1;

/// Why a manifest cannot be stored ([`crate::StoreError::InvalidManifest`]) or trusted.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// An output path a hostile or buggy manifest could escape with; `why` names the rule.
    #[error("output path {path:?}: {why}")]
    BadOutputPath { path: String, why: &'static str },
    #[error("exec_seconds is {0}")]
    NonFiniteSeconds(f64),
    /// Stored under one key while naming another.
    #[error("manifest names key {0}")]
    OtherKey(Key),
    #[error("committed under a claim for a different key {0}")]
    OtherClaim(Key),
    #[error("blob {digest} is {got} bytes but the manifest says {want}")]
    BlobSize { digest: Digest, got: u64, want: u64 },
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
}

/// Why an action-cache entry cannot be trusted: the reason of a
/// [`Lookup::Corrupt`](crate::Lookup::Corrupt), after which the trial is re-run.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("unparseable entry: {0}")]
    Unparseable(#[source] serde_json::Error),
    #[error("entry format {0} (this aorta reads {AC_FORMAT})")]
    Format(u32),
    #[error("entry is for key {found:?}, not {expected}")]
    EntryKey { found: String, expected: Key },
    #[error("manifest checksum mismatch (recorded {recorded:?}, content hashes to {actual})")]
    Checksum { recorded: String, actual: Digest },
    #[error("manifest does not match the schema: {0}")]
    Schema(#[source] serde_json::Error),
    #[error("manifest is for key {found}, not {expected}")]
    ManifestKey { found: Key, expected: Key },
    #[error(transparent)]
    Invalid(#[from] ManifestError),
    #[error("entry is {0} bytes, far too large")]
    TooLarge(u64),
    #[error("output {output:?}: blob {digest} is {len} bytes, manifest says {size}")]
    BlobSize {
        output: String,
        digest: Digest,
        len: u64,
        size: u64,
    },
    #[error("output {output:?}: blob {digest} is missing (dangling reference)")]
    BlobMissing { output: String, digest: Digest },
    /// The entry is no plain file ([`crate::StoreError::UnsafeEntry`]'s reason).
    // String: the file-system check's message, shown as is.
    #[error("{0}")]
    Unsafe(String),
}

/// A reference to one blob in the CAS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobRef {
    pub digest: Digest,
    pub size: u64,
}

/// What the action cache stores for one trial key. `T` is how the trial record is read: a JSON
/// value by default (opaque to the store); the executor reads it straight into its own type, so
/// a 10,000-trial rerun builds no JSON trees ([`LocalStore::lookup_as`](crate::LocalStore)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest<T = serde_json::Value> {
    pub key: Key,
    /// RFC 3339 UTC, e.g. `2026-01-31T12:00:00Z`.
    pub created_at: String,
    /// The trial's result.json as produced by the executor.
    pub trial: T,
    /// Output files by relative path (`stdout.log`, `rank0/trace.json`) → blob.
    pub outputs: BTreeMap<String, BlobRef>,
    pub exec_seconds: f64,
    pub aorta_version: String,
}

impl<T> Manifest<T> {
    /// A manifest stamped now, with no outputs; the executor fills in the rest.
    pub fn new(key: Key, trial: T) -> Self {
        Manifest {
            key,
            created_at: rfc3339_utc(SystemTime::now()),
            trial,
            outputs: BTreeMap::new(),
            exec_seconds: 0.0,
            aorta_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// Checks what the store relies on: safe output paths and a finite duration (JSON has no
    /// NaN, so a NaN would make the entry unreadable).
    pub fn validate(&self) -> Result<(), ManifestError> {
        for path in self.outputs.keys() {
            validate_output_path(path).map_err(|why| ManifestError::BadOutputPath {
                path: path.clone(),
                why,
            })?;
        }
        if !self.exec_seconds.is_finite() {
            return Err(ManifestError::NonFiniteSeconds(self.exec_seconds));
        }
        Ok(())
    }
}

/// Accepts only plain relative paths: `/`-separated, no empty, `.` or `..` components, no
/// absolute or drive prefixes, no backslashes or NULs. Manifests may come from a remote tier, so
/// this is what stops `../../.bashrc` from being materialised.
pub fn validate_output_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("empty path");
    }
    if path.starts_with('/') {
        return Err("absolute path");
    }
    if path.contains('\\') || path.contains('\0') || path.contains(':') {
        return Err("backslash, colon or NUL in path");
    }
    for part in path.split('/') {
        match part {
            "" => return Err("empty path component"),
            "." | ".." => return Err("`.` or `..` component"),
            _ => {}
        }
    }
    // Belt and braces: the platform's own parser must agree that it's all normal components.
    if !Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err("not a plain relative path");
    }
    Ok(())
}

#[derive(Serialize)]
struct EnvelopeOut<'a> {
    format: u32,
    key: &'a Key,
    manifest: &'a RawValue,
    blake3: Digest,
}

#[derive(Deserialize)]
struct EnvelopeIn {
    format: u32,
    key: String,
    manifest: Box<RawValue>,
    blake3: String,
}

/// Serialises `m` into the checksummed envelope.
pub(crate) fn encode_entry<T: Serialize>(m: &Manifest<T>) -> serde_json::Result<Vec<u8>> {
    // Serialised once: `to_raw_value` wraps serde_json's own output without parsing it again
    // (`RawValue::from_string` validated it, a second pass over every entry written).
    let raw = serde_json::value::to_raw_value(m)?;
    let env = EnvelopeOut {
        format: AC_FORMAT,
        key: &m.key,
        blake3: Digest::of_bytes(raw.get().as_bytes()),
        manifest: &raw,
    };
    let mut out = serde_json::to_vec(&env)?;
    out.push(b'\n');
    Ok(out)
}

/// Parses and checks an AC file's bytes; the `Err` is a human-readable reason.
pub(crate) fn decode_entry<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    expected: &Key,
) -> Result<Manifest<T>, EntryError> {
    let env: EnvelopeIn = serde_json::from_slice(bytes).map_err(EntryError::Unparseable)?;
    if env.format != AC_FORMAT {
        return Err(EntryError::Format(env.format));
    }
    if env.key != expected.as_str() {
        return Err(EntryError::EntryKey {
            found: env.key,
            expected: expected.clone(),
        });
    }
    let actual = Digest::of_bytes(env.manifest.get().as_bytes());
    if env.blake3 != actual.as_str() {
        return Err(EntryError::Checksum {
            recorded: env.blake3,
            actual,
        });
    }
    let m: Manifest<T> = serde_json::from_str(env.manifest.get()).map_err(EntryError::Schema)?;
    if &m.key != expected {
        return Err(EntryError::ManifestKey {
            found: m.key,
            expected: expected.clone(),
        });
    }
    m.validate()?;
    Ok(m)
}

/// Formats a time as RFC 3339 UTC with second precision, by hand to keep dependencies light.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day); Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key() -> Key {
        Key::of_bytes(b"trial")
    }

    fn sample() -> Manifest {
        let mut m = Manifest::new(key(), serde_json::json!({"verdict": "pass", "step": 0.1}));
        m.exec_seconds = 0.1 + 0.2; // not exactly representable: the raw-bytes checksum copes
        m.outputs.insert(
            "stdout.log".into(),
            BlobRef {
                digest: Digest::of_bytes(b"hi"),
                size: 2,
            },
        );
        m
    }

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_723); // 2000-02-29 01:02:03
        assert_eq!(rfc3339_utc(t), "2000-02-29T01:02:03Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_799); // last second of 2099
        assert_eq!(rfc3339_utc(t), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn output_paths() {
        for ok in ["stdout.log", "rank0/trace.json", "a/b/c", ".hidden", "a..b"] {
            assert_eq!(validate_output_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../x",
            "a//b",
            "a/",
            "./a",
            "a/.",
            "..",
            "c:\\x",
            "a\\b",
            "a\0b",
        ] {
            assert!(validate_output_path(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn envelope_roundtrip() {
        let m = sample();
        let bytes = encode_entry(&m).unwrap();
        assert_eq!(decode_entry(&bytes, &key()).unwrap(), m);
    }

    #[test]
    fn envelope_detects_tampering() {
        let bytes = encode_entry(&sample()).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();

        let flipped = text.replace("\"pass\"", "\"fail\"");
        let why = decode_entry::<serde_json::Value>(flipped.as_bytes(), &key()).unwrap_err();
        assert!(matches!(why, EntryError::Checksum { .. }), "{why}");
        assert!(why.to_string().contains("checksum"), "{why}");

        let why = decode_entry::<serde_json::Value>(&bytes[..bytes.len() / 2], &key()).unwrap_err();
        assert!(why.to_string().contains("unparseable"), "{why}");

        let other = Key::of_bytes(b"other");
        let why = decode_entry::<serde_json::Value>(&bytes, &other).unwrap_err();
        assert!(matches!(&why, EntryError::EntryKey { expected, .. } if *expected == other));
        assert!(why.to_string().contains("not"));

        let why = decode_entry::<serde_json::Value>(b"\x00\xff garbage", &key()).unwrap_err();
        assert!(matches!(why, EntryError::Unparseable(_)), "{why}");
        assert!(why.to_string().contains("unparseable"), "{why}");
    }

    #[test]
    fn envelope_rejects_malicious_paths_even_with_valid_checksum() {
        let mut m = sample();
        let blob = m.outputs["stdout.log"].clone();
        m.outputs.insert("../escape".into(), blob);
        // encode_entry does not validate (put_manifest does); decoding must still refuse.
        let bytes = encode_entry(&m).unwrap();
        let why = decode_entry::<serde_json::Value>(&bytes, &key()).unwrap_err();
        assert!(
            matches!(&why, EntryError::Invalid(ManifestError::BadOutputPath { path, .. }) if path == "../escape"),
            "{why}"
        );
        assert!(why.to_string().contains("../escape"), "{why}");
    }
}
