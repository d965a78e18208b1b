//! Crash-safe file writes, the one implementation shared by the engine crates (the store, the
//! probe cache, run directories) and the workload executables, which is why it depends on
//! nothing but std and libc: a workload must not pull in the store to write its result file.
//!
//! The protocol: create a uniquely named temp file in the destination's directory (so the rename
//! stays on one filesystem), write it, `fsync` its data, `rename` it over the destination.
//! Readers see the old file or the complete new one, never a torn one; a crash before the rename
//! leaves at most a stray hidden temp file, and an error removes it. The rename itself becomes
//! durable when the directory is synced; callers that need that sync the filesystem once at the
//! end (`aorta_store::sync_filesystem`) rather than the directory after every file.
//!
//! A path the *user* names (`env probe -o`, `bundle -o`) may be a device, a FIFO or a symlink:
//! [`UserFile`] and [`write_user_file`] write through those instead of renaming over them, and
//! keep the temp-and-rename for a regular file or a new one (see [`UserFile`] for the rules).
//! [`open_regular`] and [`open_append_regular`] open files that must be regular (the store's,
//! a `file://` remote's, the agent's log) without ever blocking on a FIFO.
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
    let mut tmp = temp_beside(path)?;
    tmp.file().write_all(bytes)?;
    tmp.persist(path)
}

/// A temp file in `path`'s directory (created if missing), named after `path`.
fn temp_beside(path: &Path) -> io::Result<TempFile> {
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
    match TempFile::new_in(dir, &prefix) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir)?;
            TempFile::new_in(dir, &prefix)
        }
        made => made,
    }
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

// ------------------------------------------------------------------- user-named outputs

/// What a file type is, in the words errors and warnings use ("a FIFO").
pub fn describe(ft: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symlink"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// An error about the kind of thing a path is (not about the machine): `kind` is
/// [`io::ErrorKind::InvalidInput`], and [`user_path_error`] blames the path.
fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// Follows `path` while its last component is a symlink (as `open` would, at most 40 links)
/// and returns what it names; a dangling link gives its missing target. Relative targets are
/// taken from the link's directory.
pub fn follow_symlinks(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => return Ok(p),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// Clears `O_NONBLOCK` on `f`, so writes to a FIFO or a device block as usual once it is open.
fn clear_nonblock(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl with F_GETFL/F_SETFL on a descriptor this `File` owns; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A file the user named (`aorta env probe -o PATH`, `aorta bundle -o PATH`), being written.
/// The rule, the house rule for every user-named path:
///
/// - missing, or a regular file: written atomically, as [`write_atomic`] (temp file beside
///   it, fsync, rename); a missing directory above it is created;
/// - a symlink: followed (every link of a chain, as a shell's `>` does) and its target written
///   by these same rules, so the link stays a link and a dangling one gets its target created
///   (a device or FIFO is opened through the link, so `/dev/stdout` reaches a pipe);
/// - a character or block device, or a FIFO: opened for writing *without* `O_CREAT` or
///   `O_TRUNC` and written through; never renamed over, never synced. The open does not wait:
///   a FIFO with no reader is an error at once ("no reader"), never a hang; once open, writes
///   block as any writer's do while the reader is slow;
/// - a directory or a socket: an error naming it ([`user_path_error`]: the path's fault).
#[derive(Debug)]
pub struct UserFile {
    dest: PathBuf,
    how: How,
}

#[derive(Debug)]
enum How {
    Atomic(TempFile),
    Through(File),
}

impl UserFile {
    /// Opens `path` for writing by the rules above. Nothing at `path` changes until
    /// [`finish`](Self::finish) for a regular file; a device or FIFO is written as bytes come.
    pub fn create(path: &Path) -> io::Result<UserFile> {
        // What the path leads to, as the kernel follows it: a device or FIFO is opened by the
        // name given, so `/dev/stdout` (a link to `/proc/self/fd/1`, whose target may be a
        // pipe with no path) works.
        let md = match fs::metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
            Ok(md) => Some(md),
        };
        match md {
            Some(md) if md.is_dir() => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory; name a file",
            )),
            Some(md) if !md.is_file() => Ok(UserFile {
                dest: path.to_path_buf(),
                how: How::Through(open_through(path, &md.file_type())?),
            }),
            // A regular file or nothing: replaced or created where the links lead.
            _ => {
                let dest = follow_symlinks(path)?;
                let how = How::Atomic(temp_beside(&dest)?);
                Ok(UserFile { dest, how })
            }
        }
    }

    /// What is written: the symlink's target when the user named a symlink.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Whether this writes through a device or FIFO (no temp file, no rename).
    pub fn is_through(&self) -> bool {
        matches!(self.how, How::Through(_))
    }

    /// The open file, for writing.
    pub fn file(&mut self) -> &mut File {
        match &mut self.how {
            How::Atomic(t) => t.file(),
            How::Through(f) => f,
        }
    }

    /// Renames a regular file's temp file into place; closes a device or FIFO.
    pub fn finish(self) -> io::Result<()> {
        match self.how {
            How::Atomic(t) => t.persist(&self.dest),
            How::Through(f) => {
                drop(f);
                Ok(())
            }
        }
    }
}

