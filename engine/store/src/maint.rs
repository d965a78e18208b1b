//! Maintenance: `stats`, `verify` and `gc`.
//!
//! These walk the whole store, so they tolerate anything on disk: wrongly named files, symlinks
//! and directories where files belong are reported as *strays*, never followed or trusted.
//! `verify --repair` and `gc` take the exclusive store lock, so they never run while a build holds
//! its shared lock (i.e. between uploading blobs and committing the manifest that references
//! them). Shard directories are never removed, even when empty: an unlocked blob upload may be
//! about to rename into one.

use crate::digest::{validate_hex, Digest, Key};
use crate::error::{Result, StoreError};
use crate::fsio::{copy_hashing, mtime, open_regular};
use crate::local::LocalStore;
use crate::manifest::{decode_entry, EntryError, Manifest};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Sizes and counts, from a directory walk (no hashing, no lock).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    pub blobs: u64,
    pub blob_bytes: u64,
    pub ac_entries: u64,
    pub ac_bytes: u64,
    /// Temp files: in-flight writes, or leftovers of crashed ones (gc removes old ones).
    pub tmp_files: u64,
    pub quarantined: u64,
    /// Files in `cas/`/`ac/` that are not validly named regular files.
    pub strays: u64,
}

/// One thing `verify` found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub blobs_checked: u64,
    pub entries_checked: u64,
    /// Blobs whose content no longer hashes to their name.
    pub corrupt_blobs: Vec<Problem>,
    /// AC entries that are unparseable, fail their checksum, or reference missing/corrupt blobs.
    pub bad_entries: Vec<Problem>,
    pub strays: Vec<Problem>,
    /// Whether the problems above were moved to `quarantine/`.
    pub repaired: bool,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.corrupt_blobs.is_empty() && self.bad_entries.is_empty() && self.strays.is_empty()
    }
}

/// What gc may remove besides unreferenced blobs.
#[derive(Debug, Clone)]
pub struct GcPolicy {
    /// Drop AC entries not hit (or written) for this long.
    pub max_age: Option<Duration>,
    /// Evict least-recently-hit AC entries until AC entries + referenced blobs fit.
    pub max_bytes: Option<u64>,
    /// Temp files untouched this long belong to crashed writers.
    pub tmp_max_age: Duration,
    pub quarantine_max_age: Duration,
    /// Wait for running builds to release the store instead of failing with `Busy`.
    pub wait: bool,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy {
            max_age: None,
            max_bytes: None,
            tmp_max_age: Duration::from_secs(3600),
            quarantine_max_age: Duration::from_secs(7 * 24 * 3600),
            wait: false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    pub entries_expired: u64,
    pub entries_evicted: u64,
    /// Unreadable or dangling entries (quarantined).
    pub entries_corrupt: u64,
    pub entries_kept: u64,
    pub blobs_removed: u64,
    /// Bytes of removed blobs that no run directory links to: the disk space given back.
    pub bytes_freed: u64,
    /// Bytes of removed blobs still linked from run directories (`LocalStore::link_out`): out
    /// of the store, but on disk until those directories go.
    pub bytes_still_linked: u64,
    pub blobs_kept: u64,
    pub bytes_kept: u64,
    pub tmp_removed: u64,
    pub quarantine_removed: u64,
}

struct Item<T> {
    id: T,
    path: PathBuf,
    size: u64,
    mtime: SystemTime,
    /// Other names of the file: a blob's hard links in run directories.
    other_links: bool,
}

#[derive(Default)]
struct Scan {
    blobs: Vec<Item<Digest>>,
    entries: Vec<Item<Key>>,
    strays: Vec<Problem>,
}

fn stray(path: PathBuf, reason: &str) -> Problem {
    Problem {
        path,
        reason: reason.to_owned(),
    }
}

/// Walks `top/<2 hex>/<64 hex><suffix>`; everything else becomes a stray.
fn walk(
    top: &Path,
    suffix: &str,
    strays: &mut Vec<Problem>,
) -> Result<Vec<(String, PathBuf, fs::Metadata)>> {
    let mut out = Vec::new();
    for shard in read_dir(top)? {
        let (shard_name, shard_path, ft) = shard;
        if !ft.is_dir() {
            strays.push(stray(shard_path, "not a shard directory (symlink or file)"));
            continue;
        }
        if shard_name.len() != 2
            || !shard_name
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            strays.push(stray(shard_path, "unexpected directory name"));
            continue;
        }
        for (name, path, ft) in read_dir(&shard_path)? {
            let hex = name.strip_suffix(suffix).unwrap_or("");
            if validate_hex(hex, "name").is_err() || !hex.starts_with(&shard_name) {
                strays.push(stray(path, "unexpected file name"));
                continue;
            }
            if !ft.is_file() {
                strays.push(stray(
                    path,
                    "not a regular file (symlinks are never followed)",
                ));
                continue;
            }
            match fs::symlink_metadata(&path) {
                Ok(md) => out.push((hex.to_owned(), path, md)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {} // removed concurrently
                Err(e) => return Err(StoreError::io("stat", &path)(e)),
            }
        }
    }
    Ok(out)
}

/// `(name, path, file type without following symlinks)`; names that aren't UTF-8 become "".
fn read_dir(dir: &Path) -> Result<Vec<(String, PathBuf, fs::FileType)>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("list", dir)(e)),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(StoreError::io("list", dir))?;
        let ft = match ent.file_type() {
            Ok(ft) => ft,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io("stat", ent.path())(e)),
        };
        out.push((
            ent.file_name().to_str().unwrap_or("").to_owned(),
            ent.path(),
            ft,
        ));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

