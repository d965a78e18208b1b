//! The remote tier against real directories (file://) and a closed loopback port (http://).
//! The nginx round trip lives in engine/cli/tests/remote_cache.rs.

mod common;

use aorta_remote::{open, FileBackend, Location, Mode, Pulled, RemoteConfig, SigningKey, Tiered};
use aorta_store::{encode_ac_entry, CacheTier, Key, LocalStore, Lookup, Manifest};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

fn config(location: Location, url: &str, mode: Mode, ns: &str) -> RemoteConfig {
    RemoteConfig {
        url: url.into(),
        location,
        mode,
        namespace: ns.into(),
        timeout: Duration::from_secs(2),
        retries: 1,
        bearer_token: None,
        signing: None,
    }
}

fn signed(mut cfg: RemoteConfig, secret: &str) -> RemoteConfig {
    cfg.signing = Some(SigningKey::from_secret(secret.as_bytes()).unwrap());
    cfg
}

fn file_remote(dir: &std::path::Path, mode: Mode, ns: &str) -> Tiered {
    let cfg = config(
        Location::File(dir.to_owned()),
        &format!("file://{}", dir.display()),
        mode,
        ns,
    );
    Tiered::new(Arc::new(open(&cfg).unwrap()))
}

fn http_remote(base: &str, mode: Mode, secret: Option<&str>) -> Tiered {
    let url = format!("{base}/cache");
    let mut cfg = config(Location::Http(url.clone()), &url, mode, "default");
    if let Some(s) = secret {
        cfg = signed(cfg, s);
    }
    Tiered::new(Arc::new(open(&cfg).unwrap()))
}

/// Commits one entry with two outputs into `store`; returns its key.
fn commit(store: &LocalStore, seed: &str) -> Key {
    let key = Key::of_bytes(seed.as_bytes());
    let mut m = Manifest::new(
        key.clone(),
        serde_json::json!({"verdict": "pass", "seed": seed}),
    );
    for (name, body) in [
        ("stdout.log", format!("out {seed}\n")),
        ("rank0/trace.json", "{}".to_owned()),
    ] {
        let blob = store.put_blob_bytes(body.as_bytes()).unwrap();
        m.outputs.insert(name.into(), blob);
    }
    let claim = store.claim(&key).unwrap();
    claim.commit(&m).unwrap();
    key
}

#[test]
fn push_then_pull_into_an_empty_store() {
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    std::fs::create_dir(&remote_dir).unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    let key = commit(&a, "one");

    // Read-only mode never uploads.
    assert!(!file_remote(&remote_dir, Mode::Read, "default").push(&a, &key));
    let rw = file_remote(&remote_dir, Mode::ReadWrite, "default");
    assert!(rw.push(&a, &key));
    assert!(!rw.push(&a, &key), "a second push finds it present");
    assert_eq!(rw.remote.stats().uploaded, 1);
    assert_eq!(rw.remote.stats().already_present, 1);

    let ro = file_remote(&remote_dir, Mode::Read, "default");
    assert_eq!(ro.pull(&b, &key), Pulled::Remote);
    let Lookup::Hit(m) = b.lookup(&key).unwrap() else {
        panic!("not committed locally")
    };
    assert_eq!(m, a.lookup(&key).unwrap().hit().unwrap());
    assert_eq!(ro.pull(&b, &key), Pulled::Local);

    // Another namespace disowns everything.
    let other = LocalStore::open(tmp.path().join("c")).unwrap();
    assert_eq!(
        file_remote(&remote_dir, Mode::Read, "v2").pull(&other, &key),
        Pulled::Miss
    );
}

