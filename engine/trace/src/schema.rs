//! The trace file: its schema, and reading and writing it.

use crate::tracer::{EXEC, READ, WRITE};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Whether the trace covers the whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceStatus {
    /// Every open and exec of the process tree was seen.
    Complete,
    /// The command ran untraced (or partly traced); `reason` says why. Files may be listed.
    Unavailable,
}

/// One path the process tree named.
///
/// JSON strings must be UTF-8 and Linux paths are bytes: a non-UTF-8 path is written with
/// `path` as its lossy rendering (U+FFFD for bad bytes) and `lossy` holding the exact bytes,
/// so nothing is lost and UTF-8 paths stay plain strings. Use [`TracedFile::os_path`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracedFile {
    pub path: String,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lossy: Option<Vec<u8>>,
}

impl TracedFile {
    /// The exact path, from `lossy` when present.
    pub fn os_path(&self) -> PathBuf {
        match &self.lossy {
            Some(bytes) => PathBuf::from(OsString::from_vec(bytes.clone())),
            None => PathBuf::from(&self.path),
        }
    }
}

/// The trace file: `{"status", "reason"?, "files": [...]}`, files sorted by path bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    pub status: TraceStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub files: Vec<TracedFile>,
}

impl Trace {
    /// Complete when there is no `reason`.
    pub(crate) fn from_accesses(reason: Option<String>, files: HashMap<PathBuf, u8>) -> Trace {
        let mut files: Vec<(PathBuf, u8)> = files.into_iter().collect();
        files.sort_unstable_by(|a, b| a.0.as_os_str().as_bytes().cmp(b.0.as_os_str().as_bytes()));
        let files = files
            .into_iter()
            .map(|(p, kind)| {
                let (path, lossy) = match p.into_os_string().into_string() {
                    Ok(s) => (s, None),
                    Err(os) => (os.to_string_lossy().into_owned(), Some(os.into_vec())),
                };
                TracedFile {
                    path,
                    read: kind & READ != 0,
                    write: kind & WRITE != 0,
                    exec: kind & EXEC != 0,
                    lossy,
                }
            })
            .collect();
        let status = if reason.is_some() {
            TraceStatus::Unavailable
        } else {
            TraceStatus::Complete
        };
        Trace {
            status,
            reason,
            files,
        }
    }

    /// The entry for exactly this path, if recorded.
    pub fn file(&self, path: &Path) -> Option<&TracedFile> {
        self.files.iter().find(|f| f.os_path() == path)
    }
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("no command given")]
    NoCommand,
    #[error("argument contains a NUL byte: {0:?}")]
    NulInArgument(OsString),
    #[error("{what}: {source}")]
    Os {
        what: &'static str,
        source: io::Error,
    },
    #[error("cannot read trace {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("malformed trace {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write trace {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Reads a trace file written by `aorta-trace`.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Read {
        path: path.into(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| TraceError::Parse {
        path: path.into(),
        source,
    })
}

/// Writes `trace` atomically: a temporary file in the same directory, then `rename`, so a
/// reader sees the whole trace or none. Not fsync-ed: the file lives in a staging directory
/// read right after the run, where crash durability buys nothing.
pub fn write_trace(path: &Path, trace: &Trace) -> Result<(), TraceError> {
    let err = |source| TraceError::Write {
        path: path.into(),
        source,
    };
    let name = path
        .file_name()
        .ok_or_else(|| err(io::ErrorKind::InvalidInput.into()))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut json = serde_json::to_vec(trace).map_err(io::Error::other)?;
        json.push(b'\n');
        f.write_all(&json)?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_non_utf8_paths_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let odd = PathBuf::from(OsString::from_vec(b"/tmp/a\xffb".to_vec()));
        let files = HashMap::from([
            (PathBuf::from("/z"), READ | WRITE),
            (odd.clone(), EXEC),
            (PathBuf::from("/a"), READ),
        ]);
        let t = Trace::from_accesses(None, files);
        assert_eq!(t.status, TraceStatus::Complete);
        let names: Vec<_> = t.files.iter().map(|f| f.os_path()).collect();
        assert_eq!(
            names,
            [PathBuf::from("/a"), odd.clone(), PathBuf::from("/z")]
        );
        let path = dir.path().join("t.json");
        write_trace(&path, &t).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"status":"complete","files":[{"path":"/a","read":true,"#));
        assert!(text.contains(r#""path":"/tmp/a\uFFFDb""#) || text.contains("/tmp/a\u{FFFD}b"));
        let back = read_trace(&path).unwrap();
        assert_eq!(back, t);
        assert!(back.file(&odd).unwrap().exec);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn unavailable_with_reason_and_errors_on_garbage() {
        let t = Trace::from_accesses(Some("no".into()), HashMap::new());
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, r#"{"status":"unavailable","reason":"no","files":[]}"#);
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{").unwrap();
        assert!(matches!(read_trace(&bad), Err(TraceError::Parse { .. })));
        let missing = dir.path().join("missing.json");
        assert!(matches!(read_trace(&missing), Err(TraceError::Read { .. })));
        let nowhere = dir.path().join("no/such/dir/t.json");
        assert!(matches!(
            write_trace(&nowhere, &t),
            Err(TraceError::Write { .. })
        ));
    }
}