fn other_links(md: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        md.nlink() > 1
    }
    #[cfg(not(unix))]
    {
        let _ = md;
        false
    }
}

fn age(now: SystemTime, t: SystemTime) -> Duration {
    now.duration_since(t).unwrap_or(Duration::ZERO)
}

impl LocalStore {
    fn scan(&self) -> Result<Scan> {
        let mut scan = Scan::default();
        for (hex, path, md) in walk(&self.cas_dir(), "", &mut scan.strays)? {
            scan.blobs.push(Item {
                id: Digest::parse(&hex)?,
                path,
                size: md.len(),
                mtime: mtime(&md),
                other_links: other_links(&md),
            });
        }
        for (hex, path, md) in walk(&self.ac_dir(), ".json", &mut scan.strays)? {
            scan.entries.push(Item {
                id: Key::parse(&hex)?,
                path,
                size: md.len(),
                mtime: mtime(&md),
                other_links: other_links(&md),
            });
        }
        Ok(scan)
    }

    /// Reads and decodes one AC entry found by a scan, including the blob check.
    fn check_entry(&self, item: &Item<Key>) -> Result<Option<Result<Manifest, EntryError>>> {
        let Some((mut f, _)) = open_regular(&item.path)? else {
            return Ok(None); // removed concurrently
        };
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)
            .map_err(StoreError::io("read", &item.path))?;
        Ok(Some(decode_entry(&bytes, &item.id).and_then(|m| {
            self.check_blobs(&m)?;
            Ok(m)
        })))
    }

    fn exclusive_or_busy(
        &self,
        wait: bool,
        what: &'static str,
    ) -> Result<crate::lock::ExclusiveLock> {
        self.exclusive_lock(wait)?.ok_or_else(|| StoreError::Busy {
            root: self.root().to_owned(),
            what,
        })
    }

    /// Counts and sizes; a quick walk without hashing or locking.
    pub fn stats(&self) -> Result<StoreStats> {
        let scan = self.scan()?;
        Ok(StoreStats {
            blobs: scan.blobs.len() as u64,
            blob_bytes: scan.blobs.iter().map(|b| b.size).sum(),
            ac_entries: scan.entries.len() as u64,
            ac_bytes: scan.entries.iter().map(|e| e.size).sum(),
            tmp_files: read_dir(&self.tmp_dir())?.len() as u64,
            quarantined: read_dir(&self.quarantine_dir())?.len() as u64,
            strays: scan.strays.len() as u64,
        })
    }

    /// Re-hashes every blob and checks every AC entry (checksum, key, referenced blobs). With
    /// `repair`, takes the exclusive store lock (failing with `Busy` while builds run) and moves
    /// every problem into `quarantine/`.
    pub fn verify(&self, repair: bool) -> Result<VerifyReport> {
        self.forget_known();
        let _lock = if repair {
            Some(self.exclusive_or_busy(
                false,
                "builds are running; repair needs the store to itself",
            )?)
        } else {
            None
        };
        let scan = self.scan()?;
        let mut report = VerifyReport {
            strays: scan.strays,
            ..VerifyReport::default()
        };
        let mut corrupt = BTreeSet::new();
        for blob in &scan.blobs {
            let Some((mut f, _)) = open_regular(&blob.path)? else {
                continue;
            };
            let (hash, _) =
                copy_hashing(&mut f, None).map_err(StoreError::io("read blob", &blob.path))?;
            report.blobs_checked += 1;
            let actual = Digest::from_hash(hash);
            if actual != blob.id {
                corrupt.insert(blob.id.clone());
                report.corrupt_blobs.push(Problem {
                    path: blob.path.clone(),
                    reason: format!("content hashes to {actual}"),
                });
            }
        }
        for entry in &scan.entries {
            let Some(result) = self.check_entry(entry)? else {
                continue;
            };
            report.entries_checked += 1;
            let reason = match result {
                Err(reason) => reason.to_string(),
                Ok(m) => match m.outputs.iter().find(|(_, b)| corrupt.contains(&b.digest)) {
                    Some((rel, b)) => format!("output {rel:?}: blob {} is corrupt", b.digest),
                    None => continue,
                },
            };
            report.bad_entries.push(Problem {
                path: entry.path.clone(),
                reason,
            });
        }
        if repair {
            for p in report
                .corrupt_blobs
                .iter()
                .chain(&report.bad_entries)
                .chain(&report.strays)
            {
                self.quarantine(&p.path)?;
            }
            report.repaired = true;
        }
        Ok(report)
    }

    /// Removes temp files of crashed writers, old quarantine, per-key lock files, AC entries the
    /// policy expires or evicts (LRU by mtime, which hits refresh), corrupt/dangling AC entries,
    /// and then every blob no remaining entry references. Runs under the exclusive store lock.
    pub fn gc(&self, policy: &GcPolicy) -> Result<GcReport> {
        self.forget_known();
        let _lock = self.exclusive_or_busy(
            policy.wait,
            "a build holds the store; gc needs it to itself",
        )?;
        let now = SystemTime::now();
        let mut report = GcReport {
            tmp_removed: self.sweep(&self.tmp_dir(), now, policy.tmp_max_age)?,
            quarantine_removed: self.sweep(
                &self.quarantine_dir(),
                now,
                policy.quarantine_max_age,
            )?,
            ..GcReport::default()
        };
        // No claim can exist while we hold the store exclusively (claims hold it shared), so the
        // per-key lock files can go without anyone holding a lock on an unlinked file.
        self.sweep(&self.key_locks_dir(), now, Duration::ZERO)?;

        let scan = self.scan()?;
        let mut live = Vec::new();
        for entry in scan.entries {
            match self.check_entry(&entry)? {
                None => {}
                Some(Err(_)) => {
                    self.quarantine(&entry.path)?;
                    report.entries_corrupt += 1;
                }
                Some(Ok(_))
                    if policy
                        .max_age
                        .is_some_and(|max| age(now, entry.mtime) > max) =>
                {
                    remove(&entry.path)?;
                    report.entries_expired += 1;
                }
                Some(Ok(m)) => {
                    let blobs: BTreeSet<Digest> =
                        m.outputs.into_values().map(|b| b.digest).collect();
                    live.push((entry, blobs));
                }
            }
        }

        let blob_size: BTreeMap<&Digest, u64> =
            scan.blobs.iter().map(|b| (&b.id, b.size)).collect();
        let mut refs: BTreeMap<Digest, u64> = BTreeMap::new();
        for (_, blobs) in &live {
            for d in blobs {
                *refs.entry(d.clone()).or_default() += 1;
            }
        }
        if let Some(budget) = policy.max_bytes {
            let mut total: u64 = live.iter().map(|(e, _)| e.size).sum::<u64>()
                + refs
                    .keys()
                    .map(|d| blob_size.get(d).copied().unwrap_or(0))
                    .sum::<u64>();
            live.sort_by_key(|(e, _)| e.mtime);
            let mut evict = 0;
            while total > budget && evict < live.len() {
                let (entry, blobs) = &live[evict];
                remove(&entry.path)?;
                total -= entry.size;
                for d in blobs {
                    let n = refs.get_mut(d).expect("counted above");
                    *n -= 1;
                    if *n == 0 {
                        refs.remove(d);
                        total -= blob_size.get(d).copied().unwrap_or(0);
                    }
                }
                evict += 1;
            }
            report.entries_evicted = evict as u64;
            live.drain(..evict);
        }
        report.entries_kept = live.len() as u64;

        for blob in &scan.blobs {
            if refs.contains_key(&blob.id) {
                report.blobs_kept += 1;
                report.bytes_kept += blob.size;
            } else {
                remove(&blob.path)?;
                report.blobs_removed += 1;
                if blob.other_links {
                    report.bytes_still_linked += blob.size;
                } else {
                    report.bytes_freed += blob.size;
                }
            }
        }
        Ok(report)
    }

    /// Deletes entries of `dir` not modified for `max_age`; returns how many.
    fn sweep(&self, dir: &Path, now: SystemTime, max_age: Duration) -> Result<u64> {
        let mut n = 0;
        for (_, path, ft) in read_dir(dir)? {
            let Ok(md) = fs::symlink_metadata(&path) else {
                continue;
            };
            if age(now, mtime(&md)) < max_age {
                continue;
            }
            let res = if ft.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            match res {
                Ok(()) => n += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path)(e)),
            }
        }
        Ok(n)
    }
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io("remove", path)(e)),
    }
}
