//! In-process behaviour of the local store against real files and real OS locks: round trips,
//! dedup, corruption and dangling references, hostile on-disk content, gc and its lock.

mod common;

use aorta_store::{
    BlobRef, CacheTier, Digest, GcPolicy, LocalStore, Lookup, Manifest, StoreError, Waiting,
};
use common::{count, key, manifest};
use std::fs::{self, File};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};
use tempfile::TempDir;

fn open() -> (TempDir, LocalStore) {
    let dir = TempDir::new().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    (dir, store)
}

fn set_mtime(path: &Path, ago: Duration) {
    let f = File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - ago).unwrap();
}

#[test]
fn entry_and_blob_paths_follow_the_documented_layout() {
    // docs/store.md: ac/<first two hex>/<key>.json and cas/<first two hex>/<digest>, also for a
    // root given with a trailing slash.
    let (d, store) = open();
    let k = key("layout");
    let blob = Digest::of_bytes(b"layout");
    for s in [
        &store,
        &LocalStore::open(format!("{}/", store.root().display())).unwrap(),
    ] {
        assert_eq!(
            s.ac_path(&k),
            d.path()
                .join("store/ac")
                .join(&k.as_str()[..2])
                .join(format!("{}.json", k.as_str()))
        );
        assert_eq!(
            s.blob_path(&blob),
            d.path()
                .join("store/cas")
                .join(&blob.as_str()[..2])
                .join(blob.as_str())
        );
    }
}

#[test]
fn layout_and_version() {
    let (_d, store) = open();
    for sub in ["cas", "ac", "tmp", "locks", "quarantine"] {
        assert!(store.root().join(sub).is_dir(), "{sub}");
    }
    assert_eq!(
        fs::read_to_string(store.root().join("VERSION"))
            .unwrap()
            .trim(),
        "1"
    );
    // Reopening an existing store is fine.
    LocalStore::open(store.root()).unwrap();
}

#[test]
fn refuses_newer_or_garbage_version() {
    let (_d, store) = open();
    fs::write(store.root().join("VERSION"), "2\n").unwrap();
    let err = LocalStore::open(store.root()).unwrap_err();
    assert!(
        matches!(err, StoreError::UnsupportedVersion { found: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade aorta"), "{err}");

    fs::write(store.root().join("VERSION"), "banana").unwrap();
    let err = LocalStore::open(store.root()).unwrap_err();
    assert!(matches!(err, StoreError::BadVersion { .. }), "{err}");
}

#[test]
fn default_root_honours_env() {
    // The only test touching AORTA_STORE.
    std::env::remove_var("AORTA_STORE");
    assert_eq!(
        aorta_store::default_store_root(Path::new("/ws")),
        Path::new("/ws/.aorta")
    );
    std::env::set_var("AORTA_STORE", "/elsewhere");
    assert_eq!(
        aorta_store::default_store_root(Path::new("/ws")),
        Path::new("/elsewhere")
    );
    std::env::remove_var("AORTA_STORE");
}

#[test]
fn blob_roundtrip_and_dedup() {
    let (dir, store) = open();
    let a = store.put_blob_bytes(b"hello world").unwrap();
    assert_eq!(a.digest, Digest::of_bytes(b"hello world"));
    assert_eq!(a.size, 11);
    assert_eq!(store.read_blob(&a.digest).unwrap(), b"hello world");

    // Same content three ways: one blob.
    let src = dir.path().join("src.txt");
    fs::write(&src, b"hello world").unwrap();
    assert_eq!(store.put_blob_file(&src).unwrap(), a);
    assert_eq!(store.put_blob_reader(&b"hello world"[..]).unwrap(), a);
    let stats = store.stats().unwrap();
    assert_eq!((stats.blobs, stats.blob_bytes, stats.tmp_files), (1, 11, 0));

    // A bigger-than-one-chunk file streams through.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let bigsrc = dir.path().join("big.bin");
    fs::write(&bigsrc, &big).unwrap();
    let b = store.put_blob_from(&bigsrc).unwrap();
    assert_eq!(
        b,
        BlobRef {
            digest: Digest::of_bytes(&big),
            size: big.len() as u64
        }
    );
    let out = dir.path().join("out/big.bin");
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    store.get_blob_to(&b.digest, &out).unwrap();
    assert_eq!(fs::read(&out).unwrap(), big);
    assert!(store.has_blob(&b.digest).unwrap());
    assert!(!store.has_blob(&Digest::of_bytes(b"nope")).unwrap());
    assert_eq!(
        count(out.parent().unwrap()),
        1,
        "no temp file left beside the output"
    );
}

/// Two trials finishing at once store the same output (an empty log, say). Neither may take
/// the other's blob for a bad one: a blob that appears between two checks is the same blob,
/// and moving it to quarantine leaves the other trial's commit naming a missing blob.
#[test]
fn concurrent_puts_of_one_blob_never_lose_it() {
    let (_d, store) = open();
    let store = std::sync::Arc::new(store);
    let threads = 4;
    for round in 0..300u32 {
        let content = format!("round {round}");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (store, barrier, content) = (store.clone(), barrier.clone(), content.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let blob = store.put_blob_bytes(content.as_bytes()).unwrap();
                    store.has_blob(&blob.digest).unwrap()
                })
            })
            .collect();
        for h in handles {
            assert!(
                h.join().unwrap(),
                "round {round}: a blob just stored is missing"
            );
        }
    }
    assert_eq!(
        count(&store.root().join("quarantine")),
        0,
        "a good blob was quarantined"
    );
}

