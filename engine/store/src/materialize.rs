//! Putting a manifest's outputs back on disk: [`LocalStore::materialize`] copies every blob;
//! [`LocalStore::link_out`] hard-links them where the filesystem allows, which is what a
//! client collecting 10,000 trials from a cluster can afford (a link allocates no inode and
//! writes no data; a copy does both, and fsyncs).
//!
//! A link *is* the store's blob, so two rules keep a cache hit from ever showing wrong
//! outputs (DVC's `cache.type: hardlink` makes the same trade):
//! - a linked blob is made read-only first: an edit in a run directory fails instead of
//!   reaching the store (root ignores the mode, hence the next rule);
//! - every link is hashed as it is made, and every later read of a blob re-hashes it, so a
//!   blob changed through a link is quarantined and its trial re-run, never served.

use crate::error::{Result, StoreError};
use crate::fsio::{copy_hashing, ensure_dir, open_regular_md};
use crate::local::LocalStore;
use crate::manifest::{BlobRef, Manifest, ManifestError};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

impl LocalStore {
    /// Copies every output of `m` to `dest_dir/<relpath>`, each file atomically and
    /// hash-verified. Output paths are validated first, and no directory on the way may be a
    /// symlink, so a hostile manifest cannot write outside `dest_dir`.
    pub fn materialize<T>(&self, m: &Manifest<T>, dest_dir: &Path) -> Result<()> {
        for (dest, blob) in output_paths(m, dest_dir)? {
            self.copy_out(m, blob, &dest)?;
        }
        Ok(())
    }

    /// Makes [`link_out`](Self::link_out) copy from now on (`AORTA_PLACE_OUTPUTS=copy`: a
    /// user who wants run directories of writable files of their own).
    pub fn place_by_copy(&self) {
        self.links_refused.store(true, Relaxed);
    }

    /// [`materialize`](Self::materialize) into a directory that is private to the caller
    /// until it renames it into place (a staging directory, so no output exists there yet):
    /// each output is a hard link to its blob, read-only and hash-verified, or a copy where
    /// the filesystem will not link it (`dest_dir` on another filesystem, a blob at the link
    /// limit). The caller must replace files there, never write into one: they are the store's.
    pub fn link_out<T>(&self, m: &Manifest<T>, dest_dir: &Path) -> Result<()> {
        for (dest, blob) in output_paths(m, dest_dir)? {
            if !self.link_blob(blob, &dest)? {
                self.copy_out(m, blob, &dest)?;
            }
        }
        Ok(())
    }

    fn copy_out<T>(&self, m: &Manifest<T>, blob: &BlobRef, dest: &Path) -> Result<()> {
        self.get_blob_sized(&blob.digest, Some(blob.size), dest)
            .map_err(|e| match e {
                StoreError::InvalidManifest { source, .. } => StoreError::InvalidManifest {
                    key: m.key.to_string(),
                    source,
                },
                e => e,
            })
    }

    /// Links `blob` at `dest` and verifies what was linked. `Ok(false)`: not linked (the
    /// filesystem refused, or the blob is missing or not a plain file): copy instead, which
    /// reports a missing or unsafe blob as reading it always has.
    #[cfg(not(unix))]
    fn link_blob(&self, _: &BlobRef, _: &Path) -> Result<bool> {
        Ok(false)
    }

    #[cfg(unix)]
    fn link_blob(&self, blob: &BlobRef, dest: &Path) -> Result<bool> {
        if self.links_refused.load(Relaxed) {
            return Ok(false);
        }
        let src = self.blob_path(&blob.digest);
        if let Err(e) = fs::hard_link(&src, dest) {
            return match e.raw_os_error() {
                // Another filesystem, or one without hard links (or not for this user).
                Some(libc::EXDEV | libc::EPERM | libc::EOPNOTSUPP | libc::ENOSYS) => {
                    self.links_refused.store(true, Relaxed);
                    Ok(false)
                }
                // This blob has as many links as the filesystem allows; others may not.
                Some(libc::EMLINK) => Ok(false),
                _ if e.kind() == io::ErrorKind::NotFound => Ok(false),
                _ => Err(StoreError::io("link a blob to", dest)(e)),
            };
        }
        let unlink = |dest: &Path| {
            fs::remove_file(dest).map_err(StoreError::io("remove a bad link at", dest))
        };
        // A symlink planted where the blob belongs was linked as itself: opening it refuses.
        let (mut f, md) = match open_regular_md(dest) {
            Ok(Some((f, md))) if md.is_file() => (f, md),
            _ => {
                unlink(dest)?;
                return Ok(false);
            }
        };
        use std::os::unix::fs::PermissionsExt;
        // Not the blob's owner (a store shared between users): a file of our own instead.
        if md.permissions().mode() & 0o222 != 0
            && f.set_permissions(fs::Permissions::from_mode(0o444))
                .is_err()
        {
            drop(f);
            unlink(dest)?;
            return Ok(false);
        }
        let (hash, size) = copy_hashing(&mut f, None).map_err(StoreError::io("read", dest))?;
        drop(f);
        let actual = crate::Digest::from_hash(hash);
        if actual != blob.digest {
            unlink(dest)?;
            // Quarantine what was linked, not whatever the blob's name points at by now.
            if same_file(&src, &md) {
                self.quarantine(&src)?;
            }
            return Err(StoreError::Corrupt {
                path: src,
                expected: blob.digest.clone(),
                actual: actual.to_string(),
            });
        }
        if size != blob.size {
            unlink(dest)?;
            return Err(StoreError::InvalidManifest {
                key: String::new(),
                source: ManifestError::BlobSize {
                    digest: blob.digest.clone(),
                    got: size,
                    want: blob.size,
                },
            });
        }
        Ok(true)
    }
}

/// Each output's destination under `dest_dir`, its directories made (none may be a symlink),
/// after validating `m`, so a hostile manifest cannot reach outside `dest_dir`.
fn output_paths<'m, T>(m: &'m Manifest<T>, dest_dir: &Path) -> Result<Vec<(PathBuf, &'m BlobRef)>> {
    m.validate().map_err(|source| StoreError::InvalidManifest {
        key: m.key.to_string(),
        source,
    })?;
    fs::create_dir_all(dest_dir).map_err(StoreError::io("create directory", dest_dir))?;
    let mut out = Vec::with_capacity(m.outputs.len());
    for (rel, blob) in &m.outputs {
        let mut dest = dest_dir.to_path_buf();
        let parts: Vec<&str> = rel.split('/').collect();
        let (file, dirs) = parts.split_last().expect("validated non-empty");
        for part in dirs {
            dest.push(part);
            ensure_dir(&dest)?;
        }
        dest.push(file);
        out.push((dest, blob));
    }
    Ok(out)
}

#[cfg(unix)]
fn same_file(path: &Path, md: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(path).is_ok_and(|m| m.dev() == md.dev() && m.ino() == md.ino())
}
