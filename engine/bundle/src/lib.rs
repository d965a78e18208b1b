//! `aorta bundle`: a run directory as one `.tar.gz` to hand to a colleague or a vendor
//! (AORTA §10.1, with its gaps closed: docs/bundle.md).
//!
//! [`stage`] redacts every text member ([`Redactor`]: built-in rules for tokens, keys, bearer
//! tokens, URL passwords, secret-named variables and home-directory user names, plus the
//! recipe's `redaction` block and, when asked, private IPs and host names) into a temporary
//! directory, hashes it with blake3 and lists it in a [`Manifest`] with counts per rule;
//! [`Staged::write`] writes the archive reproducibly (sorted members, fixed times and owners,
//! a gzip header without a time: the same run gives the same bytes); [`verify`] re-checks an
//! archive against its manifest.

mod bundle;
mod error;
mod redact;

pub use bundle::{
    hosts_in_run, slug, stage, verify, BundleOptions, Manifest, Member, RedactionRecord, Staged,
    VerifyReport, MANIFEST_SCHEMA,
};
pub use error::BundleError;
pub use redact::{Counts, RedactOptions, Redactor, MAX_LINE_BYTES};
