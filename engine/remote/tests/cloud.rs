//! s3:// and gs:// (feature `cloud`) end to end through object_store against a small object
//! server on loopback that answers the path-style GET/PUT/HEAD both clients send
//! (`AWS_ENDPOINT` / `GOOGLE_BASE_URL` point them at it). Signatures are not checked: what is
//! tested is aorta's side (object paths under the bucket prefix, verified pull and push,
//! not-found as a miss, an unreachable endpoint as one timeout).
#![cfg(feature = "cloud")]

use aorta_remote::{open, Pulled, Settings, Tiered};
use aorta_store::{Key, LocalStore, Lookup, Manifest};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Objects = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// A loopback object server; returns its base URL and its objects (by request path).
fn object_server() -> (String, Objects) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let objects: Objects = Arc::default();
    let store = objects.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let store = store.clone();
            std::thread::spawn(move || serve(conn, &store));
        }
    });
    (base, objects)
}

fn serve(conn: TcpStream, objects: &Objects) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        // GCS sends the object name as one percent-encoded segment; S3 as a path.
        let path = percent_decode(target.split('?').next().unwrap_or(""));
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let found = objects.lock().unwrap().get(&path).cloned();
        let meta = |b: &[u8]| {
            format!("ETag: \"{}\"\r\nLast-Modified: Tue, 01 Dec 2026 00:00:00 GMT\r\nContent-Length: {}\r\n", blake3::hash(b).to_hex(), b.len())
        };
        let resp: Vec<u8> = match (method.as_str(), found) {
            ("PUT", _) => {
                let m = meta(&body);
                objects.lock().unwrap().insert(path, body);
                format!(
                    "HTTP/1.1 200 OK\r\n{}\r\n",
                    m.replace(&format!("Content-Length: {}", len), "Content-Length: 0")
                )
                .into_bytes()
            }
            ("GET", Some(b)) => [
                format!("HTTP/1.1 200 OK\r\n{}\r\n", meta(&b)).into_bytes(),
                b,
            ]
            .concat(),
            ("HEAD", Some(b)) => format!("HTTP/1.1 200 OK\r\n{}\r\n", meta(&b)).into_bytes(),
            ("GET" | "HEAD", None) => {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()
            }
            _ => b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        if out.write_all(&resp).is_err() {
            return;
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok()),
        ) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

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
        m.outputs
            .insert(name.into(), store.put_blob_bytes(body.as_bytes()).unwrap());
    }
    store.claim(&key).unwrap().commit(&m).unwrap();
    key
}

fn tiered(url: &str, mode: &str) -> Tiered {
    let s = Settings {
        url: Some(url.into()),
        mode: Some(mode.into()),
        timeout: Some("3".into()),
        ..Default::default()
    };
    Tiered::new(Arc::new(open(&s.resolve().unwrap().unwrap()).unwrap()))
}

/// One test: the clients read their endpoints from the process environment.
#[test]
fn s3_and_gs_round_trip_through_object_store() {
    let (base, objects) = object_server();
    // SAFETY: the only test in this binary; nothing else reads the environment concurrently.
    unsafe {
        for (k, v) in [
            ("AWS_ENDPOINT", base.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("GOOGLE_BASE_URL", base.as_str()),
            ("GOOGLE_BEARER_TOKEN", "test"),
            ("GOOGLE_ALLOW_HTTP", "true"),
        ] {
            std::env::set_var(k, v);
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    for scheme in ["s3", "gs"] {
        let url = format!("{scheme}://{scheme}-bkt/ci/cache");
        let a = LocalStore::open(tmp.path().join(format!("{scheme}-a"))).unwrap();
        let b = LocalStore::open(tmp.path().join(format!("{scheme}-b"))).unwrap();
        let key = commit(&a, scheme);

        assert_eq!(
            tiered(&url, "read").pull(&b, &key),
            Pulled::Miss,
            "{scheme}: nothing there yet"
        );
        let rw = tiered(&url, "readwrite");
        assert!(
            rw.push(&a, &key),
            "{scheme}: upload; stats {:?}",
            rw.remote.stats()
        );
        assert!(!rw.push(&a, &key), "{scheme}: already there");
        let names: Vec<String> = objects
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(&format!("/{scheme}-bkt/")))
            .cloned()
            .collect();
        assert_eq!(
            names.iter().filter(|n| n.contains("/default/ac/")).count(),
            1,
            "{scheme}: {names:#?}"
        );
        assert_eq!(
            names.iter().filter(|n| n.contains("/default/cas/")).count(),
            2,
            "{scheme}: {names:#?}"
        );

        let ro = tiered(&url, "read");
        assert_eq!(
            ro.pull(&b, &key),
            Pulled::Remote,
            "{scheme}: stats {:?}",
            ro.remote.stats()
        );
        let Lookup::Hit(m) = b.lookup(&key).unwrap() else {
            panic!("{scheme}: not committed locally")
        };
        assert_eq!(m, a.lookup(&key).unwrap().hit().unwrap());

        // A tampered blob is refused; nothing is committed.
        let blob = names
            .iter()
            .find(|n| n.contains("/default/cas/"))
            .unwrap()
            .clone();
        objects.lock().unwrap().get_mut(&blob).unwrap()[0] ^= 1;
        let c = LocalStore::open(tmp.path().join(format!("{scheme}-c"))).unwrap();
        assert_eq!(ro.pull(&c, &key), Pulled::Miss);
        assert_eq!(c.lookup(&key).unwrap(), Lookup::Miss);
        objects.lock().unwrap().get_mut(&blob).unwrap()[0] ^= 1;
    }

    // An endpoint that does not answer: one bounded wait, then the tier is off; nothing fails.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // SAFETY: as above.
    unsafe { std::env::set_var("AWS_ENDPOINT", format!("http://{closed}")) };
    let t0 = Instant::now();
    let dead = tiered("s3://bkt/x", "read");
    let d = LocalStore::open(tmp.path().join("d")).unwrap();
    for i in 0..5 {
        assert_eq!(
            dead.pull(&d, &Key::of_bytes(format!("k{i}").as_bytes())),
            Pulled::Miss
        );
    }
    assert!(
        dead.remote.is_disabled() || dead.remote.stats().errors > 0,
        "{:?}",
        dead.remote.stats()
    );
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
}
