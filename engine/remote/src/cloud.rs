//! `s3://` and `gs://` through the object_store crate (feature `cloud`). Credentials come the
//! usual way: `AWS_*` / `GOOGLE_*` environment variables (access keys, `AWS_REGION`,
//! `AWS_ENDPOINT` for MinIO and other S3-compatible servers, `GOOGLE_SERVICE_ACCOUNT`), or the
//! instance metadata service.

use crate::backend::{Backend, Failure, Outcome};
use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

pub struct CloudBackend {
    store: Box<dyn ObjectStore>,
    prefix: ObjectPath,
    runtime: tokio::runtime::Runtime,
    timeout: Duration,
    url: String,
}

/// The object_store options for `url`: the cloud's environment variables, lower-cased as
/// object_store's config keys expect, plus aorta's timeouts.
pub fn options_from_env(url: &str, timeout: Duration) -> Vec<(String, String)> {
    let wanted = if url.starts_with("gs://") {
        "GOOGLE_"
    } else {
        "AWS_"
    };
    let mut opts: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with(wanted))
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    opts.push(("timeout".into(), format!("{}ms", timeout.as_millis())));
    opts.push((
        "connect_timeout".into(),
        format!("{}ms", timeout.as_millis()),
    ));
    opts
}

/// Why no client for a bucket URL could be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CloudError {
    #[error("{url}: {source}")]
    BadUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },
    #[error("{url}: {source}")]
    Store {
        url: String,
        #[source]
        source: object_store::Error,
    },
    #[error("cannot start an async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl CloudBackend {
    pub fn new(url: &str, timeout: Duration) -> Result<Self, CloudError> {
        // reqwest is built without a TLS crypto provider of its own (its default would be
        // aws-lc-rs); use ring, which ureq's rustls already brings. Err = one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let parsed = url::Url::parse(url).map_err(|source| CloudError::BadUrl {
            url: url.to_owned(),
            source,
        })?;
        let (store, prefix) = object_store::parse_url_opts(&parsed, options_from_env(url, timeout))
            .map_err(|source| CloudError::Store {
                url: url.to_owned(),
                source,
            })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(CloudError::Runtime)?;
        Ok(CloudBackend {
            store,
            prefix,
            runtime,
            timeout,
            url: url.to_owned(),
        })
    }

    fn path(&self, rel: &str) -> ObjectPath {
        let mut p = self.prefix.clone();
        for part in rel.split('/') {
            p = p.clone().join(part);
        }
        p
    }

    fn block<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Outcome<Option<T>> {
        let r = self
            .runtime
            .block_on(async { tokio::time::timeout(self.timeout, fut).await });
        match r {
            Err(_) => Err(Failure::Unreachable(format!(
                "{what} {}: timed out after {:?}",
                self.url, self.timeout
            ))),
            Ok(Ok(v)) => Ok(Some(v)),
            Ok(Err(object_store::Error::NotFound { .. })) => Ok(None),
            Ok(Err(
                e @ (object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }),
            )) => Err(Failure::Refused(format!("{what} {}: {e}", self.url))),
            Ok(Err(e)) => Err(Failure::Transient(format!("{what} {}: {e}", self.url))),
        }
    }
}

impl Backend for CloudBackend {
    fn get(&self, path: &str, out: &mut dyn Write, limit: u64) -> Outcome<bool> {
        let p = self.path(path);
        let Some(res) = self.block("GET", self.store.get(&p))? else {
            return Ok(false);
        };
        if res.meta.size > limit {
            return Err(Failure::Refused(format!(
                "GET {path}: {} bytes, more than {limit}",
                res.meta.size
            )));
        }
        // Chunk by chunk into `out` (blobs can be large traces), under the same timeout.
        let mut stream = res.into_stream();
        let mut copied = 0u64;
        let mut sink_error = None;
        let copy = async {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                copied += chunk.len() as u64;
                if copied > limit {
                    break;
                }
                if let Err(e) = out.write_all(&chunk) {
                    sink_error = Some(e);
                    break;
                }
            }
            Ok(())
        };
        self.block("GET", copy)?;
        if let Some(e) = sink_error {
            return Err(Failure::Refused(format!("write {path}: {e}")));
        }
        if copied > limit {
            return Err(Failure::Refused(format!(
                "GET {path}: larger than {limit} bytes"
            )));
        }
        Ok(true)
    }

    fn head(&self, path: &str) -> Outcome<Option<u64>> {
        let p = self.path(path);
        Ok(self.block("HEAD", self.store.head(&p))?.map(|m| m.size))
    }

    fn put(&self, path: &str, src: &Path, len: u64) -> Outcome<()> {
        let mut buf = Vec::with_capacity(len as usize);
        std::fs::File::open(src)
            .and_then(|f| f.take(len).read_to_end(&mut buf))
            .map_err(|e| Failure::Refused(format!("read {}: {e}", src.display())))?;
        let p = self.path(path);
        self.block("PUT", self.store.put(&p, PutPayload::from(buf)))
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_clients_for_both_clouds_without_network() {
        // Constructing a client does no I/O; this proves the URLs and options are accepted.
        let b =
            CloudBackend::new("s3://aorta-test-bucket/ci/cache", Duration::from_secs(1)).unwrap();
        assert_eq!(
            b.path("default/ac/12/abc").as_ref(),
            "ci/cache/default/ac/12/abc"
        );
        let g = CloudBackend::new("gs://aorta-test-bucket", Duration::from_secs(1));
        // gs:// wants credentials at build time on some versions; either way it must not panic.
        if let Ok(g) = g {
            assert_eq!(g.path("x/y").as_ref(), "x/y");
        }
        let opts = options_from_env("s3://b", Duration::from_millis(1500));
        assert!(opts.contains(&("timeout".into(), "1500ms".into())));
    }
}
