//! `LocalStore::link_out`: outputs placed as hard links to read-only, hash-verified blobs, and
//! copies where the filesystem will not link (docs/store.md, "Placing outputs").
#![cfg(unix)]

mod common;

use aorta_store::{CacheTier, LocalStore, Lookup, StoreError};
use common::{count, manifest};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use tempfile::TempDir;

fn open_in(dir: &Path) -> LocalStore {
    LocalStore::open(dir.join("store")).unwrap()
}

fn ino(path: &Path) -> (u64, u64) {
    let md = fs::symlink_metadata(path).unwrap();
    (md.dev(), md.ino())
}

#[test]
fn each_output_is_a_read_only_link_to_its_blob() {
    let dir = TempDir::new().unwrap();
    let store = open_in(dir.path());
    let m = manifest(
        &store,
        "t",
        &[("stdout.log", b"ok\n"), ("rank0/trace.json", b"{}")],
    );
    let dest = dir.path().join("staging/t");
    store.link_out(&m, &dest).unwrap();
    for (rel, blob) in &m.outputs {
        let placed = dest.join(rel);
        assert_eq!(ino(&placed), ino(&store.blob_path(&blob.digest)), "{rel}");
        let mode = fs::metadata(&placed).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o444, "{rel}: {mode:o}");
    }
    assert_eq!(fs::read(dest.join("stdout.log")).unwrap(), b"ok\n");
    assert_eq!(fs::read(dest.join("rank0/trace.json")).unwrap(), b"{}");

    // `materialize` still copies: a file of its own.
    let copied = dir.path().join("copied");
    store.materialize(&m, &copied).unwrap();
    let blob = &m.outputs["stdout.log"];
    assert_ne!(
        ino(&copied.join("stdout.log")),
        ino(&store.blob_path(&blob.digest))
    );
    assert_eq!(fs::read(copied.join("stdout.log")).unwrap(), b"ok\n");
}

#[test]
fn a_blob_changed_through_a_link_is_quarantined_not_linked_again() {
    let dir = TempDir::new().unwrap();
    let store = open_in(dir.path());
    let m = manifest(&store, "t", &[("stdout.log", b"the trial's own output\n")]);
    store.put_manifest(&m).unwrap();
    let first = dir.path().join("run1");
    store.link_out(&m, &first).unwrap();

    // What root (who ignores the mode) or a user who made it writable can do in a run dir.
    let edited = first.join("stdout.log");
    fs::set_permissions(&edited, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&edited, b"edited in the run directory\n").unwrap();

    let second = dir.path().join("run2");
    let err = store.link_out(&m, &second).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(
        !second.join("stdout.log").exists(),
        "no bad link left behind"
    );
    let blob = &m.outputs["stdout.log"];
    assert!(!store.has_blob(&blob.digest).unwrap(), "quarantined");
    assert_eq!(count(&store.root().join("quarantine")), 1);
    // The entry now dangles: a miss that re-runs the trial, never a hit.
    assert!(matches!(
        store.get_manifest(&m.key).unwrap(),
        Lookup::Corrupt { .. }
    ));
}

#[test]
fn a_symlink_planted_as_a_blob_is_refused_as_a_copy_refuses_it() {
    let dir = TempDir::new().unwrap();
    let store = open_in(dir.path());
    let m = manifest(&store, "t", &[("stdout.log", b"secret")]);
    let blob = store.blob_path(&m.outputs["stdout.log"].digest);
    let outside = dir.path().join("secret");
    fs::write(&outside, b"secret").unwrap();
    fs::remove_file(&blob).unwrap();
    std::os::unix::fs::symlink(&outside, &blob).unwrap();

    let dest = dir.path().join("out");
    let err = store.link_out(&m, &dest).unwrap_err();
    assert!(matches!(err, StoreError::UnsafeEntry { .. }), "{err}");
    assert!(fs::symlink_metadata(dest.join("stdout.log")).is_err());
    assert_eq!(fs::read(&outside).unwrap(), b"secret");
}

#[test]
fn across_filesystems_outputs_are_copied() {
    // The store on tmpfs, the destination in the build tree's disk.
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "this test needs /dev/shm (tmpfs)");
    let store_dir = TempDir::new_in(shm).unwrap();
    let dest_dir = TempDir::new_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = open_in(store_dir.path());
    let m = manifest(&store, "t", &[("stdout.log", b"ok\n"), ("b.log", b"b\n")]);
    let dest = dest_dir.path().join("out");
    store.link_out(&m, &dest).unwrap();
    let other_fs = ino(store_dir.path()).0 != ino(dest_dir.path()).0;
    for (rel, blob) in &m.outputs {
        let linked = ino(&dest.join(rel)) == ino(&store.blob_path(&blob.digest));
        assert_eq!(
            linked, !other_fs,
            "{rel}: linked {linked}, other fs {other_fs}"
        );
    }
    assert_eq!(fs::read(dest.join("stdout.log")).unwrap(), b"ok\n");
    assert_eq!(fs::read(dest.join("b.log")).unwrap(), b"b\n");
}

#[test]
fn gc_counts_a_linked_blob_as_still_on_disk_and_the_run_dir_keeps_it() {
    let dir = TempDir::new().unwrap();
    let store = open_in(dir.path());
    let m = manifest(
        &store,
        "t",
        &[("stdout.log", b"linked\n"), ("own.log", b"own\n")],
    );
    store.put_manifest(&m).unwrap();
    let run = dir.path().join("run");
    store.link_out(&m, &run).unwrap();
    fs::remove_file(run.join("own.log")).unwrap();
    store.invalidate(&m.key).unwrap();
    let r = store.gc(&aorta_store::GcPolicy::default()).unwrap();
    assert_eq!(r.blobs_removed, 2, "{r:?}");
    assert_eq!((r.bytes_freed, r.bytes_still_linked), (4, 7), "{r:?}");
    assert_eq!(fs::read(run.join("stdout.log")).unwrap(), b"linked\n");
}