/// Opens a device or FIFO for writing through, without waiting for a FIFO's reader.
fn open_through(path: &Path, ft: &fs::FileType) -> io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    if ft.is_socket() {
        return Err(refused(
            "is a socket; name a file, a device or a FIFO".into(),
        ));
    }
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) if ft.is_fifo() => refused(
                "is a FIFO with no reader (aorta does not wait for one: start the reader first)"
                    .into(),
            ),
            _ => e,
        })?;
    clear_nonblock(&f)?;
    Ok(f)
}

/// Writes `bytes` to the user-named `path` by [`UserFile`]'s rules: atomically for a regular
/// or new file, through a device, FIFO or symlink, never renaming over one.
pub fn write_user_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = UserFile::create(path)?;
    f.file().write_all(bytes)?;
    f.finish()
}

/// Whether an error from writing a user-named path is the path's fault, to be fixed by naming
/// another (the CLI's bad-input exit, 2): permission denied, a read-only filesystem, a
/// directory, a missing parent, a FIFO with no reader, a symlink where none may be. A full
/// disk, a quota or an I/O error is the machine's (exit 3).
pub fn user_path_error(e: &io::Error) -> bool {
    match e.raw_os_error() {
        Some(code) => matches!(
            code,
            libc::EACCES
                | libc::EPERM
                | libc::EROFS
                | libc::EISDIR
                | libc::ENOTDIR
                | libc::ENOENT
                | libc::ENXIO
                | libc::ELOOP
                | libc::ENAMETOOLONG
                | libc::EEXIST
                | libc::ENOTEMPTY
                | libc::ETXTBSY
        ),
        None => matches!(
            e.kind(),
            io::ErrorKind::InvalidInput
                | io::ErrorKind::AlreadyExists
                | io::ErrorKind::IsADirectory
                | io::ErrorKind::NotADirectory
                | io::ErrorKind::PermissionDenied
                | io::ErrorKind::NotFound
        ),
    }
}

/// Opens `path` for reading only if it is a regular file (symlinks followed), never blocking:
/// `O_NONBLOCK` keeps the open of a FIFO from waiting for a writer, and the opened file is
/// checked with `fstat`. Anything else is an [`io::ErrorKind::InvalidInput`] error saying what
/// it is ("a FIFO, not a regular file"). `O_NONBLOCK` stays set: it means nothing to a
/// regular file's reads.
pub fn open_regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        return Err(refused(format!("{}, not a regular file", describe(&ft))));
    }
    Ok(f)
}