#[test]
fn tampered_remote_objects_are_never_used() {
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    std::fs::create_dir(&remote_dir).unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let key = commit(&a, "two");
    let rw = file_remote(&remote_dir, Mode::ReadWrite, "default");
    assert!(rw.push(&a, &key));
    let m = a.lookup(&key).unwrap().hit().unwrap();

    // A blob whose bytes changed (same size): the download fails its hash, nothing is committed.
    let blob = &m.outputs["stdout.log"];
    let path = remote_dir
        .join("default/cas")
        .join(blob.digest.shard())
        .join(blob.digest.as_str());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    assert_eq!(rw.pull(&b, &key), Pulled::Miss);
    assert_eq!(b.lookup(&key).unwrap(), Lookup::Miss);
    assert!(!b.has_blob(&blob.digest).unwrap());

    // An AC entry edited by hand fails its checksum: a rejected entry, not a hit.
    let ac = remote_dir
        .join("default/ac")
        .join(key.shard())
        .join(key.as_str());
    let text = std::fs::read_to_string(&ac)
        .unwrap()
        .replace("\"pass\"", "\"fail\"");
    std::fs::write(&ac, text).unwrap();
    assert!(matches!(
        rw.remote.get_manifest(&key).unwrap(),
        Lookup::Corrupt { .. }
    ));
    let c = LocalStore::open(tmp.path().join("c")).unwrap();
    assert_eq!(rw.pull(&c, &key), Pulled::Miss);
    assert_eq!(rw.remote.stats().rejected, 1);
}

#[test]
fn a_manifest_without_its_blobs_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    std::fs::create_dir(&remote_dir).unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let key = commit(&a, "three");
    let m = a.lookup(&key).unwrap().hit().unwrap();
    let rw = file_remote(&remote_dir, Mode::ReadWrite, "default");
    assert!(rw.remote.put_manifest(&key, &m).is_err());
    // And a remote entry whose blob vanished is not a hit.
    assert!(rw.push(&a, &key));
    let blob = &m.outputs["rank0/trace.json"];
    std::fs::remove_file(
        remote_dir
            .join("default/cas")
            .join(blob.digest.shard())
            .join(blob.digest.as_str()),
    )
    .unwrap();
    assert!(matches!(
        rw.remote.get_manifest(&key).unwrap(),
        Lookup::Corrupt { .. }
    ));
}

#[test]
fn an_unreachable_cache_costs_one_timeout_and_fails_nothing() {
    // A port nobody listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/cache");
    let cfg = config(
        Location::Http(url.clone()),
        &url,
        Mode::ReadWrite,
        "default",
    );
    let t = Tiered::new(Arc::new(open(&cfg).unwrap()));
    let tmp = tempfile::tempdir().unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let keys: Vec<Key> = (0..50).map(|i| commit(&a, &format!("k{i}"))).collect();
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    let t0 = Instant::now();
    assert_eq!(t.pull_many(&b, &keys), 0);
    assert_eq!(t.push_many(&a, &keys), 0);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    let s = t.remote.stats();
    assert!(s.disabled.is_some(), "{s:?}");

    // A file:// cache whose directory does not exist is unreachable the same way.
    let gone = file_remote(&tmp.path().join("no-such-dir"), Mode::ReadWrite, "default");
    assert_eq!(gone.pull(&b, &keys[0]), Pulled::Miss);
    assert!(!gone.push(&a, &keys[0]));
    assert!(gone.remote.is_disabled());
}

/// A cache that answers 503 to everything (a real server on loopback, counting requests), and
/// a host name that never resolves: once the retries of one operation are spent the cache is
/// switched off, so 50 trials cost one operation's attempts and one warning, not 50.
#[test]
fn a_cache_failing_past_its_retries_is_switched_off_after_one_operation() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let mut conn = conn;
            let _ = conn.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let keys: Vec<Key> = (0..50).map(|i| commit(&a, &format!("k{i}"))).collect();
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    let url = format!("http://127.0.0.1:{port}/cache");
    let cfg = config(Location::Http(url.clone()), &url, Mode::Read, "default");
    let t = Tiered::new(Arc::new(open(&cfg).unwrap()));
    assert_eq!(t.pull_many(&b, &keys), 0);
    let s = t.remote.stats();
    assert!(
        s.disabled.as_deref().is_some_and(|r| r.contains("503")),
        "{s:?}"
    );
    // One operation per puller thread (8) at most, each its first attempt and `retries` (1)
    // more: not two attempts for each of the 50 keys.
    let n = requests.load(Ordering::SeqCst);
    assert!((2..=16).contains(&n), "{n} requests");

    let url = "http://no-such-host.invalid:9/cache";
    let cfg = config(Location::Http(url.into()), url, Mode::Read, "default");
    let t = Tiered::new(Arc::new(open(&cfg).unwrap()));
    let t0 = Instant::now();
    assert_eq!(t.pull_many(&b, &keys), 0);
    assert!(t.remote.is_disabled());
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn cloud_urls_need_the_cloud_feature_or_work() {
    let cfg = config(
        Location::Cloud("s3://bucket/x".into()),
        "s3://bucket/x",
        Mode::Read,
        "default",
    );
    let opened = open(&cfg);
    assert_eq!(
        opened.is_ok(),
        cfg!(feature = "cloud"),
        "{:?}",
        opened.as_ref().err()
    );
    if let Err(e) = opened {
        assert!(
            e.message.contains("without s3://") && e.help.contains("`cloud` feature"),
            "{e}"
        );
    }
}

