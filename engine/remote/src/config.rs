//! Where the remote cache is and how to use it: `--remote-cache URL`, `$AORTA_REMOTE_CACHE`, or
//! the project config (the `[aorta]` section of the workspace's `.buckconfig`, which Buck2's
//! `read_root_config("aorta", …)` reads too).

use crate::error::ConfigError;
use crate::sign::SigningKey;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--remote-cache-mode`: read-only (the default: CI jobs on forks, laptops) or read-through
/// plus write-back of trials this build executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    ReadWrite,
}

impl std::str::FromStr for Mode {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s {
            "read" => Ok(Mode::Read),
            "readwrite" | "read-write" => Ok(Mode::ReadWrite),
            other => Err(ConfigError::new(
                format!("unknown remote cache mode {other:?}"),
                "use `read` or `readwrite`",
            )),
        }
    }
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::ReadWrite => "readwrite",
        }
    }
}

/// The kind of back-end a URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `file:///shared/dir`: a directory (NFS, a CI cache directory).
    File(PathBuf),
    /// `http://host/prefix` or `https://…`: GET/PUT/HEAD of objects below the prefix (nginx with
    /// its WebDAV module, bazel-remote's HTTP API, any object server speaking plain HTTP).
    Http(String),
    /// `s3://bucket/prefix` or `gs://bucket/prefix`, through object_store (feature `cloud`).
    Cloud(String),
}

/// Parses a remote cache URL. Refuses anything aorta could not use instead of guessing.
pub fn parse_location(url: &str) -> Result<Location, ConfigError> {
    let url = url.trim();
    let help = "examples: file:///srv/aorta-cache, https://cache.example.com/aorta, s3://bucket/aorta, gs://bucket/aorta";
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(ConfigError::new(
            format!("remote cache {url:?} is not a URL"),
            help,
        ));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "file" => {
            // file:///abs/path (empty authority) or file://localhost/abs/path.
            let path = rest.strip_prefix("localhost").unwrap_or(rest);
            if !path.starts_with('/') {
                return Err(ConfigError::new(
                    format!("remote cache {url:?}: a file:// URL needs an absolute path"),
                    "write file:///abs/dir (three slashes)",
                ));
            }
            if path.len() == 1 {
                return Err(ConfigError::new(
                    format!("remote cache {url:?}: refusing the filesystem root"),
                    "name a directory, e.g. file:///srv/aorta-cache",
                ));
            }
            Ok(Location::File(PathBuf::from(path)))
        }
        "http" | "https" => {
            let host = rest.split('/').next().unwrap_or_default();
            if host.is_empty() || host.contains(char::is_whitespace) {
                return Err(ConfigError::new(
                    format!("remote cache {url:?}: no host"),
                    help,
                ));
            }
            if rest.contains(['?', '#']) {
                return Err(ConfigError::new(
                    format!("remote cache {url:?}: query strings and fragments are not supported"),
                    "give the base URL the cache's objects live under",
                ));
            }
            Ok(Location::Http(format!(
                "{scheme}://{}",
                rest.trim_end_matches('/')
            )))
        }
        "s3" | "gs" => {
            let bucket = rest.split('/').next().unwrap_or_default();
            if bucket.is_empty() {
                return Err(ConfigError::new(
                    format!("remote cache {url:?}: no bucket"),
                    format!("write {scheme}://BUCKET/optional/prefix"),
                ));
            }
            Ok(Location::Cloud(format!(
                "{scheme}://{}",
                rest.trim_end_matches('/')
            )))
        }
        other => Err(ConfigError::new(
            format!("remote cache {url:?}: unsupported scheme {other:?}"),
            help,
        )),
    }
}

/// A namespace is one path segment: letters, digits, `.`, `_`, `-`; 1–64 chars; not `.`/`..`.
pub fn validate_namespace(ns: &str) -> Result<(), ConfigError> {
    let ok = !ns.is_empty()
        && ns.len() <= 64
        && !matches!(ns, "." | ".." | "tmp")
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(
            format!("remote cache namespace {ns:?} is not a plain name"),
            "use 1-64 letters, digits, '.', '_' or '-' (e.g. v2 or ci-2026-03)",
        ))
    }
}

