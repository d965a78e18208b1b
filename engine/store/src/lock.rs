//! Inter-process locking with OS advisory locks (`flock` on Unix, `LockFileEx` on Windows).
//!
//! Advisory locks rather than "lock file exists" markers because the kernel drops them when the
//! holder dies, even on `kill -9`: a crashed build can never wedge the store. Two levels:
//!
//! * `locks/store.lock`: builds hold it **shared** ([`BuildLock`]; every [`Claim`] holds one,
//!   its own or a share of its build's, and every `put_manifest` takes one), gc and
//!   `verify --repair` hold it **exclusive**. So gc never runs while a build might be between
//!   uploading a blob and committing the manifest that references it, and gc may delete per-key
//!   lock files (no claim can exist while it holds the lock).
//! * a key lock, held **exclusive** by a [`Claim`] while one process executes a trial, so two
//!   concurrent builds never execute the same key; the loser blocks (or polls), then re-checks
//!   the action cache and finds the winner's entry. On Linux it is a one-byte open-file-description
//!   lock (`F_OFD_SETLK`) in the single file `locks/keys.lock`, at an offset taken from the key:
//!   creating a lock file per trial cost more than running a short trial. Elsewhere (or on a
//!   kernel without OFD locks) it is `flock` on `locks/keys/<key>.lock`.
//!
//! Lock order is always store lock, then key lock, so there is no deadlock between the two.

use crate::digest::Key;
use crate::error::{Result, StoreError};
use crate::local::LocalStore;
use crate::manifest::{BlobRef, Manifest};
use crate::Lookup;
use fs4::TryLockError;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Holding this (a shared lock on the store) keeps gc out. A clone shares the one lock, which
/// is released when the last clone is dropped: a build's claims share the build's lock
/// ([`LocalStore::claim_reporting_under`]) instead of each taking it again.
#[derive(Debug, Clone)]
pub struct BuildLock {
    _file: std::sync::Arc<File>,
    root: std::path::PathBuf,
}

/// The exclusive store lock gc and repair run under.
#[derive(Debug)]
pub(crate) struct ExclusiveLock {
    _file: File,
}

/// An exclusive claim on one trial key: while held, no other process (or thread) can claim it.
///
/// Protocol: claim, then [`lookup`](Self::lookup) again (another process may have finished the
/// trial while we waited); on a hit, drop the claim and use it; on a miss, execute, upload the
/// outputs and [`commit`](Self::commit). Dropping without committing (e.g. the trial errored)
/// simply releases the key for the next claimant.
#[derive(Debug)]
pub struct Claim<'s> {
    store: &'s LocalStore,
    key: Key,
    _key_lock: File,
    _build: BuildLock,
    /// Blobs stored through this claim ([`Claim::put_blob_file`]): there since, as the claim
    /// has held the store lock throughout, so neither a second put nor the commit looks again.
    put: Vec<BlobRef>,
}

/// Why [`LocalStore::claim_reporting`] is waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Another process holds the claim for this key, i.e. is running this very trial.
    Trial,
    /// A gc or repair holds the store exclusively.
    StoreMaintenance,
}

impl Waiting {
    /// A message suitable for the console.
    pub fn message(self, key: &Key) -> String {
        match self {
            Waiting::Trial => format!("waiting for another aorta process running trial {key}"),
            Waiting::StoreMaintenance => {
                format!("waiting for store maintenance (gc) to finish before trial {key}")
            }
        }
    }
}

impl<'s> Claim<'s> {
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The claim without its borrow of the store, to carry from one step of a job to the next
    /// (claimed while preparing a trial, committed after running it); the locks stay held.
    pub fn detach(self) -> DetachedClaim {
        DetachedClaim {
            root: self.store.root().to_path_buf(),
            key: self.key,
            key_lock: self._key_lock,
            build: self._build,
            put: self.put,
        }
    }

    /// Looks the key up while holding the claim. A corrupt entry found here is quarantined at
    /// once: we hold the key, so nobody can be committing a fresh entry under our feet.
    pub fn lookup(&self) -> Result<Lookup> {
        self.store.lookup_claimed(&self.key)
    }

    /// [`lookup`](Self::lookup) with the trial record read as `T`.
    pub fn lookup_as<T: serde::de::DeserializeOwned>(&self) -> Result<Lookup<T>> {
        self.store.lookup_claimed(&self.key)
    }

    /// [`LocalStore::put_blob_file`] for an output of this claim's trial.
    pub fn put_blob_file(&mut self, src: &Path) -> Result<BlobRef> {
        let blob = self.store.put_blob_file_unless(src, &self.put)?;
        if !self.put.contains(&blob) {
            self.put.push(blob.clone());
        }
        Ok(blob)
    }

