//! The remote cache around a build: before scheduling, pull every key the local store misses
//! (verified downloads, committed locally, so the schedule sees plain local hits); afterwards,
//! push the trials this build executed (`--remote-cache-mode readwrite`). Neither step can fail
//! a build: aorta-remote turns every problem into a miss or a skipped upload.

use aorta_remote::{RemoteCache, Tiered};
use aorta_store::{Key, LocalStore};
use std::sync::Arc;

fn sorted<'a>(it: impl Iterator<Item = &'a Key>) -> Vec<Key> {
    let mut keys: Vec<Key> = it.cloned().collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Read-through: returns how many trials came from the remote.
pub(crate) fn pull<'a>(
    store: &LocalStore,
    remote: &Arc<RemoteCache>,
    keys: impl Iterator<Item = &'a Key>,
) -> usize {
    let t0 = std::time::Instant::now();
    let n = Tiered::new(remote.clone()).pull_many(store, &sorted(keys));
    crate::timing("remote cache pull", t0);
    n
}

/// Write-back of the executed trials' entries, re-verified from the local store.
pub(crate) fn push<'a>(
    store: &LocalStore,
    remote: &Arc<RemoteCache>,
    executed: impl Iterator<Item = &'a Key>,
) -> usize {
    let t0 = std::time::Instant::now();
    let n = Tiered::new(remote.clone()).push_many(store, &sorted(executed));
    crate::timing("remote cache push", t0);
    n
}