#[test]
fn manifest_roundtrip_and_materialize() {
    let (dir, store) = open();
    let m = manifest(
        &store,
        "t1",
        &[("stdout.log", b"ok\n"), ("rank0/trace.json", b"{}")],
    );
    assert_eq!(store.get_manifest(&m.key).unwrap(), Lookup::Miss);
    store.put_manifest(&m).unwrap();
    let got = store.get_manifest(&m.key).unwrap().hit().unwrap();
    assert_eq!(got, m);

    let dest = dir.path().join("results/t1");
    store.materialize(&got, &dest).unwrap();
    assert_eq!(fs::read(dest.join("stdout.log")).unwrap(), b"ok\n");
    assert_eq!(fs::read(dest.join("rank0/trace.json")).unwrap(), b"{}");

    // The trait checks the key it is given against the manifest.
    let err = CacheTier::put_manifest(&store, &key("other"), &m).unwrap_err();
    assert!(matches!(err, StoreError::InvalidManifest { .. }), "{err}");
}

#[test]
fn put_manifest_refuses_missing_blobs() {
    let (_d, store) = open();
    let mut m = Manifest::new(key("t"), serde_json::json!({}));
    m.outputs.insert(
        "stdout.log".into(),
        BlobRef {
            digest: Digest::of_bytes(b"never uploaded"),
            size: 14,
        },
    );
    let err = store.put_manifest(&m).unwrap_err();
    assert!(matches!(err, StoreError::MissingBlob { .. }), "{err}");
    assert_eq!(store.stats().unwrap().ac_entries, 0);
}

