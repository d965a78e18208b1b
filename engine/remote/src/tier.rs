//! [`RemoteCache`] (a [`CacheTier`] over a [`Backend`]) and [`Tiered`], the local-first stack
//! the build uses: pull a remote hit into the local store before execution, push what was
//! executed afterwards. Nothing here returns an error that could fail a build.

use crate::backend::{Backend, Failure, Outcome};
use crate::config::{Mode, RemoteConfig};
use crate::sign::verified_envelope;
use aorta_store::{
    decode_ac_entry, encode_ac_entry, BlobRef, CacheTier, Digest, Key, LocalStore, Lookup,
    Manifest, ManifestError, StoreError,
};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// AC envelopes above this size are refused unread (the local store's limit too).
const MAX_AC_BYTES: u64 = 64 * 1024 * 1024;
/// A single blob may not exceed this (trial outputs are logs and traces).
const MAX_BLOB_BYTES: u64 = 64 * 1024 * 1024 * 1024;

/// What the remote tier did during this process, for the end-of-build line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Trials whose result came from the remote cache (and now sit in the local store).
    pub downloaded: u64,
    /// Lookups the remote could not answer with a hit.
    pub misses: u64,
    /// Remote entries refused because they did not verify.
    pub rejected: u64,
    /// Trials pushed to the remote cache.
    pub uploaded: u64,
    /// Trials the remote cache already had.
    pub already_present: u64,
    /// Operations that failed (the build went on without the remote for them).
    pub errors: u64,
    /// Why the remote was switched off for the rest of the run, if it was.
    pub disabled: Option<String>,
}

#[derive(Default)]
struct Counters {
    downloaded: AtomicU64,
    misses: AtomicU64,
    rejected: AtomicU64,
    uploaded: AtomicU64,
    already_present: AtomicU64,
    errors: AtomicU64,
}

pub struct RemoteCache {
    cfg: RemoteConfig,
    backend: Box<dyn Backend>,
    down: AtomicBool,
    down_reason: Mutex<Option<String>>,
    counters: Counters,
    /// Sleep between retries (shortened in tests).
    backoff: Duration,
}

impl std::fmt::Debug for RemoteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteCache")
            .field("url", &self.cfg.url)
            .field("mode", &self.cfg.mode)
            .field("namespace", &self.cfg.namespace)
            .finish()
    }
}

/// A file that writes through a blake3 hasher.
struct Hashing<W> {
    inner: W,
    hasher: blake3::Hasher,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn hash_file(path: &Path) -> io::Result<BlobRef> {
    let mut f = File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok(BlobRef {
        digest: Digest::from_hash(hasher.finalize()),
        size,
    })
}

impl RemoteCache {
    pub fn new(cfg: RemoteConfig, backend: Box<dyn Backend>) -> Self {
        RemoteCache {
            cfg,
            backend,
            down: AtomicBool::new(false),
            down_reason: Mutex::new(None),
            counters: Counters::default(),
            backoff: Duration::from_millis(100),
        }
    }

    /// Shorter waits between retries (tests).
    pub fn with_backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn config(&self) -> &RemoteConfig {
        &self.cfg
    }

    pub fn mode(&self) -> Mode {
        self.cfg.mode
    }