const SECRET: &str = "ci-writers-share-this-secret-0123";

/// A record rewritten by someone with write access but without the secret: the verdict flipped
/// and the envelope's checksum recomputed, so it passes every check but the signature.
fn forged_record(m: &Manifest) -> Vec<u8> {
    let mut forged = m.clone();
    forged.trial = serde_json::json!({"verdict": "fail", "forged": true});
    encode_ac_entry(&forged).unwrap()
}

#[test]
fn signed_records_over_http_refuse_forgeries_and_writers_replace_them() {
    let (base, objects) = common::object_server();
    let tmp = tempfile::tempdir().unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let key = commit(&a, "signed");
    let m = a.lookup(&key).unwrap().hit().unwrap();
    let writer = http_remote(&base, Mode::ReadWrite, Some(SECRET));
    assert!(writer.push(&a, &key));
    let ac_path = format!("/cache/default/ac/{}/{key}", key.shard());
    let uploaded = objects.lock().unwrap()[&ac_path].clone();
    assert!(String::from_utf8_lossy(&uploaded).contains("\naorta-signature v1 blake3-keyed "));

    // A reader with the secret gets the entry; so does one without (it does not check).
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    assert_eq!(
        http_remote(&base, Mode::Read, Some(SECRET)).pull(&b, &key),
        Pulled::Remote
    );
    assert_eq!(b.lookup(&key).unwrap().hit().unwrap(), m);
    let b2 = LocalStore::open(tmp.path().join("b2")).unwrap();
    assert_eq!(
        http_remote(&base, Mode::Read, None).pull(&b2, &key),
        Pulled::Remote
    );

    // Forged (valid checksum, no signature), then forged and signed with the wrong key.
    let wrong = SigningKey::from_secret(b"an attacker's own secret, long").unwrap();
    for (what, record) in [
        ("unsigned", forged_record(&m)),
        ("wrong key", wrong.sign(&key, &forged_record(&m))),
    ] {
        objects.lock().unwrap().insert(ac_path.clone(), record);
        let reader = http_remote(&base, Mode::Read, Some(SECRET));
        let Lookup::Corrupt { reason } = reader.remote.get_manifest(&key).unwrap() else {
            panic!("{what}: accepted")
        };
        assert!(
            reason.contains("signature") || reason.contains("not signed"),
            "{what}: {reason}"
        );
        let c = LocalStore::open(tmp.path().join(format!("c-{}", what.replace(' ', "-")))).unwrap();
        assert_eq!(
            reader.pull(&c, &key),
            Pulled::Miss,
            "{what}: the trial must run"
        );
        assert_eq!(c.lookup(&key).unwrap(), Lookup::Miss);
        assert_eq!(reader.remote.stats().rejected, 1, "{what}");
        // The writer that ran the trial sees an entry readers cannot use, and replaces it.
        let writer = http_remote(&base, Mode::ReadWrite, Some(SECRET));
        assert!(writer.push(&a, &key), "{what}: not replaced");
        assert_eq!(objects.lock().unwrap()[&ac_path], uploaded, "{what}");
        assert!(!writer.push(&a, &key), "{what}: a good entry is left alone");
    }
}

#[test]
fn a_signing_reader_refuses_entries_written_without_a_key() {
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    std::fs::create_dir(&remote_dir).unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let key = commit(&a, "unsigned-writer");
    assert!(file_remote(&remote_dir, Mode::ReadWrite, "default").push(&a, &key));
    let url = format!("file://{}", remote_dir.display());
    let cfg = signed(
        config(
            Location::File(remote_dir.clone()),
            &url,
            Mode::Read,
            "default",
        ),
        SECRET,
    );
    let reader = Tiered::new(Arc::new(open(&cfg).unwrap()));
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    assert_eq!(reader.pull(&b, &key), Pulled::Miss);
    assert_eq!(reader.remote.stats().rejected, 1);
}

