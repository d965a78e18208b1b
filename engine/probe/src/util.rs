//! Small helpers shared by the sections: fail-soft file reads, C header `#define`s, version
//! strings, the partial-reason collector, and an RFC 3339 clock without a date crate.

use crate::error::ProbeError;
use crate::schema::PartialReason;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Collects `partial_reasons` from every section, including from threads.
#[derive(Debug, Default)]
pub(crate) struct Reasons(Mutex<Vec<PartialReason>>);

impl Reasons {
    pub fn add(&self, field: &str, reason: impl std::fmt::Display) {
        let r = PartialReason {
            field: field.to_string(),
            reason: reason.to_string(),
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    /// Records `Err` and turns it into `None`.
    pub fn ok<T, E: std::fmt::Display>(&self, field: &str, r: Result<T, E>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.add(field, e);
                None
            }
        }
    }

    pub fn take(&self) -> Vec<PartialReason> {
        let mut v = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        v.sort_by(|a, b| a.field.cmp(&b.field).then(a.reason.cmp(&b.reason)));
        v.dedup();
        v
    }
}

/// Collects `probe.steps_ms`, from every thread.
#[derive(Debug, Default)]
pub(crate) struct Steps(Mutex<BTreeMap<String, u64>>);

impl Steps {
    /// Times the step `name` until the returned clock drops, so a step is a scope, not a closure.
    pub fn clock(&self, name: &'static str) -> Clock<'_> {
        Clock {
            steps: self,
            name,
            started: Instant::now(),
        }
    }

    pub fn take(self) -> BTreeMap<String, u64> {
        self.0.into_inner().unwrap_or_default()
    }
}

/// A running step of [`Steps`]; its milliseconds are recorded when it drops.
pub(crate) struct Clock<'a> {
    steps: &'a Steps,
    name: &'static str,
    started: Instant,
}

impl Drop for Clock<'_> {
    fn drop(&mut self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.steps
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.name.to_string(), ms);
    }
}

/// `root` joined with an absolute path such as `/proc/cpuinfo` (the fixture root in tests).
pub(crate) fn rooted(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// A small text file, trimmed; `Err` says why (missing, empty, not UTF-8).
pub(crate) fn read_text(p: &Path) -> Result<String, ProbeError> {
    let bytes = std::fs::read(p).map_err(|source| ProbeError::Read {
        path: p.to_path_buf(),
        source,
    })?;
    let s = String::from_utf8(bytes).map_err(|_| ProbeError::NotUtf8 {
        path: p.to_path_buf(),
    })?;
    let t = s.trim();
    if t.is_empty() {
        return Err(ProbeError::Empty {
            path: p.to_path_buf(),
        });
    }
    Ok(t.to_string())
}

/// `#define NAME VALUE` lines of a C header (values unquoted, comments dropped).
pub(crate) fn header_defines(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut it = line
            .trim_start()
            .strip_prefix('#')
            .map(str::trim_start)
            .and_then(|l| l.strip_prefix("define"))
            .into_iter();
        let Some(rest) = it.next() else { continue };
        if !rest.starts_with([' ', '\t']) {
            continue;
        }
        let rest = rest.trim();
        let (name, value) = rest
            .split_once(|c: char| c.is_whitespace())
            .unwrap_or((rest, ""));
        let value = value
            .split("//")
            .next()
            .unwrap_or("")
            .split("/*")
            .next()
            .unwrap_or("")
            .trim();
        let value = value
            .trim_start_matches('(')
            .trim_end_matches(')')
            .trim()
            .trim_matches('"');
        out.insert(name.to_string(), value.to_string());
    }
    out
}

/// `MAJOR.MINOR.PATCH` from three defines named `<prefix>MAJOR` etc. (suffixes given).
pub(crate) fn version_from_defines(
    d: &BTreeMap<String, String>,
    names: [&str; 3],
) -> Option<String> {
    let parts: Option<Vec<u64>> = names
        .iter()
        .map(|n| d.get(*n).and_then(|v| v.parse().ok()))
        .collect();
    parts.map(|p| format!("{}.{}.{}", p[0], p[1], p[2]))
}

/// The version a shared object's file name carries: `libcublas.so.13.1.0.3` → `13.1.0.3`.
pub(crate) fn soname_version(file_name: &str) -> Option<String> {
    let (_, v) = file_name.split_once(".so.")?;
    (!v.is_empty()
        && v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| v.to_string())
}

/// Orders dotted numeric versions numerically (`5.10.0` > `5.9.0`), non-numeric parts last.
pub(crate) fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |s: &str| {
        s.split(['.', '-', '+'])
            .map(|p| p.parse::<u64>().ok())
            .collect::<Vec<_>>()
    };
    key(a).cmp(&key(b))
}

/// Decodes an NCCL/RCCL `NCCL_VERSION_CODE` (AORTA §7.4): ≥ 10000 → `c/10000 . (c%10000)/100 .
/// c%100`, else the legacy `c/1000 . (c%1000)/100 . c%100`.
pub(crate) fn nccl_version_from_code(c: u64) -> String {
    if c >= 10000 {
        format!("{}.{}.{}", c / 10000, (c % 10000) / 100, c % 100)
    } else {
        format!("{}.{}.{}", c / 1000, (c % 1000) / 100, c % 100)
    }
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub(crate) fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    rfc3339(secs)
}

pub(crate) fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_244_387), "2026-12-02T20:46:27Z");
    }

    #[test]
    fn defines_and_versions() {
        let d = header_defines("#define CUDNN_MAJOR 9\n#  define CUDNN_MINOR    19 // minor\n#define CUDNN_PATCHLEVEL (0)\n#define X \"str\"\n#defineY 1\n");
        assert_eq!(
            version_from_defines(&d, ["CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"]).as_deref(),
            Some("9.19.0")
        );
        assert_eq!(d["X"], "str");
        assert!(!d.contains_key("Y"));
        assert_eq!(
            soname_version("libcublas.so.13.1.0.3").as_deref(),
            Some("13.1.0.3")
        );
        assert_eq!(soname_version("libcublas.so"), None);
        assert_eq!(
            soname_version("libnvrtc-builtins.so.13.0").as_deref(),
            Some("13.0")
        );
        assert_eq!(version_cmp("5.10.0", "5.9.0"), std::cmp::Ordering::Greater);
        assert_eq!(nccl_version_from_code(22809), "2.28.9");
        assert_eq!(nccl_version_from_code(2708), "2.7.8");
    }
}
