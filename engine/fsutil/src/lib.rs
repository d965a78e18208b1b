//! Crash-safe file writes, the one implementation shared by the engine crates (the store, the
//! probe cache, run directories) and the workload executables, which is why it depends on
//! nothing but std: a workload must not pull in the store to write its result file.
//!
//! The protocol: create a uniquely named temp file in the destination's directory (so the rename
//! stays on one filesystem), write it, `fsync` its data, `rename` it over the destination.
//! Readers see the old file or the complete new one, never a torn one; a crash before the rename
//! leaves at most a stray hidden temp file, and an error removes it. The rename itself becomes
//! durable when the directory is synced; callers that need that sync the filesystem once at the
//! end (`aorta_store::sync_filesystem`) rather than the directory after every file.
//!
//! Beside them, [`ReadBuf`]: the read buffer of the readers that go through every file a trial
//! leaves (the store's hashing, the classifier's log scan), most of them short.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A read buffer for files that are mostly short: reads go to a 4 KiB buffer held inline (on
/// the stack of the reader's frame) until that much has been read, and only then to a heap
/// buffer of the full size, made once. A heap buffer for every short file cost a memset, and
/// its free made glibc consolidate the heap, on every trial.
pub struct ReadBuf {
    small: [u8; 4096],
    large: Vec<u8>,
    large_len: usize,
}

impl ReadBuf {
    /// Reads of a long file go `large_len` bytes at a time (short ones at most 4 KiB).
    pub fn new(large_len: usize) -> Self {
        ReadBuf {
            small: [0; 4096],
            large: Vec::new(),
            large_len: large_len.max(1),
        }
    }

    /// The buffer for the next read, once `read_so_far` bytes of the file have been read.
    pub fn next(&mut self, read_so_far: u64) -> &mut [u8] {
        if read_so_far < self.small.len() as u64 {
            let n = self.large_len.min(self.small.len());
            return &mut self.small[..n];
        }
        if self.large.is_empty() {
            self.large = vec![0; self.large_len];
        }
        &mut self.large
    }
}

/// A name no other process or thread will pick: `<prefix><pid>-<nanos>-<counter><suffix>`.
pub fn unique_name(prefix: &str, suffix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}-{nanos}-{n}{suffix}", std::process::id())
}

/// Writes `bytes` to `path` atomically: a hidden temp file beside it
/// (`.<name>.<unique>.tmp`), `fsync` of its data, rename over `path`. Creates `path`'s directory
/// if missing. On any error the temp file is removed and `path` is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    // The directory is usually there: made only when the temp file cannot be created without.
    let mut tmp = match TempFile::new_in(dir, &prefix) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir)?;
            TempFile::new_in(dir, &prefix)?
        }
        made => made?,
    };
    tmp.file().write_all(bytes)?;
    tmp.persist(path)
}

/// A file being written under a temporary name; deleted on drop unless
/// [`persist`](Self::persist)ed. For streaming writes; [`write_atomic`] covers bytes in memory.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    file: Option<File>,
}

impl TempFile {
    /// Creates `dir/<prefix><unique>.tmp` exclusively (never clobbers anything).
    pub fn new_in(dir: &Path, prefix: &str) -> io::Result<Self> {
        let path = dir.join(unique_name(prefix, ".tmp"));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(TempFile {
            path,
            file: Some(file),
        })
    }

    /// The temp file's current name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, for writing.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("temp file used after persist")
    }

    /// `fsync`s the data (`fdatasync`: data and size, not timestamps, which is all a new file
    /// needs) and renames the file over `dest`. On an error the temp file is removed.
    pub fn persist(mut self, dest: &Path) -> io::Result<()> {
        let file = self.file.take().expect("temp file persisted twice");
        file.sync_data()?;
        drop(file);
        fs::rename(&self.path, dest)?;
        // The temp name no longer exists; make Drop a no-op.
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.file.take();
        if !self.path.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_read_buffer_is_small_for_the_first_4_kib_and_large_after() {
        let mut b = ReadBuf::new(64 << 10);
        assert_eq!(b.next(0).len(), 4096);
        assert_eq!(b.next(4095).len(), 4096);
        assert!(b.large.is_empty(), "a short file makes no heap buffer");
        assert_eq!(b.next(4096).len(), 64 << 10);
        // A large size smaller than the inline buffer caps both.
        let mut b = ReadBuf::new(100);
        assert_eq!((b.next(0).len(), b.next(5000).len()), (100, 100));
    }

    #[test]
    fn writes_replaces_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("result.json");
        write_atomic(&p, b"one").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(entries(&d.path().join("sub")), ["result.json"]);
    }

    #[test]
    fn a_failed_rename_removes_the_temp_file_and_keeps_the_destination() {
        let d = tempfile::tempdir().unwrap();
        // A non-empty directory cannot be renamed over: the rename fails after the write.
        let p = d.path().join("taken");
        fs::create_dir(&p).unwrap();
        fs::write(p.join("inside"), "x").unwrap();
        assert!(write_atomic(&p, b"data").is_err());
        assert_eq!(entries(d.path()), ["taken"]);
        assert_eq!(entries(&p), ["inside"]);
    }

    #[test]
    fn a_dropped_temp_file_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let mut t = TempFile::new_in(d.path(), "blob-").unwrap();
        t.file().write_all(b"partial").unwrap();
        let name = t.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("blob-") && name.ends_with(".tmp"),
            "{name}"
        );
        assert_eq!(entries(d.path()), [name]);
        drop(t);
        assert!(entries(d.path()).is_empty());
    }

    #[test]
    fn names_are_unique_within_a_process() {
        let a = unique_name("p-", ".tmp");
        let b = unique_name("p-", ".tmp");
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("p-{}-", std::process::id())) && a.ends_with(".tmp"));
    }
}