#[test]
fn corrupt_blob_detected_on_read_and_by_verify() {
    let (dir, store) = open();
    let m = manifest(&store, "t", &[("a.log", b"alpha"), ("b.log", b"bravo")]);
    store.put_manifest(&m).unwrap();
    let a = &m.outputs["a.log"];
    let b = &m.outputs["b.log"];

    // Same-size bit rot on both (so only hashing can tell).
    fs::write(store.blob_path(&a.digest), b"alphA").unwrap();
    fs::write(store.blob_path(&b.digest), b"bravO").unwrap();

    let report = store.verify(false).unwrap();
    assert_eq!(report.corrupt_blobs.len(), 2, "{report:?}");
    assert_eq!(report.bad_entries.len(), 1, "{report:?}");
    assert!(!report.is_clean());

    let err = store.read_blob(&a.digest).unwrap_err();
    match &err {
        StoreError::Corrupt {
            path,
            expected,
            actual,
        } => {
            assert_eq!(path, &store.blob_path(&a.digest));
            assert_eq!(expected, &a.digest);
            assert_eq!(actual, Digest::of_bytes(b"alphA").as_str());
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    assert!(err.to_string().contains("quarantined"), "{err}");
    assert!(
        !store.has_blob(&a.digest).unwrap(),
        "corrupt blob moved to quarantine"
    );

    // Materialising fails cleanly and leaves no partial file.
    let dest = dir.path().join("out");
    assert!(store.materialize(&m, &dest).is_err());
    assert!(!dest.join("b.log").exists());

    // The AC entry now dangles → corrupt lookup, removed, rerun possible.
    let look = store.get_manifest(&m.key).unwrap();
    assert!(matches!(look, Lookup::Corrupt { .. }), "{look:?}");
    assert_eq!(store.get_manifest(&m.key).unwrap(), Lookup::Miss);

    let report = store.verify(true).unwrap();
    assert!(report.repaired);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn garbage_or_truncated_entry_is_a_corrupt_miss_then_rerun_works() {
    let (_d, store) = open();
    let m = manifest(&store, "t", &[("stdout.log", b"ok")]);
    store.put_manifest(&m).unwrap();
    let path = store.ac_path(&m.key);
    let good = fs::read(&path).unwrap();

    for bad in [
        good[..good.len() / 2].to_vec(),
        b"\x00\x01garbage".to_vec(),
        Vec::new(),
        String::from_utf8(good.clone())
            .unwrap()
            .replace("1.25", "9.25")
            .into_bytes(),
    ] {
        fs::write(&path, &bad).unwrap();
        match store.get_manifest(&m.key).unwrap() {
            Lookup::Corrupt { reason } => assert!(!reason.is_empty()),
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert!(!path.exists(), "bad entry removed so the next run is clean");
        assert_eq!(store.get_manifest(&m.key).unwrap(), Lookup::Miss);
        // Rerun: claim, execute (nothing to do), commit.
        let claim = store.claim(&m.key).unwrap();
        assert_eq!(claim.lookup().unwrap(), Lookup::Miss);
        claim.commit(&m).unwrap();
        assert!(store.get_manifest(&m.key).unwrap().is_hit());
    }
    assert!(count(&store.root().join("quarantine")) >= 4);
}

#[test]
fn dangling_blob_reference_detected() {
    let (_d, store) = open();
    let m = manifest(&store, "t", &[("stdout.log", b"ok")]);
    store.put_manifest(&m).unwrap();
    fs::remove_file(store.blob_path(&m.outputs["stdout.log"].digest)).unwrap();

    let report = store.verify(false).unwrap();
    assert_eq!(report.bad_entries.len(), 1);
    assert!(
        report.bad_entries[0].reason.contains("dangling"),
        "{report:?}"
    );
    match store.get_manifest(&m.key).unwrap() {
        Lookup::Corrupt { reason } => assert!(reason.contains("dangling"), "{reason}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn materialize_rejects_escaping_paths() {
    let (dir, store) = open();
    let blob = store.put_blob_bytes(b"pwned").unwrap();
    for evil in ["../x", "a/../../x", "/tmp/x", "a//b", ""] {
        let mut m = Manifest::new(key("evil"), serde_json::json!({}));
        m.outputs.insert(evil.into(), blob.clone());
        let dest = dir.path().join("dest");
        let err = store.materialize(&m, &dest).unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidManifest { .. }),
            "{evil}: {err}"
        );
        assert!(store.put_manifest(&m).is_err(), "{evil}: stored");
    }
    assert!(!dir.path().join("x").exists());
}

#[cfg(unix)]
#[test]
fn symlinks_planted_in_the_store_are_not_followed() {
    use std::os::unix::fs::symlink;
    let (dir, store) = open();
    let outside = dir.path().join("secret");
    fs::write(&outside, b"secret").unwrap();
    let d = Digest::of_bytes(b"secret");

    // A blob that is a symlink to a file with the right content.
    let bp = store.blob_path(&d);
    fs::create_dir_all(bp.parent().unwrap()).unwrap();
    symlink(&outside, &bp).unwrap();
    assert!(!store.has_blob(&d).unwrap());
    let err = store.read_blob(&d).unwrap_err();
    assert!(matches!(err, StoreError::UnsafeEntry { .. }), "{err}");

    // An AC entry that is a symlink: a corrupt miss, and it gets removed.
    let k = key("linked");
    let ap = store.ac_path(&k);
    fs::create_dir_all(ap.parent().unwrap()).unwrap();
    symlink(&outside, &ap).unwrap();
    assert!(matches!(
        store.get_manifest(&k).unwrap(),
        Lookup::Corrupt { .. }
    ));
    assert!(fs::symlink_metadata(&ap).is_err());

    // A shard directory that is a symlink, and junk names.
    let other = Digest::of_bytes(b"x");
    symlink(dir.path(), store.root().join("cas").join(other.shard())).unwrap_or(());
    fs::write(store.root().join("cas").join("README"), b"hi").unwrap();
    fs::write(bp.parent().unwrap().join("not-a-digest"), b"hi").unwrap();

    let report = store.verify(false).unwrap();
    assert!(report.strays.len() >= 3, "{report:?}");
    store.verify(true).unwrap();
    assert!(store.verify(false).unwrap().is_clean());
    assert_eq!(
        fs::read(&outside).unwrap(),
        b"secret",
        "outside file untouched"
    );

    // Putting the real content now works (the planted link is gone).
    assert_eq!(store.put_blob_bytes(b"secret").unwrap().digest, d);
    assert_eq!(store.read_blob(&d).unwrap(), b"secret");
}

#[test]
fn gc_removes_unreferenced_keeps_referenced() {
    let (_d, store) = open();
    let m = manifest(
        &store,
        "t",
        &[("stdout.log", b"kept"), ("copy.log", b"kept")],
    );
    store.put_manifest(&m).unwrap();
    let orphan = store.put_blob_bytes(b"orphan").unwrap();

    let report = store.gc(&GcPolicy::default()).unwrap();
    assert_eq!((report.blobs_removed, report.bytes_freed), (1, 6));
    assert_eq!((report.blobs_kept, report.entries_kept), (1, 1));
    assert!(!store.has_blob(&orphan.digest).unwrap());
    assert!(store.get_manifest(&m.key).unwrap().is_hit());
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn gc_expires_by_age_and_evicts_lru_by_size() {
    let (_d, store) = open();
    let old = manifest(&store, "old", &[("o.log", &[b'o'; 1000])]);
    let mid = manifest(&store, "mid", &[("m.log", &[b'm'; 1000])]);
    let new = manifest(&store, "new", &[("n.log", &[b'n'; 1000])]);
    for m in [&old, &mid, &new] {
        store.put_manifest(m).unwrap();
    }
    set_mtime(&store.ac_path(&old.key), Duration::from_secs(30 * 86400));
    set_mtime(&store.ac_path(&mid.key), Duration::from_secs(3 * 86400));
    set_mtime(&store.ac_path(&new.key), Duration::from_secs(2 * 86400));
    // A hit refreshes `mid`, making `new` the least recently used.
    assert!(store.get_manifest(&mid.key).unwrap().is_hit());

    let policy = GcPolicy {
        max_age: Some(Duration::from_secs(7 * 86400)),
        ..GcPolicy::default()
    };
    let r = store.gc(&policy).unwrap();
    assert_eq!(
        (r.entries_expired, r.blobs_removed, r.entries_kept),
        (1, 1, 2)
    );

    let budget = 1000 + fs::metadata(store.ac_path(&mid.key)).unwrap().len() + 10;
    let r = store
        .gc(&GcPolicy {
            max_bytes: Some(budget),
            ..GcPolicy::default()
        })
        .unwrap();
    assert_eq!((r.entries_evicted, r.blobs_removed), (1, 1), "{r:?}");
    assert!(store.get_manifest(&mid.key).unwrap().is_hit());
    assert_eq!(store.get_manifest(&new.key).unwrap(), Lookup::Miss);
}

#[test]
fn gc_cleans_old_temp_files_only() {
    let (_d, store) = open();
    let tmp = store.root().join("tmp");
    fs::write(tmp.join("crashed.tmp"), b"partial").unwrap();
    set_mtime(&tmp.join("crashed.tmp"), Duration::from_secs(2 * 3600));
    fs::write(tmp.join("inflight.tmp"), b"partial").unwrap();
    let r = store.gc(&GcPolicy::default()).unwrap();
    assert_eq!(r.tmp_removed, 1);
    assert!(tmp.join("inflight.tmp").exists());
}

#[test]
fn gc_waits_for_build_lock() {
    let (_d, store) = open();
    let build = store.build_lock().unwrap();
    // An unreferenced-so-far blob a build is about to commit must survive.
    let m = manifest(
        &store,
        "in-flight",
        &[("stdout.log", b"about to be referenced")],
    );

    let err = store.gc(&GcPolicy::default()).unwrap_err();
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    let err = store.verify(true).unwrap_err();
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");

    let (tx, rx) = mpsc::channel();
    let s2 = store.clone();
    let gc = std::thread::spawn(move || {
        let r = s2.gc(&GcPolicy {
            wait: true,
            ..GcPolicy::default()
        });
        tx.send(()).unwrap();
        r
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        rx.try_recv().is_err(),
        "gc ran while the build lock was held"
    );
    store.put_manifest(&m).unwrap(); // shared lock again: fine alongside our own
    drop(build);
    let r = gc.join().unwrap().unwrap();
    assert_eq!(r.blobs_removed, 0);
    assert!(store.get_manifest(&m.key).unwrap().is_hit());
}

#[test]
fn claims_exclude_each_other_and_report_waiting() {
    let (_d, store) = open();
    let k = key("busy");
    let held = store.claim(&k).unwrap();
    assert!(store.try_claim(&k).unwrap().is_none());
    assert!(store.try_claim(&key("other")).unwrap().is_some());

    let s2 = store.clone();
    let k2 = k.clone();
    let waiter = std::thread::spawn(move || {
        let mut notes = Vec::new();
        let claim = s2
            .claim_reporting(&k2, Duration::from_secs(60), |why, _| {
                notes.push(why.message(&k2))
            })
            .unwrap();
        (claim.lookup().unwrap().is_hit(), notes)
    });
    std::thread::sleep(Duration::from_millis(200));
    let m = manifest(&store, "busy", &[("stdout.log", b"done")]);
    held.commit(&m).unwrap();
    let (hit, notes) = waiter.join().unwrap();
    assert!(hit, "the waiter finds the winner's entry");
    assert_eq!(notes, vec![Waiting::Trial.message(&k)]);
    assert!(notes[0].contains("waiting for another aorta process running trial"));
}

/// A claim taken under a build's lock shares that lock: gc stays out while the claim lives,
/// even once the build has dropped its own handle of it, and gets in after both are gone. A
/// build lock of another store is not shared: the claim takes this store's lock itself.
#[test]
fn a_claim_under_a_build_lock_keeps_gc_out_until_both_are_dropped() {
    let (_d, store) = open();
    let build = store.build_lock().unwrap();
    let k = key("under");
    let claim = store
        .claim_reporting_under(&build, &k, Duration::from_secs(60), |_, _| {
            panic!("nothing holds the key")
        })
        .unwrap();
    assert!(store.try_claim(&k).unwrap().is_none(), "the key is held");
    drop(build);
    let err = store.gc(&GcPolicy::default()).unwrap_err();
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    let m = manifest(&store, "under", &[("stdout.log", b"done")]);
    claim.commit(&m).unwrap();
    store.gc(&GcPolicy::default()).unwrap();
    assert!(store.get_manifest(&k).unwrap().is_hit());

    let (_d2, other) = open();
    let foreign = other.build_lock().unwrap();
    let claim = store
        .claim_reporting_under(&foreign, &key("own"), Duration::from_secs(60), |_, _| {
            panic!("nothing holds the key")
        })
        .unwrap();
    drop(foreign);
    let err = store.gc(&GcPolicy::default()).unwrap_err();
    assert!(
        matches!(err, StoreError::Busy { .. }),
        "the claim holds this store's lock: {err}"
    );
    assert!(
        other.gc(&GcPolicy::default()).is_ok(),
        "the other store is free"
    );
    drop(claim);
}

/// Outputs stored through a claim commit with it; a second output of the same content is the
/// same blob. A blob the claim did not store is still checked: a missing one fails the commit.
#[test]
fn outputs_put_through_a_claim_commit_and_others_are_still_checked() {
    let (d, store) = open();
    let out = d.path().join("out");
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("stdout.log"), b"").unwrap();
    fs::write(out.join("stderr.log"), b"").unwrap();
    let mut claim = store.claim(&key("outs")).unwrap();
    let a = claim.put_blob_file(&out.join("stdout.log")).unwrap();
    let b = claim.put_blob_file(&out.join("stderr.log")).unwrap();
    assert_eq!(a, b);
    assert!(store.has_blob(&a.digest).unwrap());
    let mut m = manifest(&store, "outs", &[]);
    m.outputs.insert("stdout.log".into(), a.clone());
    m.outputs.insert("stderr.log".into(), b);
    claim.commit(&m).unwrap();
    assert!(store.get_manifest(&key("outs")).unwrap().is_hit());

    let mut claim = store.claim(&key("missing")).unwrap();
    let c = claim.put_blob_file(&out.join("stdout.log")).unwrap();
    let mut m = manifest(&store, "missing", &[]);
    m.outputs.insert("stdout.log".into(), c);
    let absent = aorta_store::BlobRef {
        digest: aorta_store::Digest::of_bytes(b"never stored"),
        size: 12,
    };
    m.outputs.insert("stderr.log".into(), absent);
    let err = claim.commit(&m).unwrap_err();
    assert!(matches!(err, StoreError::MissingBlob { .. }), "{err}");
}

#[test]
fn claim_commit_checks_key() {
    let (_d, store) = open();
    let claim = store.claim(&key("a")).unwrap();
    let m = manifest(&store, "b", &[]);
    assert!(matches!(
        claim.commit(&m),
        Err(StoreError::InvalidManifest { .. })
    ));
}

/// A detached claim still excludes other claimants, commits once attached to a handle of its
/// store, and refuses (releasing the key) a handle of another store.
#[test]
fn a_detached_claim_stays_held_and_commits_on_its_store_only() {
    let (_d, store) = open();
    let k = key("staged");
    let detached = store.claim(&k).unwrap().detach();
    assert_eq!(detached.key(), &k);
    assert!(store.try_claim(&k).unwrap().is_none(), "still held");
    let m = manifest(&store, "staged", &[("stdout.log", b"x")]);
    let handle = store.clone();
    let claim = detached.attach(&handle).expect("same store");
    claim.commit(&m).unwrap();
    assert!(store.get_manifest(&k).unwrap().is_hit());

    let (_d2, other) = open();
    let k2 = key("elsewhere");
    let detached = store.claim(&k2).unwrap().detach();
    assert!(detached.attach(&other).is_none());
    assert!(store.try_claim(&k2).unwrap().is_some(), "released");
}