    /// Whether an earlier failure switched the remote off for this process.
    pub fn is_disabled(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> RemoteStats {
        let c = &self.counters;
        RemoteStats {
            downloaded: c.downloaded.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            uploaded: c.uploaded.load(Ordering::Relaxed),
            already_present: c.already_present.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            disabled: self.down_reason.lock().ok().and_then(|g| g.clone()),
        }
    }

    fn ac_object(&self, key: &Key) -> String {
        format!("{}/ac/{}/{key}", self.cfg.namespace, key.shard())
    }

    fn cas_object(&self, d: &Digest) -> String {
        format!("{}/cas/{}/{d}", self.cfg.namespace, d.shard())
    }

    fn err(&self, reason: impl Into<String>) -> StoreError {
        StoreError::Remote {
            url: self.cfg.url.clone(),
            reason: reason.into(),
        }
    }

    /// Switches the remote off for the rest of the process and says so once.
    fn trip(&self, reason: &str) {
        if !self.down.swap(true, Ordering::SeqCst) {
            if let Ok(mut g) = self.down_reason.lock() {
                *g = Some(reason.to_owned());
            }
            eprintln!("aorta: remote cache {} is unreachable ({reason}); continuing without it for this run", self.cfg.url);
        }
    }

    /// Runs `op` with bounded retries; an unreachable cache trips the breaker at once, and a
    /// transient failure that outlasts the retries trips it too (a name that does not resolve,
    /// a cache that keeps failing): an outage costs one operation's retries, not every trial's.
    fn attempt<T>(&self, mut op: impl FnMut() -> Outcome<T>) -> Result<T, StoreError> {
        if self.is_disabled() {
            return Err(self.err("switched off for this run after an earlier failure"));
        }
        let mut tries = 0u32;
        loop {
            match op() {
                Ok(v) => return Ok(v),
                Err(Failure::Unreachable(r)) => {
                    self.trip(&r);
                    return Err(self.err(r));
                }
                Err(Failure::Transient(r)) if tries < self.cfg.retries && !self.is_disabled() => {
                    std::thread::sleep(self.backoff * 2u32.pow(tries));
                    tries += 1;
                    let _ = r;
                }
                Err(Failure::Transient(r)) => {
                    let why = format!("{r} (after {} retries)", self.cfg.retries);
                    self.trip(&why);
                    return Err(self.err(why));
                }
                Err(f) => return Err(self.err(f.reason().to_owned())),
            }
        }
    }

    fn require_write(&self) -> Result<(), StoreError> {
        match self.cfg.mode {
            Mode::ReadWrite => Ok(()),
            Mode::Read => Err(self.err("read-only (--remote-cache-mode read)")),
        }
    }

    /// Whether the remote holds an entry for `key` that readers can use. Without a signing key
    /// any entry counts (HEAD); with one, only an entry signed with it, so that a writer replaces
    /// a forged or unsigned entry instead of leaving it for every reader to refuse.
    fn has_usable_entry(&self, key: &Key) -> Result<bool, StoreError> {
        let ac = self.ac_object(key);
        let Some(signing) = &self.cfg.signing else {
            return Ok(self.attempt(|| self.backend.head(&ac))?.is_some());
        };
        let found = self.attempt(|| {
            let mut buf = Vec::new();
            let there = self.backend.get(&ac, &mut buf, MAX_AC_BYTES)?;
            Ok(there.then_some(buf))
        })?;
        Ok(found.is_some_and(|bytes| {
            verified_envelope(Some(signing), key, &bytes)
                .is_ok_and(|env| decode_ac_entry(env, key).is_ok())
        }))
    }

    fn head_blob(&self, d: &Digest) -> Result<Option<u64>, StoreError> {
        let path = self.cas_object(d);
        self.attempt(|| self.backend.head(&path))
    }

    fn put_object_from_bytes(&self, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let mut tmp = tempfile::NamedTempFile::new()
            .map_err(|e| self.err(format!("cannot create a temp file: {e}")))?;
        tmp.write_all(bytes)
            .map_err(|e| self.err(format!("cannot write a temp file: {e}")))?;
        self.attempt(|| self.backend.put(path, tmp.path(), bytes.len() as u64))
    }
}

impl RemoteCache {
    /// Downloads blob `d` into `dest`, verified, reading at most `limit` bytes: a manifest
    /// declares each blob's size, so an oversized or endless body is cut off there (one that
    /// declares more is refused before it is read).
    fn fetch_blob(&self, d: &Digest, limit: u64, dest: &Path) -> Result<(), StoreError> {
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let path = self.cas_object(d);
        let tmp = self.attempt(|| {
            let tmp = tempfile::Builder::new()
                .prefix(".aorta-remote-")
                .tempfile_in(&parent)
                .map_err(|e| {
                    Failure::Refused(format!("create temp file in {}: {e}", parent.display()))
                })?;
            let mut w = Hashing {
                inner: tmp.as_file(),
                hasher: blake3::Hasher::new(),
                len: 0,
            };
            if !self.backend.get(&path, &mut w, limit)? {
                return Ok(None);
            }
            let actual = Digest::from_hash(w.hasher.finalize());
            Ok(Some((tmp, actual)))
        })?;
        let Some((tmp, actual)) = tmp else {
            return Err(StoreError::MissingBlob {
                digest: d.clone(),
                path: PathBuf::from(format!("{}/{path}", self.cfg.url)),
            });
        };
        if &actual != d {
            // Not the local store's Corrupt: nothing was quarantined, the bytes were dropped.
            return Err(self.err(format!(
                "{path}: the downloaded bytes hash to {actual}, not {d}; refused"
            )));
        }
        tmp.as_file()
            .sync_all()
            .map_err(StoreError::io("fsync", tmp.path().to_owned()))?;
        tmp.persist(dest)
            .map_err(|e| StoreError::io("rename into", dest.to_owned())(e.error))?;
        Ok(())
    }
}

impl CacheTier for RemoteCache {
    fn get_manifest(&self, key: &Key) -> Result<Lookup, StoreError> {
        let path = self.ac_object(key);
        let found = self.attempt(|| {
            let mut buf = Vec::new();
            let there = self.backend.get(&path, &mut buf, MAX_AC_BYTES)?;
            Ok(there.then_some(buf))
        })?;
        let Some(bytes) = found else {
            return Ok(Lookup::Miss);
        };
        let envelope = match verified_envelope(self.cfg.signing.as_ref(), key, &bytes) {
            Ok(e) => e,
            Err(reason) => {
                return Ok(Lookup::Corrupt {
                    reason: format!("remote entry: {reason}"),
                })
            }
        };
        let m = match decode_ac_entry(envelope, key) {
            Ok(m) => m,
            Err(reason) => {
                return Ok(Lookup::Corrupt {
                    reason: format!("remote entry: {reason}"),
                })
            }
        };
        for (rel, blob) in &m.outputs {
            match self.head_blob(&blob.digest)? {
                Some(size) if size == blob.size || size == u64::MAX => {}
                Some(size) => {
                    return Ok(Lookup::Corrupt {
                        reason: format!(
                        "remote entry: output {rel:?}: blob {} is {size} bytes, manifest says {}",
                        blob.digest, blob.size
                    ),
                    })
                }
                None => {
                    return Ok(Lookup::Corrupt {
                        reason: format!(
                            "remote entry: output {rel:?}: blob {} is missing remotely",
                            blob.digest
                        ),
                    })
                }
            }
        }
        Ok(Lookup::Hit(m))
    }