fn age(path: &std::path::Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs))
        .unwrap();
}

#[test]
fn abandoned_uploads_in_tmp_are_swept_by_the_next_write() {
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    let tmp_dir = remote_dir.join("tmp");
    std::fs::create_dir_all(&tmp_dir).unwrap();
    // What a push killed mid-copy leaves: a partial `put-*` file nobody will rename.
    let abandoned = tmp_dir.join("put-abandoned");
    std::fs::write(&abandoned, vec![7u8; 4096]).unwrap();
    age(&abandoned, 2 * 3600);
    // An upload still being written (recent), and a file that is not an upload's.
    let live = tmp_dir.join("put-live");
    std::fs::write(&live, b"partial").unwrap();
    let other = tmp_dir.join("notes.txt");
    std::fs::write(&other, b"kept").unwrap();
    age(&other, 2 * 3600);

    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let key = commit(&a, "sweep");
    assert!(file_remote(&remote_dir, Mode::ReadWrite, "default").push(&a, &key));
    assert!(!abandoned.exists(), "the abandoned upload is still there");
    assert!(live.exists() && other.exists());
    // Nothing of the push itself stays behind.
    let left: Vec<_> = std::fs::read_dir(&tmp_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");

    // The age bound is the backend's; a sweep runs once per interval.
    let b = FileBackend::new(remote_dir.clone()).with_tmp_max_age(Duration::from_secs(1));
    age(&live, 10);
    assert_eq!(b.sweep_tmp(), 1);
    assert!(!live.exists());
    std::fs::write(&live, b"x").unwrap();
    age(&live, 10);
    assert_eq!(b.sweep_tmp(), 0, "swept again within the interval");
}

/// A blob whose response declares more bytes than the manifest says it has (a 2 GB body for a
/// 9-byte stdout) is refused before its body is read, so the pull costs one round trip, not a
/// download until the timeout; the trial then runs locally (a miss), nothing enters the store.
#[test]
fn an_oversized_blob_is_refused_by_its_declared_size() {
    use std::io::{BufRead, BufReader, Write};
    let tmp = tempfile::tempdir().unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let key = commit(&a, "big");
    // A genuine remote layout, written through a file:// remote.
    let served = tmp.path().join("served");
    std::fs::create_dir(&served).unwrap();
    assert!(file_remote(&served, Mode::ReadWrite, "default").push(&a, &key));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = served.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let path = first.split_whitespace().nth(1).unwrap_or("/");
            let rel = path.trim_start_matches("/cache/");
            let mut conn = conn;
            if rel.contains("/cas/") {
                // Declares 2 GB, sends a little, then stalls: the client must not wait on it.
                let _ =
                    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\nxxxx");
                std::thread::sleep(Duration::from_secs(5));
            } else {
                match std::fs::read(root.join(rel)) {
                    Ok(body) => {
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = conn.write_all(&body);
                    }
                    Err(_) => {
                        let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    }
                }
            }
        }
    });
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    let t = http_remote(&format!("http://127.0.0.1:{port}"), Mode::Read, None);
    let t0 = Instant::now();
    assert_eq!(t.pull(&b, &key), Pulled::Miss);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    assert!(matches!(b.lookup(&key), Ok(Lookup::Miss)));
}

/// A cache whose bodies stall (Content-Length 100000, then one byte a second) is an outage: each
/// transfer thread's first operation times out through its retries, then the cache is off, so
/// 50 trials cost about (retries + 1) × timeout, not that per trial.
#[test]
fn a_stalled_body_switches_the_cache_off() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let mut conn = conn;
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
                for _ in 0..30 {
                    if conn.write_all(b"x").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let a = LocalStore::open(tmp.path().join("a")).unwrap();
    let keys: Vec<Key> = (0..50).map(|i| commit(&a, &format!("s{i}"))).collect();
    let b = LocalStore::open(tmp.path().join("b")).unwrap();
    let t = http_remote(&format!("http://127.0.0.1:{port}"), Mode::Read, None);
    let t0 = Instant::now();
    assert_eq!(t.pull_many(&b, &keys), 0);
    let took = t0.elapsed();
    assert!(t.remote.is_disabled(), "{:?}", t.remote.stats());
    // config(): a 2 s timeout and 1 retry, with back-off: well under 50 × that.
    assert!(took < Duration::from_secs(12), "took {took:?}");
}
