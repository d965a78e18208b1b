//! The remote cache against a real nginx with its WebDAV module on loopback (issue 7's
//! "two-store test"): store A builds and uploads; an empty store B with the same environment
//! key executes nothing and writes the same matrix; a store whose environment key differs
//! executes everything.
//!
//! nginx is `$AORTA_NGINX` (tests/run-all sets it from tests/install-nginx.sh, which unpacks
//! Debian's package into .cache/nginx when the machine has none), else found on PATH or in
//! /usr/sbin. Without it the test is skipped, unless `AORTA_REQUIRE_NGINX=1` (tests/run-all
//! sets it), which makes a missing nginx a failure.
mod common;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn find_nginx() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AORTA_NGINX") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin"].map(PathBuf::from))
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

/// A real nginx serving `<dir>/www` with WebDAV PUT on a free loopback port; killed on drop.
struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Nginx {
    fn start() -> Option<Nginx> {
        let Some(bin) = find_nginx() else {
            if std::env::var_os("AORTA_REQUIRE_NGINX").is_some_and(|v| v == "1") {
                panic!("AORTA_REQUIRE_NGINX=1 but no nginx binary was found ($AORTA_NGINX, PATH, /usr/sbin); AORTA_NGINX=$(tests/install-nginx.sh) fetches Debian's");
            }
            eprintln!(
                "SKIPPED: nginx not found; AORTA_NGINX=$(tests/install-nginx.sh) fetches Debian's"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("www/cache")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let d = dir.path().display();
        // As root, nginx would drop its workers to `nobody`, who cannot write the temp dir.
        // SAFETY: geteuid has no preconditions.
        let user = if unsafe { libc::geteuid() } == 0 {
            "user root;\n"
        } else {
            ""
        };
        let conf = format!(
            "{user}master_process off;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 64; }}\n\
             http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  client_max_body_size 0;\n\
             server {{\n    listen 127.0.0.1:{port};\n    location /cache/ {{\n      root {d}/www;\n      dav_methods PUT DELETE MKCOL;\n      create_full_put_path on;\n      dav_access user:rw group:r all:r;\n    }}\n  }}\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new(&bin)
            .args([
                "-p",
                &d.to_string(),
                "-e",
                &format!("{d}/error.log"),
                "-c",
                &format!("{d}/nginx.conf"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut n = Nginx { child, port, dir };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = n.child.try_wait() {
                let log =
                    std::fs::read_to_string(n.dir.path().join("error.log")).unwrap_or_default();
                panic!("nginx exited with {status} before listening on {port}:\n{log}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "nginx did not listen on {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(n)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/cache", self.port)
    }

    /// Objects nginx holds (under the default namespace).
    fn objects(&self, kind: &str) -> usize {
        walk(&self.dir.path().join("www/cache/default").join(kind))
    }
}

/// One process (`master_process off`), so nothing outlives it; SIGTERM first for a clean exit,
/// SIGKILL after 5 s.
impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

const RECIPE: &str = "schema_version: 1\nmode: probe\nticket: T\ntrials: 3\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\nconfound: {baseline_cell: none-none}\n";
const SCRIPT: &str = "echo \"step_time 0.25 blocking=${CUDA_LAUNCH_BLOCKING:-unset}\"\nmkdir -p extra && echo trace > extra/trace.txt\n";

/// A workspace with the recipe, its command, and two recorded environment snapshots: `h200.json`
/// (docs/examples/h200-env.json) and `driver.json`, the same machine with another driver (a
/// keyed field, so another environment key).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r.yaml"), RECIPE).unwrap();
    std::fs::write(dir.path().join("run.sh"), SCRIPT).unwrap();
    std::fs::write(dir.path().join(".aorta-root"), "").unwrap();
    let snap =
        std::fs::read_to_string(common::repo_root().join("docs/examples/h200-env.json")).unwrap();
    std::fs::write(dir.path().join("h200.json"), &snap).unwrap();
    let mut other: serde_json::Value = serde_json::from_str(&snap).unwrap();
    other["gpu"]["driver_version"] = "590.1".into();
    std::fs::write(
        dir.path().join("driver.json"),
        serde_json::to_string(&other).unwrap(),
    )
    .unwrap();
    dir
}

/// `aorta sweep run` in `ws` with its own store, under the recorded H200 snapshot unless
/// `extra` names another `--env-snapshot`.
fn sweep(ws: &Path, store: &str, out: &str, extra: &[&str]) -> Output {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws)
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.join(store))
        .env("AORTA_ENV_SNAPSHOT", ws.join("h200.json"));
    for k in [
        "AORTA_REMOTE_CACHE",
        "AORTA_REMOTE_CACHE_MODE",
        "AORTA_REMOTE_CACHE_NAMESPACE",
        "AORTA_REMOTE_CACHE_TIMEOUT",
        "AORTA_REMOTE_CACHE_RETRIES",
        "AORTA_REMOTE_CACHE_TOKEN",
    ] {
        c.env_remove(k);
    }
    c.args(["sweep", "run", "--recipe", "r.yaml", "--output", out])
        .args(extra)
        .args(["--", "bash", "run.sh"]);
    c.output().unwrap()
}

/// (executed, reused) from the summary line.
fn counts(out: &Output) -> (usize, usize) {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("Trials: "))
        .unwrap_or_else(|| panic!("no Trials line in\n{}", common::transcript(out)));
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1])
}

fn matrix(ws: &Path, out: &str) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(out).join("T/matrix.json")).unwrap())
            .unwrap();
    strip_volatile(&mut v);
    v
}