    fn put_manifest(&self, key: &Key, m: &Manifest) -> Result<(), StoreError> {
        self.require_write()?;
        if &m.key != key {
            return Err(StoreError::InvalidManifest {
                key: key.to_string(),
                source: ManifestError::OtherKey(m.key.clone()),
            });
        }
        m.validate().map_err(|source| StoreError::InvalidManifest {
            key: key.to_string(),
            source,
        })?;
        for blob in m.outputs.values() {
            match self.head_blob(&blob.digest)? {
                Some(size) if size == blob.size || size == u64::MAX => {}
                _ => return Err(self.err(format!("refusing to upload the entry for {key}: blob {} is not in the remote cache (upload blobs first)", blob.digest))),
            }
        }
        let mut bytes = encode_ac_entry(m).map_err(|e| StoreError::InvalidManifest {
            key: key.to_string(),
            source: ManifestError::Encode(e),
        })?;
        if let Some(signing) = &self.cfg.signing {
            bytes = signing.sign(key, &bytes);
        }
        self.put_object_from_bytes(&self.ac_object(key), &bytes)
    }

    fn has_blob(&self, d: &Digest) -> Result<bool, StoreError> {
        Ok(self.head_blob(d)?.is_some())
    }

    fn get_blob_to(&self, d: &Digest, dest: &Path) -> Result<(), StoreError> {
        self.fetch_blob(d, MAX_BLOB_BYTES, dest)
    }

    fn put_blob_from(&self, src: &Path) -> Result<BlobRef, StoreError> {
        self.require_write()?;
        let blob = hash_file(src).map_err(StoreError::io("read", src.to_owned()))?;
        if let Some(size) = self.head_blob(&blob.digest)? {
            if size == blob.size {
                return Ok(blob);
            }
        }
        let path = self.cas_object(&blob.digest);
        self.attempt(|| self.backend.put(&path, src, blob.size))?;
        // The file must not have changed while it was being sent.
        if hash_file(src).map_err(StoreError::io("read", src.to_owned()))? != blob {
            return Err(self.err(format!(
                "{} changed while it was being uploaded",
                src.display()
            )));
        }
        Ok(blob)
    }
}

/// What [`Tiered::pull`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// The local store already had it.
    Local,
    /// Downloaded, verified and committed to the local store.
    Remote,
    /// Neither has it (or the remote's entry did not verify, or the remote is unavailable).
    Miss,
}

/// Local store first, remote second.
#[derive(Clone)]
pub struct Tiered {
    pub remote: Arc<RemoteCache>,
}

impl Tiered {
    pub fn new(remote: Arc<RemoteCache>) -> Self {
        Tiered { remote }
    }

    /// On a local miss, looks `key` up remotely; on a verified hit downloads every blob the
    /// local store lacks (each re-hashed), then commits the manifest locally. Never fails:
    /// trouble is counted, reported once, and reads as a miss.
    pub fn pull(&self, local: &LocalStore, key: &Key) -> Pulled {
        if let Ok(Lookup::Hit(_)) = local.lookup(key) {
            return Pulled::Local;
        }
        if self.remote.is_disabled() {
            return Pulled::Miss;
        }
        match self.try_pull(local, key) {
            Ok(true) => {
                self.remote
                    .counters
                    .downloaded
                    .fetch_add(1, Ordering::Relaxed);
                Pulled::Remote
            }
            Ok(false) => {
                self.remote.counters.misses.fetch_add(1, Ordering::Relaxed);
                Pulled::Miss
            }
            Err(e) => {
                self.remote.counters.errors.fetch_add(1, Ordering::Relaxed);
                if !self.remote.is_disabled() {
                    eprintln!(
                        "aorta: remote cache: cannot fetch trial {key}: {e}; it will run locally"
                    );
                }
                Pulled::Miss
            }
        }
    }

