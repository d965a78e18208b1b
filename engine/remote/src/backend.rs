//! Object back-ends: a flat namespace of immutable objects addressed by a relative path
//! (`<namespace>/ac/12/<key>`, `<namespace>/cas/ab/<digest>`). They move bytes; verification is
//! the tier's job (`lib.rs`), so a back-end may be as dumb as a WebDAV directory.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// How an operation failed, which decides what the tier does next.
#[derive(Debug)]
pub enum Failure {
    /// Cannot reach the cache at all (connection refused, DNS, timeout): the tier stops using
    /// it for the rest of the process, so an outage costs one timeout, not one per trial.
    Unreachable(String),
    /// Worth another attempt (5xx, 429, a connection dropped mid-transfer).
    Transient(String),
    /// The cache answered, and the answer is final (403, 405, a full disk): no retry.
    Refused(String),
}

impl Failure {
    pub fn reason(&self) -> &str {
        match self {
            Failure::Unreachable(r) | Failure::Transient(r) | Failure::Refused(r) => r,
        }
    }
}

pub type Outcome<T> = Result<T, Failure>;

pub trait Backend: Send + Sync {
    /// Streams the object into `out`; `Ok(false)` when it does not exist. At most `limit` bytes
    /// are accepted (a hostile server cannot fill the disk with one "blob").
    fn get(&self, path: &str, out: &mut dyn Write, limit: u64) -> Outcome<bool>;
    /// The object's size, `None` when it does not exist.
    fn head(&self, path: &str) -> Outcome<Option<u64>>;
    /// Stores `len` bytes read from `src` (a file aorta has just verified).
    fn put(&self, path: &str, src: &Path, len: u64) -> Outcome<()>;
}

// ------------------------------------------------------------------ file://

/// A `put-*` file in `<root>/tmp/` not written to for this long is an upload whose writer died
/// (killed mid-push): a live upload writes continuously and renames its file right after the
/// last write, so an hour without a write cannot be one, even across clock skew on NFS.
pub const TMP_MAX_AGE: Duration = Duration::from_secs(3600);
/// A writer sweeps `<root>/tmp/` on its first upload, then at most this often.
const SWEEP_INTERVAL: Duration = Duration::from_secs(600);
/// The prefix of upload temp files: the only names the sweep removes.
const PUT_PREFIX: &str = "put-";

/// A directory, typically shared (NFS, a CI cache directory). Writes are atomic: a temp file in
/// `<root>/tmp/`, fsync, rename; readers never see a partial object. Temp files of uploads that
/// never finished are removed by the next writer once they are [`TMP_MAX_AGE`] old.
pub struct FileBackend {
    root: PathBuf,
    tmp_max_age: Duration,
    last_sweep: Mutex<Option<Instant>>,
}

impl FileBackend {
    pub fn new(root: PathBuf) -> Self {
        FileBackend {
            root,
            tmp_max_age: TMP_MAX_AGE,
            last_sweep: Mutex::new(None),
        }
    }

    /// A different age bound for abandoned uploads (tests).
    pub fn with_tmp_max_age(mut self, age: Duration) -> Self {
        self.tmp_max_age = age;
        self
    }