/// Opens (creating with `mode`) `path` for appending, only if it is a regular file: a symlink
/// is not followed (`O_NOFOLLOW`: an error, never an append to some other file), a FIFO or
/// device is refused without blocking (`O_NONBLOCK`, then `fstat`). For logs that live in a
/// directory aorta owns, such as `agent_log.jsonl`.
pub fn open_append_regular(path: &Path, mode: u32) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            let what = fs::symlink_metadata(path)
                .map(|m| describe(&m.file_type()))
                .unwrap_or("");
            match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENXIO) if !what.is_empty() => refused(format!(
                    "is {what}; aorta appends only to a regular file (never through a link, \
                     a FIFO or a device): remove it"
                )),
                _ => e,
            }
        })?;
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        return Err(refused(format!(
            "is {}; aorta appends only to a regular file (never through a link, a FIFO or a \
             device): remove it",
            describe(&ft)
        )));
    }
    clear_nonblock(&f)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

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
    // ------------------------------------------------------------ user-named outputs

    fn mkfifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success(), "mkfifo {}", p.display());
    }

    /// A scratch null device (`mknod c 1 3`), or `None` (with the reason printed) when not root.
    fn null_device(dir: &Path) -> Option<PathBuf> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mknod needs root");
            return None;
        }
        let p = dir.join("null");
        let st = std::process::Command::new("mknod")
            .args([p.as_os_str(), "c".as_ref(), "1".as_ref(), "3".as_ref()])
            .status()
            .unwrap();
        assert!(st.success(), "mknod");
        Some(p)
    }

    fn is_char_device(p: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        fs::symlink_metadata(p)
            .unwrap()
            .file_type()
            .is_char_device()
    }

    #[test]
    fn a_user_file_that_is_missing_or_regular_is_written_atomically() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("env.json");
        write_user_file(&p, b"one").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        // A hard link shows the rename: the old inode keeps the old bytes.
        let old = d.path().join("old");
        fs::hard_link(&p, &old).unwrap();
        write_user_file(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read(&old).unwrap(), b"one");
        assert_eq!(entries(&d.path().join("sub")), ["env.json"]);
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target.json");
        fs::write(&target, "old").unwrap();
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink("target.json", &link).unwrap();
        write_user_file(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("target.json"));
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // A chain, and a dangling link: its target is created.
        let chain = d.path().join("chain");
        std::os::unix::fs::symlink(&link, &chain).unwrap();
        write_user_file(&chain, b"third").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"third");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink("made.json", &dangling).unwrap();
        write_user_file(&dangling, b"x").unwrap();
        assert_eq!(fs::read(d.path().join("made.json")).unwrap(), b"x");
        assert!(fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        // A loop is an error, not a hang.
        let a = d.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", d.path().join("b")).unwrap();
        assert!(write_user_file(&a, b"x").is_err());
    }

    #[test]
    fn a_fifo_with_a_reader_is_written_through() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(&fifo).unwrap())
        };
        // The reader's open may come after ours: retry the no-reader error for a while.
        let start = std::time::Instant::now();
        loop {
            match write_user_file(&fifo, b"through the pipe") {
                Ok(()) => break,
                Err(e) if start.elapsed().as_secs() < 10 => {
                    assert!(e.to_string().contains("no reader"), "{e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(entries(d.path()), ["fifo"]);
    }

    #[test]
    fn a_fifo_without_a_reader_is_an_error_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let start = std::time::Instant::now();
        let e = write_user_file(&fifo, b"x").unwrap_err();
        assert!(start.elapsed().as_secs() < 5);
        assert!(e.to_string().contains("FIFO with no reader"), "{e}");
        assert!(user_path_error(&e));
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(entries(d.path()), ["fifo"]);
    }

    #[test]
    fn a_character_device_stays_a_device() {
        let d = tempfile::tempdir().unwrap();
        let Some(dev) = null_device(d.path()) else {
            return;
        };
        write_user_file(&dev, &[b'x'; 10_000]).unwrap();
        assert!(is_char_device(&dev));
        assert!(fs::read(&dev).unwrap().is_empty(), "still a null device");
        // Through a symlink, too.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&dev, &link).unwrap();
        write_user_file(&link, b"x").unwrap();
        assert!(is_char_device(&dev));
        assert_eq!(entries(d.path()), ["link", "null"]);
    }

    #[test]
    fn a_directory_or_a_read_only_directory_is_the_paths_fault() {
        let d = tempfile::tempdir().unwrap();
        let e = write_user_file(d.path(), b"x").unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert!(user_path_error(&e));
        let ro = d.path().join("ro");
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
        let r = write_user_file(&ro.join("env.json"), b"x");
        fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // Root writes anywhere: the permission bits bind only others.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(user_path_error(&r.unwrap_err()));
        }
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(!user_path_error(&full), "a full disk is the machine's");
    }

    #[test]
    fn opening_a_must_be_regular_file_never_blocks() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("a FIFO, not a regular file"), "{e}");
        assert!(open_regular(d.path()).is_err(), "a directory");
        let f = d.path().join("f");
        fs::write(&f, "ok").unwrap();
        let mut s = String::new();
        io::Read::read_to_string(&mut open_regular(&f).unwrap(), &mut s).unwrap();
        assert_eq!(s, "ok");
    }

    #[test]
    fn appending_refuses_a_symlink_a_fifo_and_a_device() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        let mut f = open_append_regular(&log, 0o600).unwrap();
        f.write_all(b"a\n").unwrap();
        drop(f);
        open_append_regular(&log, 0o600)
            .unwrap()
            .write_all(b"b\n")
            .unwrap();
        assert_eq!(fs::read(&log).unwrap(), b"a\nb\n");

        let other = d.path().join("other");
        fs::write(&other, "untouched").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let e = open_append_regular(&link, 0o600).unwrap_err();
        assert!(e.to_string().contains("is a symlink"), "{e}");
        assert_eq!(fs::read(&other).unwrap(), b"untouched");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink("nowhere", &dangling).unwrap();
        assert!(open_append_regular(&dangling, 0o600).is_err());
        assert!(!d.path().join("nowhere").exists());

        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let e = open_append_regular(&fifo, 0o600).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        // With a reader the open succeeds, and the type check refuses it.
        let _reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let e = open_append_regular(&fifo, 0o600).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        if let Some(dev) = null_device(d.path()) {
            let e = open_append_regular(&dev, 0o600).unwrap_err();
            assert!(e.to_string().contains("is a character device"), "{e}");
        }
    }
}
