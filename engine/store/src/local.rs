//! [`LocalStore`]: the on-disk store under `.aorta/` (or `$AORTA_STORE`).
//!
//! ```text
//! <root>/VERSION              store format version ("1")
//! <root>/cas/ab/abcdef…       blobs, named by the blake3 of their content
//! <root>/ac/12/1234….json     action cache: trial key → checksummed result manifest
//! <root>/tmp/                 temp files, renamed into cas/ or ac/ when complete
//! <root>/locks/store.lock     shared by builds, exclusive for gc
//! <root>/locks/keys/<k>.lock  one per trial key being executed
//! <root>/quarantine/          corrupt entries moved aside for inspection
//! ```
//!
//! Writes go through [`TempFile`] (atomic rename), reads re-hash (blobs) or re-checksum (AC
//! entries). Paths are only ever built from validated [`Key`]/[`Digest`]s.

use crate::digest::{Digest, Key};
use crate::error::{Result, StoreError};
use crate::fsio::{self, copy_hashing, ensure_dir, open_regular, regular_file_len, TempFile};
use crate::manifest::{decode_entry, encode_entry, BlobRef, EntryError, Manifest, ManifestError};
use crate::{CacheTier, Lookup};
use std::fs::{self, File};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The store format this crate writes and the newest it can read.
pub const STORE_FORMAT_VERSION: u64 = 1;

/// AC entries above this size are garbage by definition; don't read them into memory.
const MAX_AC_ENTRY_BYTES: u64 = 64 * 1024 * 1024;

/// How stale an entry's mtime (gc's last-use time) may get before a hit refreshes it.
const LRU_TOUCH_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// `$AORTA_STORE` if set and non-empty, else `<workspace_root>/.aorta`.
pub fn default_store_root(workspace_root: &Path) -> PathBuf {
    match std::env::var_os("AORTA_STORE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace_root.join(".aorta"),
    }
}

/// The local content-addressed store. Cheap to clone; safe to share across threads and
/// processes (all coordination is through the filesystem and OS locks).
#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    /// Blobs (path, size) and shard directories already seen present by this handle. Lookups of
    /// a 10,000-trial rerun check the same few blobs over and over; nothing deletes them while a
    /// build holds its shared lock, and this handle's own deletions (quarantine, invalidate, gc,
    /// repair) clear it.
    known: std::sync::Mutex<Known>,
    /// Set once the filesystem refuses a hard link out of the store, or when told to copy:
    /// then [`Self::link_out`] copies without asking.
    pub(crate) links_refused: std::sync::atomic::AtomicBool,
}

impl Clone for LocalStore {
    fn clone(&self) -> Self {
        LocalStore {
            root: self.root.clone(),
            known: Default::default(),
            // `AORTA_PLACE_OUTPUTS=copy` holds for every handle of the invocation.
            links_refused: self
                .links_refused
                .load(std::sync::atomic::Ordering::Relaxed)
                .into(),
        }
    }
}

#[derive(Debug, Default)]
struct Known {
    blobs: std::collections::HashSet<(PathBuf, u64)>,
    shards: std::collections::HashSet<PathBuf>,
}

/// The name the issue uses for the local store.
pub type Store = LocalStore;