    /// Removes abandoned upload temp files (`tmp/put-*` older than the age bound); returns how
    /// many. At most once per [`SWEEP_INTERVAL`] per process; never fails an upload.
    pub fn sweep_tmp(&self) -> usize {
        {
            let Ok(mut last) = self.last_sweep.lock() else {
                return 0;
            };
            if last.is_some_and(|t| t.elapsed() < SWEEP_INTERVAL) {
                return 0;
            }
            *last = Some(Instant::now());
        }
        let Ok(entries) = fs::read_dir(self.root.join("tmp")) else {
            return 0;
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(PUT_PREFIX) {
                continue;
            }
            // DirEntry::metadata does not follow symlinks: only plain files are removed.
            let Ok(md) = entry.metadata() else { continue };
            let idle = md.modified().ok().and_then(|m| now.duration_since(m).ok());
            if md.is_file()
                && idle.is_some_and(|age| age > self.tmp_max_age)
                && fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    fn io(op: &str, path: &Path, e: &io::Error) -> Failure {
        let reason = format!("{op} {}: {e}", path.display());
        match e.kind() {
            io::ErrorKind::PermissionDenied
            | io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::StorageFull => Failure::Refused(reason),
            _ => Failure::Transient(reason),
        }
    }

    fn reachable(&self) -> Outcome<()> {
        match fs::metadata(&self.root) {
            Ok(md) if md.is_dir() => Ok(()),
            Ok(_) => Err(Failure::Unreachable(format!(
                "{} is not a directory",
                self.root.display()
            ))),
            Err(e) => Err(Failure::Unreachable(format!(
                "{}: {e}",
                self.root.display()
            ))),
        }
    }
}

impl Backend for FileBackend {
    fn get(&self, path: &str, out: &mut dyn Write, limit: u64) -> Outcome<bool> {
        self.reachable()?;
        let p = self.root.join(path);
        // Never blocks: a FIFO (or device) where a record or blob should be is refused unread,
        // where a plain open would wait forever for a writer (no timeout covers file://).
        let f = match aorta_fsutil::open_regular(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                return Err(Failure::Refused(format!("{} is {e}", p.display())))
            }
            Err(e) => return Err(Self::io("open", &p, &e)),
        };
        let copied = io::copy(&mut f.take(limit + 1), out).map_err(|e| Self::io("read", &p, &e))?;
        if copied > limit {
            return Err(Failure::Refused(format!(
                "{} is larger than {limit} bytes",
                p.display()
            )));
        }
        Ok(true)
    }

    fn head(&self, path: &str) -> Outcome<Option<u64>> {
        self.reachable()?;
        let p = self.root.join(path);
        match fs::metadata(&p) {
            Ok(md) if md.is_file() => Ok(Some(md.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Self::io("stat", &p, &e)),
        }
    }

    fn put(&self, path: &str, src: &Path, _len: u64) -> Outcome<()> {
        self.reachable()?;
        let dest = self.root.join(path);
        let tmp_dir = self.root.join("tmp");
        let parent = dest.parent().unwrap_or(&self.root);
        for d in [&tmp_dir, &parent.to_path_buf()] {
            fs::create_dir_all(d).map_err(|e| Self::io("create", d, &e))?;
        }
        self.sweep_tmp();
        let mut tmp = tempfile::Builder::new()
            .prefix(PUT_PREFIX)
            .tempfile_in(&tmp_dir)
            .map_err(|e| Self::io("create temp file in", &tmp_dir, &e))?;
        let mut input = File::open(src).map_err(|e| Self::io("open", src, &e))?;
        io::copy(&mut input, tmp.as_file_mut()).map_err(|e| Self::io("write", tmp.path(), &e))?;
        tmp.as_file()
            .sync_all()
            .map_err(|e| Self::io("fsync", tmp.path(), &e))?;
        tmp.persist(&dest)
            .map_err(|e| Self::io("rename into", &dest, &e.error))?;
        if let Ok(d) = File::open(parent) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ http(s)://

/// Plain HTTP: `GET`/`HEAD`/`PUT <base>/<path>`. nginx with `dav_methods PUT` and
/// `create_full_put_path on` is a complete server; so is bazel-remote's HTTP interface.
pub struct HttpBackend {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

impl HttpBackend {
    pub fn new(base: String, timeout: Duration, token: Option<String>) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("aorta/", env!("CARGO_PKG_VERSION")))
            .build();
        HttpBackend {
            base,
            agent: config.into(),
            token,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => req.header("Authorization", format!("Bearer {t}")),
            None => req,
        }
    }

    fn transport(url: &str, e: ureq::Error) -> Failure {
        let reason = format!("{url}: {e}");
        match e {
            ureq::Error::Timeout(_) | ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => {
                Failure::Unreachable(reason)
            }
            ureq::Error::Io(ref io)
                if matches!(
                    io.kind(),
                    io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::NotConnected
                        | io::ErrorKind::AddrNotAvailable
                ) =>
            {
                Failure::Unreachable(reason)
            }
            _ => Failure::Transient(reason),
        }
    }

    fn status(url: &str, method: &str, code: u16) -> Failure {
        let reason = format!("{method} {url}: HTTP {code}");
        if code >= 500 || code == 429 || code == 408 {
            Failure::Transient(reason)
        } else {
            Failure::Refused(reason)
        }
    }
}

impl Backend for HttpBackend {
    fn get(&self, path: &str, out: &mut dyn Write, limit: u64) -> Outcome<bool> {
        let url = self.url(path);
        let resp = self
            .auth(self.agent.get(&url))
            .call()
            .map_err(|e| Self::transport(&url, e))?;
        match resp.status().as_u16() {
            200 => {}
            404 | 410 => return Ok(false),
            code => return Err(Self::status(&url, "GET", code)),
        }
        // A body declared larger than the caller expects is refused before it is read.
        let declared = resp
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit) {
            return Err(Failure::Refused(format!(
                "GET {url}: declares {} bytes, more than the {limit} expected",
                declared.unwrap_or_default()
            )));
        }
        let reader = resp.into_body().into_reader();
        let copied = io::copy(&mut reader.take(limit + 1), out)
            .map_err(|e| Failure::Transient(format!("GET {url}: {e}")))?;
        if copied > limit {
            return Err(Failure::Refused(format!(
                "GET {url}: larger than {limit} bytes"
            )));
        }
        Ok(true)
    }

    fn head(&self, path: &str) -> Outcome<Option<u64>> {
        let url = self.url(path);
        let resp = self
            .auth(self.agent.head(&url))
            .call()
            .map_err(|e| Self::transport(&url, e))?;
        match resp.status().as_u16() {
            200 => Ok(Some(
                resp.headers()
                    .get("content-length")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(u64::MAX),
            )),
            404 | 410 => Ok(None),
            code => Err(Self::status(&url, "HEAD", code)),
        }
    }

    fn put(&self, path: &str, src: &Path, len: u64) -> Outcome<()> {
        let url = self.url(path);
        let file = File::open(src)
            .map_err(|e| Failure::Refused(format!("open {}: {e}", src.display())))?;
        let req = self
            .auth(self.agent.put(&url))
            .header("Content-Length", len.to_string())
            .header("Content-Type", "application/octet-stream");
        let resp = req
            .send(ureq::SendBody::from_reader(&mut file.take(len)))
            .map_err(|e| Self::transport(&url, e))?;
        match resp.status().as_u16() {
            200..=299 => Ok(()),
            code => Err(Self::status(&url, "PUT", code)),
        }
    }
}
