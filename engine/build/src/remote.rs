//! The remote cache around a build: before scheduling, pull every key the local store misses
//! (verified downloads, committed locally, so the schedule sees plain local hits); afterwards,
//! push the trials this build executed (`--remote-cache-mode readwrite`). Neither step can fail
//! a build: aorta-remote turns every problem into a miss or a skipped upload.

use aorta_graph::PlannedTrial;
use aorta_remote::{RemoteCache, Tiered};
use aorta_store::{Key, LocalStore};
use std::sync::Arc;

fn keys<'a>(it: impl Iterator<Item = &'a str>) -> Vec<Key> {
    let mut keys: Vec<Key> = it.filter_map(|k| Key::parse(k).ok()).collect();
    keys.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
    keys.dedup();
    keys
}

/// Read-through: returns how many trials came from the remote.
pub(crate) fn pull(store: &LocalStore, remote: &Arc<RemoteCache>, planned: &[PlannedTrial]) -> usize {
    let t0 = std::time::Instant::now();
    let n = Tiered::new(remote.clone()).pull_many(store, &keys(planned.iter().map(|p| p.key.0.as_str())));
    crate::timing("remote cache pull", t0);
    n
}

/// Write-back of the executed trials' entries, re-verified from the local store.
pub(crate) fn push<'a>(store: &LocalStore, remote: &Arc<RemoteCache>, executed: impl Iterator<Item = &'a str>) -> usize {
    let t0 = std::time::Instant::now();
    let n = Tiered::new(remote.clone()).push_many(store, &keys(executed));
    crate::timing("remote cache push", t0);
    n
}