    /// Writes the manifest atomically (verifying its blobs exist) and releases the claim.
    pub fn commit<T: serde::Serialize>(self, manifest: &Manifest<T>) -> Result<()> {
        if manifest.key != self.key {
            return Err(StoreError::InvalidManifest {
                key: manifest.key.to_string(),
                source: crate::ManifestError::OtherClaim(self.key.clone()),
            });
        }
        self.store.write_manifest_locked(manifest, &self.put)
    }
}

/// A [`Claim`] set aside with [`Claim::detach`]: still held, dropped to release it.
#[derive(Debug)]
pub struct DetachedClaim {
    root: std::path::PathBuf,
    key: Key,
    key_lock: File,
    build: BuildLock,
    put: Vec<BlobRef>,
}

impl DetachedClaim {
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The claim again, on a handle of the store it was taken in; `None` (and the claim
    /// released) for another store.
    pub fn attach(self, store: &LocalStore) -> Option<Claim<'_>> {
        (store.root() == self.root).then_some(Claim {
            store,
            key: self.key,
            _key_lock: self.key_lock,
            _build: self.build,
            put: self.put,
        })
    }
}

/// Outcome of a non-blocking attempt.
pub(crate) enum Attempt<T> {
    Got(T),
    KeyHeld,
    StoreBusy,
}

fn open_lock_file(path: &Path) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW);
    }
    opts.open(path)
        .map_err(StoreError::io("open lock file", path))
}

/// Mode of acquisition.
#[derive(Clone, Copy)]
enum Mode {
    Shared,
    Exclusive,
}

/// Locks `file`, blocking or not. `Ok(false)` = would block.
///
/// The traits are called by path (`fs4::FileExt::lock`) because std grew inherent `File::lock`
/// methods of the same names in Rust 1.89, newer than this workspace's MSRV.
fn lock(file: &File, path: &Path, mode: Mode, block: bool) -> Result<bool> {
    loop {
        let res = match (mode, block) {
            (Mode::Shared, true) => fs4::FileExt::lock_shared(file).map(|()| true),
            (Mode::Exclusive, true) => fs4::FileExt::lock(file).map(|()| true),
            (Mode::Shared, false) => try_result(fs4::FileExt::try_lock_shared(file)),
            (Mode::Exclusive, false) => try_result(fs4::FileExt::try_lock(file)),
        };
        match res {
            Ok(got) => return Ok(got),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StoreError::io("lock", path)(e)),
        }
    }
}

fn try_result(r: std::result::Result<(), TryLockError>) -> io::Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// The byte of `locks/keys.lock` that stands for `key`: 62 bits of the key, so two keys share
/// a byte (and merely wait for each other) with probability 2^-62.
#[cfg(target_os = "linux")]
fn key_offset(key: &Key) -> i64 {
    let hex = key.to_string();
    (u64::from_str_radix(&hex[..16], 16).unwrap_or(0) >> 2) as i64
}

/// Write-locks one byte with an open-file-description lock: owned by this open file (so two
/// claims in one process exclude each other, unlike POSIX record locks), released when it is
/// closed or the process dies. `Ok(false)`: held elsewhere and `block` is false.
#[cfg(target_os = "linux")]
fn ofd_lock_byte(file: &File, offset: i64, block: bool) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero flock is valid; the fields that matter are set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset as libc::off_t;
    fl.l_len = 1;
    let cmd = if block {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: valid descriptor and a pointer to a live flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN | libc::EACCES) if !block => return Ok(false),
            _ => return Err(e),
        }
    }
}

impl LocalStore {
    fn store_lock(&self, mode: Mode, block: bool) -> Result<Option<File>> {
        let path = self.store_lock_path();
        let file = open_lock_file(&path)?;
        Ok(lock(&file, &path, mode, block)?.then_some(file))
    }

    /// Takes the shared build lock, waiting while a gc runs.
    pub fn build_lock(&self) -> Result<BuildLock> {
        let file = self.store_lock(Mode::Shared, true)?.expect("blocking lock");
        Ok(self.build_lock_of(file))
    }

    fn build_lock_of(&self, file: File) -> BuildLock {
        BuildLock {
            _file: std::sync::Arc::new(file),
            root: self.root().to_path_buf(),
        }
    }

    /// Takes the shared build lock if no gc is running.
    pub fn try_build_lock(&self) -> Result<Option<BuildLock>> {
        Ok(self
            .store_lock(Mode::Shared, false)?
            .map(|file| self.build_lock_of(file)))
    }