fn strip_volatile(v: &mut serde_json::Value) {
    if let Some(o) = v.as_object_mut() {
        for k in ["run_timestamp", "executed", "reused", "cache", "resumed"] {
            o.remove(k);
        }
        o.values_mut().for_each(strip_volatile);
    } else if let Some(a) = v.as_array_mut() {
        a.iter_mut().for_each(strip_volatile);
    }
}

#[test]
fn two_stores_share_results_through_nginx_webdav() {
    let Some(nginx) = Nginx::start() else { return };
    let url = nginx.url();
    let ws = workspace();
    let ws = ws.path();

    // Store A builds everything and uploads it.
    let a = sweep(
        ws,
        "store-a",
        "out-a",
        &["--remote-cache", &url, "--remote-cache-mode", "readwrite"],
    );
    assert!(a.status.success(), "{}", common::transcript(&a));
    assert_eq!(counts(&a), (6, 0));
    let stderr = String::from_utf8_lossy(&a.stderr);
    assert!(stderr.contains("0 downloaded, 6 uploaded"), "{stderr}");
    assert_eq!(nginx.objects("ac"), 6, "one AC object per trial");
    // Blobs are deduplicated by content: two stdout.log texts (blocking=unset, blocking=1),
    // one extra/trace.txt and one inputs.json (the same traced inputs) for all six trials.
    assert_eq!(nginx.objects("cas"), 4, "blobs uploaded once each");

    // An empty store B, same environment key: nothing executes, the matrix is identical.
    let b = sweep(ws, "store-b", "out-b", &["--remote-cache", &url]);
    assert!(b.status.success(), "{}", common::transcript(&b));
    assert_eq!(counts(&b), (0, 6), "{}", common::transcript(&b));
    assert!(
        String::from_utf8_lossy(&b.stderr).contains("6 downloaded, 0 uploaded"),
        "{}",
        common::transcript(&b)
    );
    assert_eq!(
        matrix(ws, "out-a"),
        matrix(ws, "out-b"),
        "same matrix from the remote cache"
    );
    // The outputs themselves came across, verified.
    let trial = |out: &str| {
        std::fs::read_dir(ws.join(out).join("T"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .count()
    };
    assert_eq!(trial("out-a"), trial("out-b"));
    // B now holds the results locally: a rerun without the remote executes nothing either.
    assert_eq!(counts(&sweep(ws, "store-b", "out-b2", &[])), (0, 6));

    // A read-only build that executes (another namespace: nothing there) uploads nothing.
    let ro = sweep(
        ws,
        "store-c",
        "out-c",
        &["--remote-cache", &url, "--remote-cache-namespace", "other"],
    );
    assert_eq!(counts(&ro), (6, 0));
    assert_eq!(walk(&nginx.dir.path().join("www/cache/other")), 0);

    // Another environment key (a new driver: a keyed field of the snapshot), same remote:
    // nothing there matches, everything executes.
    let d = sweep(
        ws,
        "store-d",
        "out-d",
        &["--remote-cache", &url, "--env-snapshot", "driver.json"],
    );
    assert_eq!(counts(&d), (6, 0), "{}", common::transcript(&d));
    assert!(
        String::from_utf8_lossy(&d.stderr).contains("0 downloaded, 0 uploaded"),
        "{}",
        common::transcript(&d)
    );
    // And `aorta build` of the same recipe by path, under the first key: all from the remote.
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws)
        .env("NO_COLOR", "1")
        .env("AORTA_STORE", ws.join("store-e"))
        .env("AORTA_ENV_SNAPSHOT", ws.join("h200.json"))
        .env("AORTA_REMOTE_CACHE", &url);
    let e = c
        .args([
            "build", "r.yaml", "--output", "out-e", "--", "bash", "run.sh",
        ])
        .output()
        .unwrap();
    assert_eq!(counts(&e), (0, 6), "{}", common::transcript(&e));
    assert_eq!(matrix(ws, "out-a"), matrix(ws, "out-e"));
}

#[test]
fn an_unreachable_remote_cache_never_fails_a_build() {
    let ws = workspace();
    let ws = ws.path();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/cache");
    let t0 = Instant::now();
    let out = sweep(
        ws,
        "store",
        "out",
        &[
            "--remote-cache",
            &url,
            "--remote-cache-mode",
            "readwrite",
            "--remote-cache-timeout",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", common::transcript(&out));
    assert_eq!(counts(&out), (6, 0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is unreachable") && stderr.contains("unreachable (skipped)"),
        "{stderr}"
    );
    assert!(t0.elapsed() < Duration::from_secs(60));
}

#[test]
fn bad_remote_cache_settings_are_usage_errors() {
    let ws = workspace();
    for args in [
        &["--remote-cache", "ftp://x/y"][..],
        &["--remote-cache", "file://relative"],
        &[
            "--remote-cache",
            "file:///tmp/x",
            "--remote-cache-namespace",
            "a/b",
        ],
        &[
            "--remote-cache",
            "http://h",
            "--remote-cache-timeout",
            "soon",
        ],
    ] {
        let out = sweep(ws.path(), "store", "out", args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            common::transcript(&out)
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
    // From the environment too.
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("aorta"));
    c.current_dir(ws.path())
        .env("AORTA_STORE", ws.path().join("store"))
        .env("AORTA_REMOTE_CACHE", "gopher://x");
    let out = c
        .args(["sweep", "run", "--recipe", "r.yaml", "--", "bash", "run.sh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", common::transcript(&out));
}

/// s3:// and gs:// need the `cloud` feature; without it they are a usage error with a hint,
/// before anything runs.
#[test]
fn cloud_urls_without_the_cloud_feature_say_how_to_get_it() {
    if cfg!(feature = "cloud") {
        return;
    }
    let ws = workspace();
    for url in ["s3://bucket/aorta", "gs://bucket"] {
        let out = sweep(ws.path(), "store", "out", &["--remote-cache", url]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{url}: {}",
            common::transcript(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("built without s3:// and gs:// support")
                && stderr.contains("the `cloud` feature"),
            "{url}: {stderr}"
        );
        assert!(!ws.path().join("out").exists(), "nothing ran");
    }
}