impl LocalStore {
    /// Opens (creating if needed) the store at `root`. Refuses a store written by a newer format.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let store = LocalStore {
            root: root.into(),
            known: Default::default(),
            links_refused: Default::default(),
        };
        fs::create_dir_all(&store.root)
            .map_err(StoreError::io("create store root", &store.root))?;
        let version_path = store.root.join("VERSION");
        let have_version = match open_regular(&version_path)? {
            Some((mut f, len)) => {
                let mut text = String::new();
                if len > 64 || f.read_to_string(&mut text).is_err() {
                    return Err(store.bad_version("not a short text file"));
                }
                let found: u64 = text.trim().parse().map_err(|_| {
                    store.bad_version(&format!("{:?} is not a number", text.trim()))
                })?;
                if found == 0 {
                    return Err(store.bad_version("version 0"));
                }
                if found > STORE_FORMAT_VERSION {
                    return Err(StoreError::UnsupportedVersion {
                        root: store.root.clone(),
                        found,
                        supported: STORE_FORMAT_VERSION,
                    });
                }
                true
            }
            None => false,
        };
        for dir in [
            store.cas_dir(),
            store.ac_dir(),
            store.tmp_dir(),
            store.root.join("locks"),
            store.root.join("locks").join("keys"),
            store.quarantine_dir(),
        ] {
            ensure_dir(&dir)?;
        }
        if !have_version {
            let mut tmp = TempFile::new_in(&store.tmp_dir(), "version-")?;
            writeln!(tmp.file(), "{STORE_FORMAT_VERSION}")
                .map_err(StoreError::io("write", tmp.path().to_owned()))?;
            tmp.persist(&version_path)?;
        }
        Ok(store)
    }

    /// Whether this process can write where a build writes: a file is created and removed in
    /// each of the store's directories. Read-only mounts, permission bits and full quotas all
    /// show here, before any trial runs (a trial whose result cannot be stored ran for nothing).
    pub fn check_writable(&self) -> Result<()> {
        for dir in [
            self.tmp_dir(),
            self.cas_dir(),
            self.ac_dir(),
            self.root.join("locks").join("keys"),
        ] {
            TempFile::new_in(&dir, ".write-check-")?;
        }
        Ok(())
    }

    fn bad_version(&self, detail: &str) -> StoreError {
        StoreError::BadVersion {
            root: self.root.clone(),
            detail: detail.to_owned(),
        }
    }

    /// Makes every entry written so far durable (one `syncfs`; see the fsio module docs).
    pub fn sync(&self) -> Result<()> {
        crate::fsio::sync_filesystem(&self.root)
            .map_err(StoreError::io("sync the store's filesystem", &self.root))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub(crate) fn cas_dir(&self) -> PathBuf {
        self.root.join("cas")
    }
    pub(crate) fn ac_dir(&self) -> PathBuf {
        self.root.join("ac")
    }
    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }
    pub(crate) fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }
    pub(crate) fn store_lock_path(&self) -> PathBuf {
        self.root.join("locks").join("store.lock")
    }
    pub(crate) fn key_locks_dir(&self) -> PathBuf {
        self.root.join("locks").join("keys")
    }
    pub(crate) fn key_lock_path(&self, key: &Key) -> PathBuf {
        self.key_locks_dir().join(format!("{key}.lock"))
    }

    /// Where blob `d` lives (whether or not it exists).
    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.entry_path("cas", d.shard(), d.as_str(), "")
    }

    /// Where the AC entry for `key` lives (whether or not it exists).
    pub fn ac_path(&self, key: &Key) -> PathBuf {
        self.entry_path("ac", key.shard(), key.as_str(), ".json")
    }

    /// `<root>/<half>/<shard>/<name><suffix>`, made with one allocation: a trial looks its
    /// entry and blobs up several times.
    fn entry_path(&self, half: &str, shard: &str, name: &str, suffix: &str) -> PathBuf {
        let root = self.root.as_os_str();
        let mut p = std::ffi::OsString::with_capacity(
            root.len() + half.len() + shard.len() + name.len() + suffix.len() + 3,
        );
        p.push(root);
        let mut p = PathBuf::from(p);
        p.push(half);
        p.push(shard);
        p.push(name);
        p.as_mut_os_string().push(suffix);
        p
    }

    /// Moves a bad entry into `quarantine/` (deleting it if even that fails) so the next run
    /// starts clean but a human can still look at what went wrong.
    pub(crate) fn quarantine(&self, path: &Path) -> Result<()> {
        self.forget_known();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dest = self
            .quarantine_dir()
            .join(fsio::unique_name("", &format!("-{name}")));
        match fs::rename(path, &dest) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(_) => match fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(StoreError::io("quarantine", path)(e)),
            },
        }
    }

    /// The action cache's shards that exist now (a key's shard is [`Key::shard`]): a key in
    /// an absent shard has no entry as of this call. One directory listing, where looking up
    /// every key of a cold store costs a `stat` each; the shard directories it finds are
    /// remembered as [`Self::shard_known`] remembers them. As with any lookup, an entry may
    /// appear right after; callers that act on a miss look up again under the key's claim.
    pub fn ac_shards(&self) -> Result<std::collections::HashSet<String>> {
        let dir = self.ac_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(e) => return Err(StoreError::io("list", &dir)(e)),
        };
        let mut shards = std::collections::HashSet::new();
        let mut dirs = Vec::new();
        for e in entries {
            let e = e.map_err(StoreError::io("list", &dir))?;
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(e.path());
            }
            if let Some(name) = e.file_name().to_str() {
                shards.insert(name.to_string());
            }
        }
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .shards
            .extend(dirs);
        Ok(shards)
    }

    /// Forgets what [`LocalStore::known`] remembers (after anything is deleted).
    pub(crate) fn forget_known(&self) {
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) = Known::default();
    }

    /// [`Self::shard_exists`], remembering a shard once seen.
    fn shard_known(&self, dir: &Path) -> Result<bool> {
        if self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .shards
            .contains(dir)
        {
            return Ok(true);
        }
        let there = Self::shard_exists(dir)?;
        if there {
            self.known
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .shards
                .insert(dir.to_path_buf());
        }
        Ok(there)
    }

    /// Errors if a shard directory is a symlink/file; `Ok(false)` if it doesn't exist.
    fn shard_exists(dir: &Path) -> Result<bool> {
        match fs::symlink_metadata(dir) {
            Ok(md) if md.is_dir() => Ok(true),
            Ok(_) => Err(StoreError::UnsafeEntry {
                path: dir.to_owned(),
                reason: "expected a shard directory (symlinks are never followed)".into(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::io("stat", dir)(e)),
        }
    }

    // ---------------------------------------------------------------- CAS

    /// Stores everything `reader` yields, streaming through a temp file while hashing.
    pub fn put_blob_reader(&self, mut reader: impl Read) -> Result<BlobRef> {
        let mut tmp = TempFile::new_in(&self.tmp_dir(), "blob-")?;
        let (hash, size) = copy_hashing(&mut reader, Some(tmp.file()))
            .map_err(StoreError::io("stream blob into", tmp.path().to_owned()))?;
        let blob = BlobRef {
            digest: Digest::from_hash(hash),
            size,
        };
        self.install_blob(tmp, &blob)?;
        Ok(blob)
    }

    /// Stores a small in-memory blob.
    pub fn put_blob_bytes(&self, bytes: &[u8]) -> Result<BlobRef> {
        self.put_blob_reader(bytes)
    }

    /// Stores a file. Hashes it first so an already-present blob costs one read and no write;
    /// otherwise copies it while re-hashing and fails if the file changed in between.
    pub fn put_blob_file(&self, src: &Path) -> Result<BlobRef> {
        self.put_blob_file_unless(src, &[])
    }

    /// [`Self::put_blob_file`], taking the blobs in `present` as there without a look: blobs
    /// this caller put while holding the store lock it still holds ([`crate::Claim`]).
    pub(crate) fn put_blob_file_unless(&self, src: &Path, present: &[BlobRef]) -> Result<BlobRef> {
        let mut f = File::open(src).map_err(StoreError::io("open", src))?;
        let (hash, size) = copy_hashing(&mut f, None).map_err(StoreError::io("read", src))?;
        let blob = BlobRef {
            digest: Digest::from_hash(hash),
            size,
        };
        if present.contains(&blob) || regular_file_len(&self.blob_path(&blob.digest)) == Some(size)
        {
            return Ok(blob);
        }
        f.rewind().map_err(StoreError::io("seek", src))?;
        let mut tmp = TempFile::new_in(&self.tmp_dir(), "blob-")?;
        let (hash2, _) = copy_hashing(&mut f, Some(tmp.file()))
            .map_err(StoreError::io("copy into store", src))?;
        if hash2 != hash {
            return Err(StoreError::SourceChanged {
                path: src.to_owned(),
                first: blob.digest,
                second: Digest::from_hash(hash2),
            });
        }
        self.install_blob(tmp, &blob)?;
        Ok(blob)
    }

    /// Renames a complete temp file into the CAS, or drops it if the blob is already there.
    ///
    /// One `lstat` decides: another thread or process may install the same blob at any moment,
    /// and a second look that found it where the first did not would take it for a bad entry
    /// and quarantine a blob that a concurrent commit has just referenced.
    fn install_blob(&self, tmp: TempFile, blob: &BlobRef) -> Result<()> {
        let dest = self.blob_path(&blob.digest);
        match fs::symlink_metadata(&dest) {
            Ok(md) if md.is_file() && md.len() == blob.size => {
                return Ok(()); // dedup; `tmp` is deleted on drop
            }
            // Something is there but it can't be this blob (wrong size, symlink, dir).
            Ok(_) => self.quarantine(&dest)?,
            Err(_) => {}
        }
        let shard = dest.parent().expect("blob path has a shard");
        ensure_dir(shard)?;
        tmp.persist(&dest)
    }

    /// Whether the blob is present (by name and type; content is verified when read).
    pub fn has_blob(&self, d: &Digest) -> Result<bool> {
        let path = self.blob_path(d);
        if !Self::shard_exists(path.parent().expect("shard"))? {
            return Ok(false);
        }
        Ok(regular_file_len(&path).is_some())
    }

    /// Streams blob `d` into `out`, verifying its hash at the end. On a mismatch the blob is
    /// quarantined and [`StoreError::Corrupt`] returned; `out` must then be discarded, which is
    /// why callers write to a temp file.
    fn copy_blob_verified(&self, d: &Digest, out: &mut dyn Write) -> Result<u64> {
        let path = self.blob_path(d);
        Self::shard_exists(path.parent().expect("shard"))?;
        let Some((mut f, _)) = open_regular(&path)? else {
            return Err(StoreError::MissingBlob {
                digest: d.clone(),
                path,
            });
        };
        let (hash, size) =
            copy_hashing(&mut f, Some(out)).map_err(StoreError::io("read blob", &path))?;
        drop(f);
        let actual = Digest::from_hash(hash);
        if &actual != d {
            self.quarantine(&path)?;
            return Err(StoreError::Corrupt {
                path,
                expected: d.clone(),
                actual: actual.to_string(),
            });
        }
        Ok(size)
    }

    /// Reads a whole blob into memory, verified. For small blobs (logs, JSON); use
    /// [`get_blob_to`](Self::get_blob_to) for anything big.
    pub fn read_blob(&self, d: &Digest) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.copy_blob_verified(d, &mut buf)?;
        Ok(buf)
    }

    /// Copies blob `d` to `dest` atomically (temp file beside `dest`, verified, renamed).
    pub fn get_blob_to(&self, d: &Digest, dest: &Path) -> Result<()> {
        self.get_blob_sized(d, None, dest)
    }

    pub(crate) fn get_blob_sized(&self, d: &Digest, size: Option<u64>, dest: &Path) -> Result<()> {
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut tmp = TempFile::new_in(&parent, &format!(".{name}.aorta-"))?;
        let got = self.copy_blob_verified(d, tmp.file())?;
        if let Some(want) = size.filter(|&w| w != got) {
            return Err(StoreError::InvalidManifest {
                key: String::new(),
                source: ManifestError::BlobSize {
                    digest: d.clone(),
                    got,
                    want,
                },
            });
        }
        tmp.persist(dest)
    }

    // ---------------------------------------------------------------- AC

    /// Looks up `key`. A corrupt or dangling entry is a `Lookup::Corrupt` (re-run the trial); it
    /// is quarantined if nobody is executing that key right now. A hit refreshes the entry's
    /// mtime, which is what gc's LRU eviction goes by.
    pub fn lookup(&self, key: &Key) -> Result<Lookup> {
        self.lookup_as(key)
    }

    /// [`lookup`](Self::lookup) with the trial record read straight into `T`.
    pub fn lookup_as<T: serde::de::DeserializeOwned>(&self, key: &Key) -> Result<Lookup<T>> {
        match self.read_entry::<T>(key)? {
            Err(reason) => {
                // Only remove it while holding the key: otherwise we might race a process that
                // is about to commit a fresh entry. If someone holds it, they'll overwrite it.
                if let Ok(Some(claim)) = self.try_claim(key) {
                    return claim.lookup_as();
                }
                Ok(Lookup::Corrupt {
                    reason: reason.to_string(),
                })
            }
            Ok(found) => Ok(found),
        }
    }

    /// Lookup with the key's claim already held: quarantines a bad entry immediately.
    pub(crate) fn lookup_claimed<T: serde::de::DeserializeOwned>(
        &self,
        key: &Key,
    ) -> Result<Lookup<T>> {
        match self.read_entry::<T>(key)? {
            Err(reason) => {
                self.quarantine(&self.ac_path(key))?;
                Ok(Lookup::Corrupt {
                    reason: reason.to_string(),
                })
            }
            Ok(found) => Ok(found),
        }
    }

    /// `Ok(Ok(Hit|Miss))`, `Ok(Err(reason))` for a bad entry, `Err` for real I/O trouble.
    fn read_entry<T: serde::de::DeserializeOwned>(
        &self,
        key: &Key,
    ) -> Result<Result<Lookup<T>, EntryError>> {
        let path = self.ac_path(key);
        if !self.shard_known(path.parent().expect("shard"))? {
            return Ok(Ok(Lookup::Miss));
        }
        let (mut f, md) = match crate::fsio::open_regular_md(&path) {
            Ok(Some(x)) => x,
            Ok(None) => return Ok(Ok(Lookup::Miss)),
            Err(StoreError::UnsafeEntry { reason, .. }) => {
                return Ok(Err(EntryError::Unsafe(reason)))
            }
            Err(e) => return Err(e),
        };
        let len = md.len();
        if len > MAX_AC_ENTRY_BYTES {
            return Ok(Err(EntryError::TooLarge(len)));
        }
        // Exactly `len` bytes (entries are renamed into place whole, never appended to); a
        // short read is a truncated entry, reported as such by the checksum.
        let mut bytes = vec![0u8; len as usize];
        let mut filled = 0;
        while filled < bytes.len() {
            match f.read(&mut bytes[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StoreError::io("read", &path)(e)),
            }
        }
        bytes.truncate(filled);
        let manifest = match decode_entry(&bytes, key) {
            Ok(m) => m,
            Err(reason) => return Ok(Err(reason)),
        };
        if let Err(reason) = self.check_blobs(&manifest) {
            return Ok(Err(reason));
        }
        // LRU touch, at most once an hour per entry: touching on every hit dirtied 10,000 inodes
        // in a cached rerun, which the end-of-build syncfs then had to write. Best effort (a
        // read-only store still serves hits).
        let stale = md.modified().map_or(true, |t| {
            t.elapsed().map_or(true, |age| age > LRU_TOUCH_AFTER)
        });
        if stale {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        Ok(Ok(Lookup::Hit(manifest)))
    }

    /// Every output must exist as a regular file of the recorded size.
    pub(crate) fn check_blobs<T>(&self, m: &Manifest<T>) -> Result<(), EntryError> {
        for (rel, blob) in &m.outputs {
            let path = self.blob_path(&blob.digest);
            let entry = (path, blob.size);
            if self
                .known
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .blobs
                .contains(&entry)
            {
                continue;
            }
            let path = entry.0.clone();
            match regular_file_len(&path) {
                Some(len) if len == blob.size => {
                    self.known
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .blobs
                        .insert(entry);
                }
                Some(len) => {
                    return Err(EntryError::BlobSize {
                        output: rel.clone(),
                        digest: blob.digest.clone(),
                        len,
                        size: blob.size,
                    })
                }
                None => {
                    return Err(EntryError::BlobMissing {
                        output: rel.clone(),
                        digest: blob.digest.clone(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Validates `m`, checks its blobs are present, and writes the entry atomically. The caller
    /// holds the shared store lock (a [`Claim`](crate::Claim) or [`BuildLock`](crate::BuildLock)),
    /// so gc cannot delete those blobs between the check and the rename; blobs in `put` the
    /// caller stored under that same lock, so they are not looked at again.
    pub(crate) fn write_manifest_locked<T: serde::Serialize>(
        &self,
        m: &Manifest<T>,
        put: &[BlobRef],
    ) -> Result<()> {
        let invalid = |source| StoreError::InvalidManifest {
            key: m.key.to_string(),
            source,
        };
        m.validate().map_err(invalid)?;
        for blob in m.outputs.values() {
            if put.contains(blob) {
                continue;
            }
            if regular_file_len(&self.blob_path(&blob.digest)) != Some(blob.size) {
                return Err(StoreError::MissingBlob {
                    digest: blob.digest.clone(),
                    path: self.blob_path(&blob.digest),
                });
            }
        }
        let bytes = encode_entry(m).map_err(|e| invalid(ManifestError::Encode(e)))?;
        let dest = self.ac_path(&m.key);
        ensure_dir(dest.parent().expect("shard"))?;
        let mut tmp = TempFile::new_in(&self.tmp_dir(), "ac-")?;
        tmp.file()
            .write_all(&bytes)
            .map_err(StoreError::io("write", tmp.path().to_owned()))?;
        tmp.persist(&dest)
    }

    /// Writes an AC entry (taking the shared store lock for the duration).
    pub fn put_manifest<T: serde::Serialize>(&self, m: &Manifest<T>) -> Result<()> {
        let _build = self.build_lock()?;
        self.write_manifest_locked(m, &[])
    }

    /// Removes the AC entry for `key` (forcing a re-run). Returns whether there was one.
    pub fn invalidate(&self, key: &Key) -> Result<bool> {
        self.forget_known();
        let path = self.ac_path(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::io("remove", &path)(e)),
        }
    }
}

impl CacheTier for LocalStore {
    fn get_manifest(&self, key: &Key) -> Result<Lookup> {
        self.lookup(key)
    }

    fn put_manifest(&self, key: &Key, m: &Manifest) -> Result<()> {
        if &m.key != key {
            return Err(StoreError::InvalidManifest {
                key: key.to_string(),
                source: ManifestError::OtherKey(m.key.clone()),
            });
        }
        LocalStore::put_manifest(self, m)
    }

    fn has_blob(&self, d: &Digest) -> Result<bool> {
        LocalStore::has_blob(self, d)
    }

    fn get_blob_to(&self, d: &Digest, dest: &Path) -> Result<()> {
        LocalStore::get_blob_to(self, d, dest)
    }

    fn put_blob_from(&self, src: &Path) -> Result<BlobRef> {
        self.put_blob_file(src)
    }
}