    fn try_pull(&self, local: &LocalStore, key: &Key) -> Result<bool, StoreError> {
        let m = match self.remote.get_manifest(key)? {
            Lookup::Hit(m) => m,
            Lookup::Miss => return Ok(false),
            Lookup::Corrupt { reason } => {
                self.remote
                    .counters
                    .rejected
                    .fetch_add(1, Ordering::Relaxed);
                eprintln!("aorta: remote cache: ignoring the entry for trial {key}: {reason}");
                return Ok(false);
            }
        };
        // Keep gc out between the first blob and the manifest.
        let _lock = local.build_lock()?;
        let tmp_dir = local.root().join("tmp");
        for blob in m.outputs.values() {
            if local.has_blob(&blob.digest)? {
                continue;
            }
            let tmp = tempfile::Builder::new()
                .prefix("remote-")
                .tempdir_in(&tmp_dir)
                .map_err(StoreError::io("create temp dir in", tmp_dir.clone()))?;
            let file = tmp.path().join("blob");
            self.remote.fetch_blob(&blob.digest, blob.size, &file)?;
            let stored = local.put_blob_file(&file)?;
            if stored != *blob {
                return Err(StoreError::Corrupt {
                    path: file,
                    expected: blob.digest.clone(),
                    actual: stored.digest.to_string(),
                });
            }
        }
        local.put_manifest(&m)?;
        Ok(true)
    }

    /// [`pull`](Self::pull) for many keys on a few threads (lookups are latency-bound).
    /// Returns how many came from the remote.
    pub fn pull_many(&self, local: &LocalStore, keys: &[Key]) -> usize {
        let threads = 8.min(keys.len()).max(1);
        let chunk = keys.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = keys
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .filter(|k| self.pull(local, k) == Pulled::Remote)
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        })
    }

    /// Uploads the local entry for `key` if the remote lacks it: the entry is re-verified
    /// locally first (a local `Hit`), each blob is copied out of the local store verified, then
    /// blobs go up and the manifest last. Read-only mode uploads nothing. Never fails.
    pub fn push(&self, local: &LocalStore, key: &Key) -> bool {
        if self.remote.mode() != Mode::ReadWrite || self.remote.is_disabled() {
            return false;
        }
        match self.try_push(local, key) {
            Ok(pushed) => pushed,
            Err(e) => {
                self.remote.counters.errors.fetch_add(1, Ordering::Relaxed);
                if !self.remote.is_disabled() {
                    eprintln!("aorta: remote cache: cannot upload trial {key}: {e}");
                }
                false
            }
        }
    }

    fn try_push(&self, local: &LocalStore, key: &Key) -> Result<bool, StoreError> {
        let m = match local.lookup(key)? {
            Lookup::Hit(m) => m,
            _ => return Ok(false), // only verified local entries travel
        };
        if self.remote.has_usable_entry(key)? {
            self.remote
                .counters
                .already_present
                .fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        let tmp_dir = local.root().join("tmp");
        for blob in m.outputs.values() {
            if self.remote.has_blob(&blob.digest)? {
                continue;
            }
            let tmp = tempfile::Builder::new()
                .prefix("push-")
                .tempdir_in(&tmp_dir)
                .map_err(StoreError::io("create temp dir in", tmp_dir.clone()))?;
            let file = tmp.path().join("blob");
            local.get_blob_to(&blob.digest, &file)?; // re-hashed on the way out
            let sent = self.remote.put_blob_from(&file)?;
            if sent != *blob {
                return Err(StoreError::Corrupt {
                    path: file,
                    expected: blob.digest.clone(),
                    actual: sent.digest.to_string(),
                });
            }
        }
        self.remote.put_manifest(key, &m)?;
        self.remote
            .counters
            .uploaded
            .fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// [`push`](Self::push) for many keys; returns how many were uploaded.
    pub fn push_many(&self, local: &LocalStore, keys: &[Key]) -> usize {
        let threads = 4.min(keys.len()).max(1);
        let chunk = keys.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = keys
                .chunks(chunk)
                .map(|part| s.spawn(move || part.iter().filter(|k| self.push(local, k)).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        })
    }
}