/// Everything the remote tier needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The URL as given (for messages).
    pub url: String,
    pub location: Location,
    pub mode: Mode,
    /// Every object lives under `<url>/<namespace>/`. Change it to disown a poisoned set.
    pub namespace: String,
    /// Per request: connecting and the whole exchange.
    pub timeout: Duration,
    /// Extra attempts after a transient failure (5xx, 429, a dropped connection mid-transfer).
    pub retries: u32,
    /// Sent as `Authorization: Bearer …` to http(s) caches (`$AORTA_REMOTE_CACHE_TOKEN`).
    pub bearer_token: Option<String>,
    /// Signs uploaded records and refuses unsigned or mis-signed ones
    /// (`$AORTA_REMOTE_CACHE_HMAC_KEY` or `$AORTA_REMOTE_CACHE_HMAC_KEY_FILE`).
    pub signing: Option<SigningKey>,
}

pub const DEFAULT_NAMESPACE: &str = "default";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRIES: u32 = 2;

/// Settings as they come from one source; `None` = not set there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub url: Option<String>,
    pub mode: Option<String>,
    pub namespace: Option<String>,
    pub timeout: Option<String>,
    pub retries: Option<String>,
    /// A file holding the signing key (`$AORTA_REMOTE_CACHE_HMAC_KEY_FILE`, or
    /// `remote_cache_hmac_key_file` in `.buckconfig`, relative to the workspace root). The
    /// secret itself is taken from the environment only, never from a checked-in file.
    pub hmac_key_file: Option<PathBuf>,
}

impl Settings {
    /// `AORTA_REMOTE_CACHE`, `AORTA_REMOTE_CACHE_MODE`, `_NAMESPACE`, `_TIMEOUT`, `_RETRIES`.
    pub fn from_env() -> Settings {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Settings {
            url: var("AORTA_REMOTE_CACHE"),
            mode: var("AORTA_REMOTE_CACHE_MODE"),
            namespace: var("AORTA_REMOTE_CACHE_NAMESPACE"),
            timeout: var("AORTA_REMOTE_CACHE_TIMEOUT"),
            retries: var("AORTA_REMOTE_CACHE_RETRIES"),
            hmac_key_file: var("AORTA_REMOTE_CACHE_HMAC_KEY_FILE").map(PathBuf::from),
        }
    }

    /// The `[aorta]` section of `<root>/.buckconfig`: `remote_cache`, `remote_cache_mode`,
    /// `remote_cache_namespace`, `remote_cache_timeout`, `remote_cache_retries`,
    /// `remote_cache_hmac_key_file`.
    pub fn from_project(root: &Path) -> Settings {
        let mut section = aorta_buckconfig::section(root, "aorta");
        let mut take = |k: &str| section.remove(k);
        Settings {
            url: take("remote_cache"),
            mode: take("remote_cache_mode"),
            namespace: take("remote_cache_namespace"),
            timeout: take("remote_cache_timeout"),
            retries: take("remote_cache_retries"),
            hmac_key_file: take("remote_cache_hmac_key_file").map(|f| root.join(f)),
        }
    }

    /// Field by field: `self` wins over `lower`.
    pub fn or(self, lower: Settings) -> Settings {
        Settings {
            url: self.url.or(lower.url),
            mode: self.mode.or(lower.mode),
            namespace: self.namespace.or(lower.namespace),
            timeout: self.timeout.or(lower.timeout),
            retries: self.retries.or(lower.retries),
            hmac_key_file: self.hmac_key_file.or(lower.hmac_key_file),
        }
    }

