//! Signed action-cache records. With a shared secret configured, a writer appends a keyed
//! blake3 MAC of the trial key and the AC envelope to each record it uploads, and a reader
//! refuses a record whose MAC is missing or wrong. The envelope's own checksum only catches
//! accidents: anyone who can write to the cache can recompute it after editing a record
//! (pass → fail). A MAC can only be made with the secret.
//!
//! Blobs need no signature: they are named by their blake3, re-hashed on download, and the
//! signed record names the digests.
//!
//! On the wire a signed record is the envelope, then one trailer line:
//!
//! ```text
//! {"format":1,"key":"…","manifest":{…},"blake3":"…"}
//! aorta-signature v1 blake3-keyed <64 hex>
//! ```

use crate::error::ConfigError;
use aorta_store::Key;
use std::fmt;
use std::path::Path;

/// Separates the envelope from the signature (the envelope is JSON: it holds no raw newline).
const TRAILER: &[u8] = b"\naorta-signature v1 blake3-keyed ";
/// Domain separation for the MAC input and for deriving the MAC key from the secret.
const MAC_CONTEXT: &[u8] = b"aorta remote-cache action-cache record v1\0";
const KDF_CONTEXT: &str = "aorta remote cache 2026 record signing key v1";
/// Secrets shorter than this are refused: a guessable secret signs nothing.
pub const MIN_SECRET_BYTES: usize = 16;

/// The key records are signed with, derived from the shared secret. Debug never shows it.
#[derive(Clone)]
pub struct SigningKey {
    key: [u8; 32],
    /// A public fingerprint of the key (for messages: which key signed, without revealing it).
    id: String,
}

impl SigningKey {
    /// Derives the key from a secret of at least [`MIN_SECRET_BYTES`] bytes (surrounding
    /// whitespace, such as a key file's final newline, is not part of it).
    pub fn from_secret(secret: &[u8]) -> Result<SigningKey, ConfigError> {
        let secret = secret.trim_ascii();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(ConfigError::new(
                format!("the remote cache signing secret is {} bytes; it must be at least {MIN_SECRET_BYTES}", secret.len()),
                "generate one with `openssl rand -hex 32` and give every reader and writer the same value",
            ));
        }
        let key = blake3::derive_key(KDF_CONTEXT, secret);
        let id = blake3::hash(&key).to_hex()[..12].to_string();
        Ok(SigningKey { key, id })
    }

    /// Reads the secret from a file (`AORTA_REMOTE_CACHE_HMAC_KEY_FILE`).
    pub fn from_file(path: &Path) -> Result<SigningKey, ConfigError> {
        let bytes = std::fs::read(path).map_err(|e| {
            ConfigError::new(
                format!(
                    "cannot read the remote cache signing key file {}: {e}",
                    path.display()
                ),
                "check the path in AORTA_REMOTE_CACHE_HMAC_KEY_FILE and its permissions",
            )
        })?;
        SigningKey::from_secret(&bytes)
            .map_err(|e| ConfigError::new(format!("{}: {}", path.display(), e.message), e.help))
    }

    /// A fingerprint of the key, safe to print.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn mac(&self, key: &Key, envelope: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(MAC_CONTEXT);
        h.update(key.as_str().as_bytes());
        h.update(b"\0");
        h.update(envelope);
        h.finalize()
    }

    /// The record as uploaded: the envelope and its signature trailer.
    pub fn sign(&self, key: &Key, envelope: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(envelope.len() + TRAILER.len() + 65);
        out.extend_from_slice(envelope);
        out.extend_from_slice(TRAILER);
        out.extend_from_slice(self.mac(key, envelope).to_hex().as_bytes());
        out.push(b'\n');
        out
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.id)
    }
}

impl PartialEq for SigningKey {
    fn eq(&self, other: &Self) -> bool {
        // Comparing configurations, not checking a MAC: the public fingerprints suffice.
        self.id == other.id
    }
}

impl Eq for SigningKey {}