    pub(crate) fn exclusive_lock(&self, block: bool) -> Result<Option<ExclusiveLock>> {
        Ok(self
            .store_lock(Mode::Exclusive, block)?
            .map(|file| ExclusiveLock { _file: file }))
    }

    /// Takes the shared store lock (or shares `held`, a build lock of this store), then the
    /// key's.
    pub(crate) fn attempt_claim(
        &self,
        key: &Key,
        block: bool,
        held: Option<&BuildLock>,
    ) -> Result<Attempt<Claim<'_>>> {
        let build = match held.filter(|b| b.root == self.root()) {
            Some(b) => b.clone(),
            None => match self.store_lock(Mode::Shared, block)? {
                Some(file) => self.build_lock_of(file),
                None => return Ok(Attempt::StoreBusy),
            },
        };
        let Some(file) = self.lock_key(key, block)? else {
            return Ok(Attempt::KeyHeld);
        };
        Ok(Attempt::Got(Claim {
            store: self,
            key: key.clone(),
            _key_lock: file,
            _build: build,
            put: Vec::new(),
        }))
    }

    /// Locks `key` exclusively; `None` when it is held and `block` is false.
    fn lock_key(&self, key: &Key, block: bool) -> Result<Option<File>> {
        #[cfg(target_os = "linux")]
        {
            let path = self.root().join("locks").join("keys.lock");
            let file = open_lock_file(&path)?;
            match ofd_lock_byte(&file, key_offset(key), block) {
                Ok(got) => return Ok(got.then_some(file)),
                // EINVAL: a kernel without OFD locks (before 3.15): per-key files below.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(StoreError::io("lock", &path)(e)),
            }
        }
        let path = self.key_lock_path(key);
        let file = open_lock_file(&path)?;
        Ok(lock(&file, &path, Mode::Exclusive, block)?.then_some(file))
    }

    /// Claims `key`, blocking while another process holds it (or a gc runs).
    pub fn claim(&self, key: &Key) -> Result<Claim<'_>> {
        match self.attempt_claim(key, true, None)? {
            Attempt::Got(c) => Ok(c),
            Attempt::KeyHeld | Attempt::StoreBusy => unreachable!("blocking lock returned early"),
        }
    }

    /// Claims `key` if it is free: `Ok(None)` when another process holds it, a
    /// [`StoreError::Busy`] when a gc holds the whole store.
    pub fn try_claim(&self, key: &Key) -> Result<Option<Claim<'_>>> {
        match self.attempt_claim(key, false, None)? {
            Attempt::Got(c) => Ok(Some(c)),
            Attempt::KeyHeld => Ok(None),
            Attempt::StoreBusy => Err(StoreError::Busy {
                root: self.root().to_owned(),
                what: "a gc or repair is running",
            }),
        }
    }

    /// Claims `key`, polling; calls `on_wait` when it first has to wait and then every
    /// `report_every`, so the console can say "waiting for another aorta process running trial
    /// `<key>`" (see [`Waiting::message`]) instead of hanging silently.
    pub fn claim_reporting(
        &self,
        key: &Key,
        report_every: std::time::Duration,
        on_wait: impl FnMut(Waiting, std::time::Duration),
    ) -> Result<Claim<'_>> {
        self.claim_polling(None, key, report_every, on_wait)
    }

    /// [`Self::claim_reporting`] for a caller that holds `build`, a build lock of this store:
    /// the claim shares it instead of taking the store lock again (an `open`, a `flock` and a
    /// `close` a trial). A lock of another store is not shared: the claim then takes its own.
    pub fn claim_reporting_under(
        &self,
        build: &BuildLock,
        key: &Key,
        report_every: std::time::Duration,
        on_wait: impl FnMut(Waiting, std::time::Duration),
    ) -> Result<Claim<'_>> {
        self.claim_polling(Some(build), key, report_every, on_wait)
    }

    fn claim_polling(
        &self,
        held: Option<&BuildLock>,
        key: &Key,
        report_every: std::time::Duration,
        mut on_wait: impl FnMut(Waiting, std::time::Duration),
    ) -> Result<Claim<'_>> {
        let start = std::time::Instant::now();
        let mut last_report: Option<std::time::Instant> = None;
        loop {
            let why = match self.attempt_claim(key, false, held)? {
                Attempt::Got(c) => return Ok(c),
                Attempt::KeyHeld => Waiting::Trial,
                Attempt::StoreBusy => Waiting::StoreMaintenance,
            };
            if last_report.is_none_or(|t| t.elapsed() >= report_every) {
                on_wait(why, start.elapsed());
                last_report = Some(std::time::Instant::now());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