    /// `Ok(None)` when no URL is set anywhere (no remote tier).
    pub fn resolve(self) -> Result<Option<RemoteConfig>, ConfigError> {
        let Some(url) = self.url else { return Ok(None) };
        if url.trim() == "off" || url.trim() == "none" {
            return Ok(None);
        }
        let location = parse_location(&url)?;
        let mode = self
            .mode
            .as_deref()
            .map(str::parse)
            .transpose()?
            .unwrap_or(Mode::Read);
        let namespace = self
            .namespace
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
        validate_namespace(&namespace)?;
        let timeout = match self.timeout {
            Some(t) => parse_seconds(&t)?,
            None => DEFAULT_TIMEOUT,
        };
        let retries = match self.retries {
            Some(r) => r
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|&n| n <= 10)
                .ok_or_else(|| {
                    ConfigError::new(
                        format!("remote cache retries {r:?} is not a number from 0 to 10"),
                        "e.g. 2",
                    )
                })?,
            None => DEFAULT_RETRIES,
        };
        let bearer_token = std::env::var("AORTA_REMOTE_CACHE_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        let secret = std::env::var_os("AORTA_REMOTE_CACHE_HMAC_KEY").filter(|s| !s.is_empty());
        let signing = match secret {
            // Both in the environment is ambiguous; a secret in the environment wins over a key
            // file named by the project.
            Some(_) => signing_from(secret, std::env::var_os("AORTA_REMOTE_CACHE_HMAC_KEY_FILE"))?,
            None => signing_from(None, self.hmac_key_file.map(|f| f.into_os_string()))?,
        };
        Ok(Some(RemoteConfig {
            url: url.trim().to_owned(),
            location,
            mode,
            namespace,
            timeout,
            retries,
            bearer_token,
            signing,
        }))
    }
}

/// The signing key from the secret itself or from a file holding it; not both.
fn signing_from(
    secret: Option<std::ffi::OsString>,
    file: Option<std::ffi::OsString>,
) -> Result<Option<SigningKey>, ConfigError> {
    let secret = secret.filter(|s| !s.is_empty());
    let file = file.filter(|f| !f.is_empty());
    match (secret, file) {
        (Some(_), Some(_)) => Err(ConfigError::new(
            "both AORTA_REMOTE_CACHE_HMAC_KEY and AORTA_REMOTE_CACHE_HMAC_KEY_FILE are set",
            "set one of them: the secret itself, or the path of a file holding it",
        )),
        (Some(s), None) => {
            use std::os::unix::ffi::OsStrExt;
            SigningKey::from_secret(s.as_bytes()).map(Some)
        }
        (None, Some(f)) => SigningKey::from_file(Path::new(&f)).map(Some),
        (None, None) => Ok(None),
    }
}

