//! Low-level file plumbing: crash-safe temp-then-rename writes, streaming hash-while-copy, and
//! opens that refuse symlinks.
//!
//! The atomic-write protocol: create a uniquely named temp file on the same filesystem as the
//! destination, write it, `fsync` it, `rename` it over the destination. A crash before the
//! rename leaves only a stray temp file (gc cleans those); after it, the complete new file.
//! Readers never see a torn entry because the final name only ever points at a fully written,
//! synced inode.
//!
//! Directory entries (the renames, new shard directories) are made durable in one go by
//! [`sync_filesystem`] at the end of a build rather than by an `fsync` of the directory after
//! every entry: that costs a third of a short trial. A power loss mid-build can then lose some
//! of that build's renames (those trials simply run again) or keep an entry whose blob's
//! rename was lost, which every lookup detects as a dangling reference and re-executes.

use crate::error::{Result, StoreError};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Buffer size for streaming copies: large enough to amortise syscalls, small enough that
/// zeroing it is nothing next to a short trial's few hundred bytes of output.
const CHUNK: usize = 64 * 1024;

pub(crate) use aorta_fsutil::unique_name;

/// A file being written under a temporary name ([`aorta_fsutil::TempFile`], which the store and
/// the run directories share; the `file://` remote's uploads and downloads use the `tempfile`
/// crate for the same temp-then-rename), with the store's errors; deleted on drop unless
/// [`persist`](Self::persist)ed.
pub(crate) struct TempFile(aorta_fsutil::TempFile);

impl TempFile {
    /// Creates `dir/<prefix><unique>.tmp` exclusively (never clobbers anything).
    pub(crate) fn new_in(dir: &Path, prefix: &str) -> Result<Self> {
        aorta_fsutil::TempFile::new_in(dir, prefix)
            .map(TempFile)
            .map_err(StoreError::io("create a temp file in", dir))
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }

    pub(crate) fn file(&mut self) -> &mut File {
        self.0.file()
    }

    /// fsync, rename over `dest` (the directory entry becomes durable at [`sync_filesystem`]).
    pub(crate) fn persist(self, dest: &Path) -> Result<()> {
        self.0
            .persist(dest)
            .map_err(StoreError::io("fsync and rename a temp file to", dest))
    }
}

/// Makes everything written to the filesystem holding `path` durable (`syncfs`), directory
/// entries included: one call per build instead of an `fsync` per directory per entry.
/// Elsewhere than Linux, an `fsync` of `path` itself.
pub fn sync_filesystem(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: syncfs takes a valid open descriptor and nothing else.
        if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    f.sync_all()
}

/// Creates `dir` (one level) if missing, refusing a symlink or non-directory in its place. The
/// new entry becomes durable at [`sync_filesystem`].
pub(crate) fn ensure_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(md) if md.is_dir() => Ok(()),
        Ok(md) => Err(StoreError::UnsafeEntry {
            path: dir.to_owned(),
            reason: if md.file_type().is_symlink() {
                "a symlink where the store expects a directory".into()
            } else {
                "a file where the store expects a directory".into()
            },
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match fs::create_dir(dir) {
                Ok(()) => {}
                // Another process won the race; fine as long as it made a directory.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return ensure_dir(dir),
                Err(e) => return Err(StoreError::io("create directory", dir)(e)),
            }
            Ok(())
        }
        Err(e) => Err(StoreError::io("stat", dir)(e)),
    }
}

/// Opens an existing store file for reading without following a symlink at the final component,
/// and insists on a regular file. `Ok(None)` means "not there". The open never blocks
/// (`O_NONBLOCK`: a FIFO planted in the store would otherwise wait forever for a writer, with
/// the store lock held); the `fstat` of the opened file then refuses a FIFO or device unread.
/// `O_NONBLOCK` means nothing to a regular file's reads.
pub(crate) fn open_regular(path: &Path) -> Result<Option<(File, u64)>> {
    Ok(open_regular_md(path)?.map(|(f, md)| (f, md.len())))
}

/// [`open_regular`] with the file's metadata (one `fstat` for both the check and the caller).
pub(crate) fn open_regular_md(path: &Path) -> Result<Option<(File, fs::Metadata)>> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    if let Ok(md) = fs::symlink_metadata(path) {
        if md.file_type().is_symlink() {
            return Err(symlink_error(path));
        }
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            // O_NOFOLLOW on a symlink fails with ELOOP; report it as what it is.
            if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(symlink_error(path));
            }
            return Err(StoreError::io("open", path)(e));
        }
    };
    let md = file.metadata().map_err(StoreError::io("stat", path))?;
    if !md.is_file() {
        return Err(StoreError::UnsafeEntry {
            path: path.to_owned(),
            reason: format!(
                "{}, not a regular file: refused unread",
                aorta_fsutil::describe(&md.file_type())
            ),
        });
    }
    Ok(Some((file, md)))
}

fn symlink_error(path: &Path) -> StoreError {
    StoreError::UnsafeEntry {
        path: path.to_owned(),
        reason: "a symlink inside the store (never followed)".into(),
    }
}

/// Is `path` a regular file (not a symlink)? Returns its size.
pub(crate) fn regular_file_len(path: &Path) -> Option<u64> {
    fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
}

/// Copies `reader` to `writer` (if any) in chunks, hashing as it goes. Returns hash and length.
pub(crate) fn copy_hashing(
    reader: &mut dyn Read,
    mut writer: Option<&mut dyn Write>,
) -> io::Result<(blake3::Hash, u64)> {
    let mut hasher = blake3::Hasher::new();
    let mut bufs = aorta_fsutil::ReadBuf::new(CHUNK);
    let mut total = 0u64;
    loop {
        let buf = bufs.next(total);
        let n = match reader.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        if let Some(w) = writer.as_deref_mut() {
            w.write_all(&buf[..n])?;
        }
        total += n as u64;
    }
    Ok((hasher.finalize(), total))
}

/// Modification time, or the epoch when unavailable (so such files sort as "oldest").
pub(crate) fn mtime(md: &fs::Metadata) -> SystemTime {
    md.modified().unwrap_or(UNIX_EPOCH)
}
