//! Cross-process behaviour with real child processes and real OS locks. The children are this
//! very test binary re-executed with `AORTA_STORE_TEST_ROLE` set: the `child_entry` test then
//! plays the requested role instead of returning immediately.

mod common;

use aorta_store::{GcPolicy, LocalStore, Lookup, StoreError};
use common::{count, key, manifest, wait_for};
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tempfile::TempDir;

const ROLE: &str = "AORTA_STORE_TEST_ROLE";
const DIR: &str = "AORTA_STORE_TEST_DIR";
const NAME: &str = "AORTA_STORE_TEST_NAME";
const TIMEOUT: Duration = Duration::from_secs(30);

fn spawn(role: &str, dir: &Path, name: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir)
        .env(NAME, name)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Kills (SIGKILL on Unix) and reaps a child.
fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn log_line(log: &Path, line: &str) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    writeln!(f, "{line}").unwrap();
}

/// An endless, slow source: a writer that is still mid-blob when it gets killed.
struct Slow {
    started: PathBuf,
    sent: u64,
}

impl Read for Slow {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.sent > 1 << 20 && !self.started.exists() {
            fs::write(&self.started, b"").unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
        let n = buf.len().min(64 * 1024);
        buf[..n].fill(b'x');
        self.sent += n as u64;
        Ok(n)
    }
}

/// Not a real test when run normally; the child-process side of the tests below.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let name = std::env::var(NAME).unwrap();
    let store = LocalStore::open(dir.join("store")).unwrap();
    let log = dir.join("log");
    match role.as_str() {
        "slow-writer" => {
            let started = dir.join("started");
            store.put_blob_reader(Slow { started, sent: 0 }).unwrap();
            unreachable!("the reader never ends");
        }
        "builder" => {
            // Barrier: all builders ask for the claim at about the same time.
            fs::write(dir.join(format!("ready-{name}")), b"").unwrap();
            wait_for(&dir.join("go"), TIMEOUT);
            let k = key("shared-trial");
            let mut waited = false;
            let claim = store
                .claim_reporting(&k, Duration::from_secs(60), |_, _| waited = true)
                .unwrap();
            if waited {
                log_line(&log, &format!("waited {name}"));
            }
            match claim.lookup().unwrap() {
                Lookup::Hit(m) => {
                    assert_eq!(m.key, k);
                    log_line(&log, &format!("hit {name}"));
                }
                _ => {
                    log_line(&log, &format!("exec {name}"));
                    std::thread::sleep(Duration::from_millis(700));
                    let out = format!("executed by {name}\n");
                    let m = manifest(&store, "shared-trial", &[("stdout.log", out.as_bytes())]);
                    claim.commit(&m).unwrap();
                }
            }
        }
        "claim-and-hang" => {
            let _claim = store.claim(&key(&name)).unwrap();
            fs::write(dir.join("claimed"), b"").unwrap();
            std::thread::sleep(Duration::from_secs(600));
        }
        "hold-build-lock" => {
            let _build = store.build_lock().unwrap();
            fs::write(dir.join("locked"), b"").unwrap();
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn writer_killed_mid_blob_leaves_no_entry() {
    let dir = TempDir::new().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    let child = spawn("slow-writer", dir.path(), "w");
    wait_for(&dir.path().join("started"), TIMEOUT);
    kill(child);

    let stats = store.stats().unwrap();
    assert_eq!(stats.blobs, 0, "no partial blob visible under cas/");
    assert_eq!(stats.tmp_files, 1, "the partial write stayed in tmp/");
    assert!(store.verify(false).unwrap().is_clean());

    let r = store
        .gc(&GcPolicy {
            tmp_max_age: Duration::ZERO,
            ..GcPolicy::default()
        })
        .unwrap();
    assert_eq!(r.tmp_removed, 1);
    assert_eq!(count(&store.root().join("tmp")), 0);
}

#[test]
fn concurrent_builds_execute_a_key_once() {
    let dir = TempDir::new().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    let children: Vec<Child> = ["a", "b", "c"]
        .iter()
        .map(|n| spawn("builder", dir.path(), n))
        .collect();
    for n in ["a", "b", "c"] {
        wait_for(&dir.path().join(format!("ready-{n}")), TIMEOUT);
    }
    fs::write(dir.path().join("go"), b"").unwrap();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }

    let log = fs::read_to_string(dir.path().join("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let execs: Vec<&&str> = lines.iter().filter(|l| l.starts_with("exec")).collect();
    let hits = lines.iter().filter(|l| l.starts_with("hit")).count();
    assert_eq!(execs.len(), 1, "{log}");
    assert_eq!(hits, 2, "{log}");
    assert!(
        lines.iter().any(|l| l.starts_with("waited")),
        "losers reported waiting: {log}"
    );

    let m = store.get_manifest_hit(&key("shared-trial"));
    let out = store.read_blob(&m.outputs["stdout.log"].digest).unwrap();
    let winner = execs[0].trim_start_matches("exec ");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("executed by {winner}\n")
    );
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn claim_of_a_killed_process_is_released() {
    let dir = TempDir::new().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    let child = spawn("claim-and-hang", dir.path(), "victim");
    wait_for(&dir.path().join("claimed"), TIMEOUT);
    assert!(
        store.try_claim(&key("victim")).unwrap().is_none(),
        "held by the child"
    );
    kill(child);
    let claim = store.try_claim(&key("victim")).unwrap();
    assert!(
        claim.is_some(),
        "the kernel released the dead process's lock"
    );
}

#[test]
fn gc_refuses_while_another_process_builds() {
    let dir = TempDir::new().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    let orphan = store.put_blob_bytes(b"not yet referenced").unwrap();
    let child = spawn("hold-build-lock", dir.path(), "b");
    wait_for(&dir.path().join("locked"), TIMEOUT);
    let err = store.gc(&GcPolicy::default()).unwrap_err();
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    assert!(store.has_blob(&orphan.digest).unwrap());
    kill(child);
    let r = store.gc(&GcPolicy::default()).unwrap();
    assert_eq!(r.blobs_removed, 1);
}

trait HitExt {
    fn get_manifest_hit(&self, k: &aorta_store::Key) -> aorta_store::Manifest;
}

impl HitExt for LocalStore {
    fn get_manifest_hit(&self, k: &aorta_store::Key) -> aorta_store::Manifest {
        match self.lookup(k).unwrap() {
            Lookup::Hit(m) => m,
            other => panic!("expected a hit for {k}, got {other:?}"),
        }
    }
}