/// `10`, `2.5`, `500ms`, `10s`: a positive duration of at most 10 minutes.
pub fn parse_seconds(t: &str) -> Result<Duration, ConfigError> {
    let t = t.trim();
    let (num, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 0.001)
    } else {
        (t.strip_suffix('s').unwrap_or(t), 1.0)
    };
    let secs = num
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 600.0);
    secs.map(Duration::from_secs_f64).ok_or_else(|| {
        ConfigError::new(
            format!("remote cache timeout {t:?} is not a duration"),
            "seconds (10, 2.5, 10s) or milliseconds (500ms), at most 600 s",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_location("file:///srv/cache").unwrap(),
            Location::File("/srv/cache".into())
        );
        assert_eq!(
            parse_location("file://localhost/srv/c").unwrap(),
            Location::File("/srv/c".into())
        );
        assert_eq!(
            parse_location("http://127.0.0.1:8080/aorta/").unwrap(),
            Location::Http("http://127.0.0.1:8080/aorta".into())
        );
        assert_eq!(
            parse_location("HTTPS://cache.example.com").unwrap(),
            Location::Http("HTTPS://cache.example.com".into())
        );
        assert_eq!(
            parse_location("s3://bucket/pre/fix/").unwrap(),
            Location::Cloud("s3://bucket/pre/fix".into())
        );
        assert_eq!(
            parse_location("gs://b").unwrap(),
            Location::Cloud("gs://b".into())
        );
        for bad in [
            "",
            "cache",
            "file://rel/dir",
            "file:///",
            "http://",
            "http:///x",
            "ftp://x/y",
            "s3://",
            "http://h/x?y=1",
        ] {
            assert!(parse_location(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn namespaces() {
        for ok in ["default", "v2", "ci-2026.03_a"] {
            validate_namespace(ok).unwrap();
        }
        for bad in ["", ".", "..", "tmp", "a/b", "a b", &"x".repeat(65)] {
            assert!(validate_namespace(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn precedence_and_defaults() {
        let cli = Settings {
            url: Some("http://a/x".into()),
            ..Default::default()
        };
        let project = Settings {
            url: Some("file:///b".into()),
            mode: Some("readwrite".into()),
            namespace: Some("p".into()),
            ..Default::default()
        };
        let c = cli.or(project).resolve().unwrap().unwrap();
        assert_eq!(c.location, Location::Http("http://a/x".into()));
        assert_eq!(c.mode, Mode::ReadWrite);
        assert_eq!(c.namespace, "p");
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.retries, DEFAULT_RETRIES);
        assert_eq!(Settings::default().resolve().unwrap(), None);
        assert_eq!(
            Settings {
                url: Some("off".into()),
                ..Default::default()
            }
            .resolve()
            .unwrap(),
            None
        );
        let bad = Settings {
            url: Some("http://a".into()),
            mode: Some("write".into()),
            ..Default::default()
        };
        assert!(bad.resolve().is_err());
        assert_eq!(parse_seconds("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_seconds("2.5").unwrap(), Duration::from_millis(2500));
        assert!(
            parse_seconds("0").is_err()
                && parse_seconds("x").is_err()
                && parse_seconds("1e9").is_err()
        );
    }

    #[test]
    fn signing_key_sources() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(signing_from(None, None).unwrap(), None);
        assert_eq!(signing_from(os(""), os("")).unwrap(), None);
        let k = signing_from(os("0123456789abcdef0123"), None)
            .unwrap()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        assert_eq!(
            signing_from(None, Some(file.clone().into())).unwrap(),
            Some(k)
        );
        assert!(signing_from(os("0123456789abcdef0123"), Some(file.into()))
            .unwrap_err()
            .message
            .contains("both"));
        assert!(signing_from(os("short"), None).is_err());
        let e = signing_from(None, Some(dir.path().join("missing").into())).unwrap_err();
        assert!(e.message.contains("cannot read"), "{e}");
    }

    #[test]
    fn buckconfig_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".buckconfig"),
            "[cells]\n  root = .\n  remote_cache = nope\n# c\n[aorta]\n  binary = aorta\n  remote_cache = s3://bkt/ci\n  remote_cache_mode = readwrite\n[other]\n  remote_cache_namespace = no\n",
        )
        .unwrap();
        let s = Settings::from_project(dir.path());
        assert_eq!(s.url.as_deref(), Some("s3://bkt/ci"));
        assert_eq!(s.mode.as_deref(), Some("readwrite"));
        assert_eq!(s.namespace, None);
    }

    #[test]
    fn a_project_names_a_signing_key_file_relative_to_its_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        std::fs::write(dir.path().join("keys/cache.key"), "0123456789abcdef0123\n").unwrap();
        std::fs::write(
            dir.path().join(".buckconfig"),
            "[aorta]\n  remote_cache = file:///tmp/c\n  remote_cache_hmac_key_file = keys/cache.key\n",
        )
        .unwrap();
        let s = Settings::from_project(dir.path());
        assert_eq!(s.hmac_key_file, Some(dir.path().join("keys/cache.key")));
        // The environment's file wins over the project's, field by field.
        let env = Settings {
            hmac_key_file: Some("/elsewhere.key".into()),
            ..Settings::default()
        };
        assert_eq!(
            env.or(s.clone()).hmac_key_file,
            Some(PathBuf::from("/elsewhere.key"))
        );
        if std::env::var_os("AORTA_REMOTE_CACHE_HMAC_KEY").is_none() {
            let cfg = s.resolve().unwrap().unwrap();
            let want = SigningKey::from_file(&dir.path().join("keys/cache.key")).unwrap();
            assert_eq!(cfg.signing, Some(want));
        }
    }
}