/// Splits an uploaded record into its envelope and its signature (hex), if it has one.
fn split(record: &[u8]) -> (&[u8], Option<&[u8]>) {
    let found = record.windows(TRAILER.len()).rposition(|w| w == TRAILER);
    match found {
        Some(i) => (
            &record[..i],
            Some(record[i + TRAILER.len()..].trim_ascii_end()),
        ),
        None => (record, None),
    }
}

/// Why a remote record may not be used; shown as a corrupt entry's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the record is not signed, and this cache requires signed records (a signing key is configured)")]
    Unsigned,
    /// `key_id` is the fingerprint of this cache's key ([`SigningKey::id`]).
    #[error("the record's signature does not verify with this cache's signing key ({key_id}): signed with another key, or edited")]
    Mismatch { key_id: String },
    #[error("the record's signature is malformed")]
    Malformed,
}

/// The envelope of `record`, if it may be used: with a key, only when signed by that key for
/// `key`; without one, signed or not (the signature is then not checked). `Err` says why not.
pub fn verified_envelope<'r>(
    signing: Option<&SigningKey>,
    key: &Key,
    record: &'r [u8],
) -> Result<&'r [u8], SignatureError> {
    let (envelope, signature) = split(record);
    let Some(signing) = signing else {
        return Ok(envelope);
    };
    let Some(signature) = signature else {
        return Err(SignatureError::Unsigned);
    };
    let claimed = std::str::from_utf8(signature)
        .ok()
        .and_then(|s| blake3::Hash::from_hex(s).ok());
    match claimed {
        // blake3::Hash's equality is constant-time.
        Some(claimed) if claimed == signing.mac(key, envelope) => Ok(envelope),
        Some(_) => Err(SignatureError::Mismatch {
            key_id: signing.id().to_owned(),
        }),
        None => Err(SignatureError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> SigningKey {
        SigningKey::from_secret(s.as_bytes()).unwrap()
    }

    #[test]
    fn signed_records_verify_and_edits_do_not() {
        let k = key("0123456789abcdef0123");
        let trial = Key::of_bytes(b"t");
        let env = br#"{"format":1,"verdict":"pass"}"#;
        let rec = k.sign(&trial, env);
        assert_eq!(verified_envelope(Some(&k), &trial, &rec).unwrap(), env);
        // Readers without a key use the envelope of a signed record as it is.
        assert_eq!(verified_envelope(None, &trial, &rec).unwrap(), env);
        assert_eq!(verified_envelope(None, &trial, env).unwrap(), env);
        // Unsigned, edited, another trial's key, another signing key, a mangled signature.
        assert_eq!(
            verified_envelope(Some(&k), &trial, env),
            Err(SignatureError::Unsigned)
        );
        assert!(verified_envelope(Some(&k), &trial, env)
            .unwrap_err()
            .to_string()
            .contains("not signed"));
        let edited = String::from_utf8(rec.clone())
            .unwrap()
            .replace("pass", "fail");
        assert!(verified_envelope(Some(&k), &trial, edited.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("does not verify"));
        assert!(verified_envelope(Some(&k), &Key::of_bytes(b"u"), &rec).is_err());
        let other = key("another secret, long enough");
        assert!(verified_envelope(Some(&other), &trial, &rec).is_err());
        let resigned = other.sign(
            &trial,
            String::from_utf8_lossy(env)
                .replace("pass", "fail")
                .as_bytes(),
        );
        assert!(verified_envelope(Some(&k), &trial, &resigned).is_err());
        let mut mangled = rec.clone();
        let n = mangled.len();
        mangled[n - 5] = b'z';
        assert_eq!(
            verified_envelope(Some(&k), &trial, &mangled),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn short_secrets_are_refused_and_keys_never_print() {
        assert!(SigningKey::from_secret(b"short\n").is_err());
        assert!(SigningKey::from_secret(b"   0123456789abcdef   \n").is_ok());
        let k = key("0123456789abcdef-secret");
        let shown = format!("{k:?}");
        assert!(
            !shown.contains("secret") && shown.contains(k.id()),
            "{shown}"
        );
        assert_eq!(key("0123456789abcdef-secret"), k);
        assert_ne!(key("0123456789abcdef-other"), k);
    }
}
