//! Parallel trials with GPU slots: at most `jobs` trials at once, each GPU trial with its own
//! devices.
//!
//! [`Pool`] is the engine's interface: it submits trials as their dependencies finish and
//! collects them as they complete. Workers are plain std threads (a trial blocks on its child
//! for minutes; a work-stealing pool is the wrong tool). Queued trials start first-fit in
//! submission order: a trial that fits the free devices may overtake an older one waiting for
//! more GPUs than are free.
//!
//! A slot is held by a trial's process, not by the work around it: a job may give its slot and
//! devices back early ([`SlotRelease`]) once its process has exited, and finish (classify the
//! logs, store the outputs) while the next trial already runs. So the pool has more workers
//! than slots: `jobs` that run processes and two per slot (at most one per core) that finish.
//!
//! Nor is a slot held by the work before the process: a staged job
//! ([`Pool::submit_staged`]) has a `prepare` step (claim the key, make the staging directory)
//! that an idle worker runs ahead, while every slot is busy, so the job's process starts the
//! moment a slot is given back. At most `jobs` jobs are prepared ahead, and a job being
//! prepared keeps its place in the queue (it holds one free slot for itself, so a later job
//! overtakes it only where another slot is free).

use crate::run::ProcessSpec;
use std::collections::{BTreeMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The machine's capacity: how many trials at once, and which GPU ids exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    jobs: usize,
    gpus: Vec<String>,
    trials_per_gpu: usize,
}

impl Slots {
    /// `jobs` (at least 1) concurrent trials; `gpus` the device ids to hand out (duplicates
    /// dropped). GPUs are exclusive: one trial per device.
    pub fn new(jobs: usize, gpus: Vec<String>) -> Self {
        let mut unique: Vec<String> = Vec::with_capacity(gpus.len());
        for g in gpus {
            if !unique.contains(&g) {
                unique.push(g);
            }
        }
        Slots {
            jobs: jobs.max(1),
            gpus: unique,
            trials_per_gpu: 1,
        }
    }

    /// Shared mode: up to `trials_per_gpu` (at least 1) trials may use one device at once.
    /// A trial still never gets the same device twice.
    pub fn share_gpus(mut self, trials_per_gpu: usize) -> Self {
        self.trials_per_gpu = trials_per_gpu.max(1);
        self
    }

    pub fn jobs(&self) -> usize {
        self.jobs
    }

    pub fn gpus(&self) -> &[String] {
        &self.gpus
    }

    pub fn trials_per_gpu(&self) -> usize {
        self.trials_per_gpu
    }

    /// Whether `request` can ever be granted.
    pub fn check(&self, request: SlotRequest) -> Result<(), SlotError> {
        if request.gpus > self.gpus.len() {
            return Err(SlotError::TooManyGpus {
                requested: request.gpus,
                available: self.gpus.len(),
            });
        }
        Ok(())
    }
}

/// What one trial needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotRequest {
    /// Devices (0 for a CPU trial).
    pub gpus: usize,
}

impl SlotRequest {
    pub fn cpu() -> Self {
        SlotRequest { gpus: 0 }
    }

    pub fn gpus(n: usize) -> Self {
        SlotRequest { gpus: n }
    }
}

/// A request that can never be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error("a trial asks for {requested} GPU(s) but only {available} are configured")]
    TooManyGpus { requested: usize, available: usize },
}

/// What a running trial was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    slot: usize,
    gpus: Vec<String>,
}

impl Lease {
    /// The worker slot (0..jobs) running the trial; unique among running trials (handy for
    /// per-slot ports or scratch directories).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The device ids granted, in the order configured.
    pub fn gpus(&self) -> &[String] {
        &self.gpus
    }

    /// `CUDA_VISIBLE_DEVICES` and `HIP_VISIBLE_DEVICES` (comma-joined ids) for a GPU trial;
    /// empty for a CPU trial, which keeps whatever visibility it inherits.
    pub fn env(&self) -> BTreeMap<String, String> {
        if self.gpus.is_empty() {
            return BTreeMap::new();
        }
        let ids = self.gpus.join(",");
        ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
            .into_iter()
            .map(|k| (k.to_string(), ids.clone()))
            .collect()
    }

    /// Merges [`env`](Self::env) into the spec; the lease wins over a cell's own value.
    pub fn apply(&self, spec: &mut ProcessSpec) {
        spec.env.extend(self.env());
    }
}

/// Device bookkeeping.
#[derive(Debug)]
struct Devices {
    load: Vec<usize>,
    cap: usize,
}

impl Devices {
    /// Whether `n` devices have room.
    fn fits(&self, n: usize) -> bool {
        self.load.iter().filter(|&&l| l < self.cap).count() >= n
    }

    /// The `n` least-loaded devices with room, or `None`.
    fn acquire(&mut self, n: usize) -> Option<Vec<usize>> {
        let mut free: Vec<usize> = (0..self.load.len())
            .filter(|&i| self.load[i] < self.cap)
            .collect();
        if free.len() < n {
            return None;
        }
        free.sort_by_key(|&i| (self.load[i], i));
        free.truncate(n);
        free.sort_unstable();
        for &i in &free {
            self.load[i] += 1;
        }
        Some(free)
    }

    fn release(&mut self, ids: &[usize]) {
        for &i in ids {
            self.load[i] = self.load[i].saturating_sub(1);
        }
    }
}

/// A queued job: fresh, being prepared ahead by a worker, or ready to start.
enum Stage<J> {
    Fresh(J),
    Preparing,
    Ready(J),
}

struct Entry<J> {
    /// Finds the entry again after its preparation (the queue shifts meanwhile).
    seq: u64,
    request: SlotRequest,
    stage: Stage<J>,
    /// Prepared (or being prepared) ahead: counts against [`State::ahead`].
    ahead: bool,
}

/// What a job's `prepare` step gave: the job to start, or its result already (e.g. a trial
/// another process finished meanwhile).
pub(crate) enum Prepared<J, O> {
    Ready(J),
    Done(O),
}

/// What an idle worker does next.
enum Action<J> {
    /// Start a job on a slot (preparing it first if it is fresh).
    Start {
        job: J,
        fresh: bool,
        slot: usize,
        ids: Vec<usize>,
    },
    /// Prepare a fresh job ahead, without a slot.
    Prepare { seq: u64, job: J },
}

struct State<J, O> {
    queue: VecDeque<Entry<J>>,
    next_seq: u64,
    /// Entries prepared or being prepared ahead; at most `jobs`.
    ahead: usize,
    ahead_limit: usize,
    devices: Devices,
    /// Slot numbers not held by a running process (see [`Lease::slot`]).
    free_slots: Vec<usize>,
    /// Jobs started and not yet returned, holding a slot or finishing after giving it back.
    running: usize,
    done: VecDeque<O>,
    shutdown: bool,
}

struct Shared<J, O> {
    state: Mutex<State<J, O>>,
    /// Wakes one idle worker: a job was queued or a slot given back. Workers are alike, so one
    /// wake-up per event suffices (a wake-up for every thread per trial cost more than the
    /// trial's own bookkeeping once the pool had a worker per core).
    cv: Condvar,
    /// Wakes the collector: a result is ready.
    done_cv: Condvar,
    gpus: Vec<String>,
}

impl<J, O> Shared<J, O> {
    fn new(slots: &Slots) -> Self {
        Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                devices: Devices {
                    load: vec![0; slots.gpus.len()],
                    cap: slots.trials_per_gpu,
                },
                free_slots: (0..slots.jobs).rev().collect(),
                next_seq: 0,
                ahead: 0,
                ahead_limit: slots.jobs,
                running: 0,
                done: VecDeque::new(),
                shutdown: false,
            }),
            cv: Condvar::new(),
            done_cv: Condvar::new(),
            gpus: slots.gpus.clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<J, O>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a job; `fresh` jobs have a prepare step still to run.
    fn push(st: &mut State<J, O>, request: SlotRequest, job: J, fresh: bool) {
        let seq = st.next_seq;
        st.next_seq += 1;
        let stage = if fresh {
            Stage::Fresh(job)
        } else {
            Stage::Ready(job)
        };
        st.queue.push_back(Entry {
            seq,
            request,
            stage,
            ahead: false,
        });
    }

    /// What an idle worker can do now, taken out of the queue under the lock: start the first
    /// job (in queue order) that fits a free slot and devices, else prepare the first fresh
    /// job ahead if fewer than `jobs` are.
    fn next_action(st: &mut State<J, O>) -> Option<Action<J>> {
        let mut free = st.free_slots.len();
        let mut start = None;
        for (i, e) in st.queue.iter().enumerate() {
            if free == 0 {
                break;
            }
            if !st.devices.fits(e.request.gpus) {
                continue;
            }
            if matches!(e.stage, Stage::Preparing) {
                // It keeps its place: the slot it will want is not handed to a later job.
                free -= 1;
                continue;
            }
            start = Some(i);
            break;
        }
        if let Some(i) = start {
            let e = st.queue.remove(i).expect("index in range");
            let ids = st.devices.acquire(e.request.gpus).expect("fits");
            let slot = st.free_slots.pop().expect("a free slot");
            st.running += 1;
            if e.ahead {
                st.ahead -= 1;
            }
            let (job, fresh) = match e.stage {
                Stage::Fresh(j) => (j, true),
                Stage::Ready(j) => (j, false),
                Stage::Preparing => unreachable!("skipped above"),
            };
            return Some(Action::Start {
                job,
                fresh,
                slot,
                ids,
            });
        }
        if st.ahead >= st.ahead_limit {
            return None;
        }
        let e = st
            .queue
            .iter_mut()
            .find(|e| matches!(e.stage, Stage::Fresh(_)))?;
        let Stage::Fresh(job) = std::mem::replace(&mut e.stage, Stage::Preparing) else {
            unreachable!("found fresh")
        };
        e.ahead = true;
        st.ahead += 1;
        Some(Action::Prepare { seq: e.seq, job })
    }

    /// Puts a job prepared ahead back in its place, or publishes its early result.
    fn prepared_ahead(&self, seq: u64, prepared: Prepared<J, O>) {
        let mut st = self.lock();
        let Some(i) = st.queue.iter().position(|e| e.seq == seq) else {
            return; // the queue was cleared (shutdown): the job is dropped
        };
        match prepared {
            Prepared::Ready(job) => st.queue[i].stage = Stage::Ready(job),
            Prepared::Done(out) => {
                st.queue.remove(i);
                st.ahead -= 1;
                st.done.push_back(out);
                self.done_cv.notify_all();
            }
        }
        // A slot may have been given back while it was prepared, with no other worker awake
        // to start it: this worker looks again before it sleeps, so nothing more to wake.
    }

    /// One worker: start the first queued job that fits a free slot (preparing it first if
    /// nobody has), or prepare one ahead; run it, publish. With `early`, the job gets a
    /// [`SlotRelease`] that gives the slot back; without, the slot is given back when the job
    /// returns.
    fn work(
        &self,
        early: Option<&Arc<dyn GiveBack>>,
        prepare: impl Fn(J) -> Prepared<J, O>,
        exec: impl Fn(J, Lease, SlotRelease) -> O,
    ) {
        loop {
            let action = {
                let mut st = self.lock();
                loop {
                    if st.shutdown {
                        return;
                    }
                    if let Some(a) = Self::next_action(&mut st) {
                        break a;
                    }
                    st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let (job, fresh, slot, ids) = match action {
                Action::Prepare { seq, job } => {
                    self.prepared_ahead(seq, prepare(job));
                    continue;
                }
                Action::Start {
                    job,
                    fresh,
                    slot,
                    ids,
                } => (job, fresh, slot, ids),
            };
            let job = if fresh {
                match prepare(job) {
                    Prepared::Ready(job) => Some(job),
                    Prepared::Done(out) => {
                        self.finish(slot, &ids, true, out);
                        None
                    }
                }
            } else {
                Some(job)
            };
            let Some(job) = job else { continue };
            let lease = Lease {
                slot,
                gpus: ids.iter().map(|&i| self.gpus[i].clone()).collect(),
            };
            let held = early.map(|giver| (Arc::clone(giver), slot, ids.clone()));
            let out = exec(job, lease, SlotRelease { held });
            self.finish(slot, &ids, early.is_none(), out);
        }
    }

    /// Publishes a job's result; with `give_back`, its slot and devices go back under the same
    /// lock.
    fn finish(&self, slot: usize, ids: &[usize], give_back: bool, out: O) {
        let mut st = self.lock();
        if give_back {
            st.devices.release(ids);
            st.free_slots.push(slot);
            self.cv.notify_one();
        }
        st.running -= 1;
        st.done.push_back(out);
        self.done_cv.notify_all();
    }
}

/// What a [`SlotRelease`] calls: the pool's slot bookkeeping, behind its lock.
trait GiveBack: Send + Sync {
    fn give_back(&self, slot: usize, ids: &[usize]);
}

impl<J: Send, O: Send> GiveBack for Shared<J, O> {
    fn give_back(&self, slot: usize, ids: &[usize]) {
        let mut st = self.lock();
        st.devices.release(ids);
        st.free_slots.push(slot);
        self.cv.notify_one();
    }
}

/// A running job's hold on its slot and devices. [`release`](Self::release) gives them to the
/// next queued job while this one goes on (once its process has exited, so a device is never
/// shared against the request); dropping it releases too, so a job that returns or panics
/// never keeps its slot.
pub struct SlotRelease {
    held: Option<(Arc<dyn GiveBack>, usize, Vec<usize>)>,
}

impl SlotRelease {
    /// Gives the slot and devices back now; later calls do nothing.
    pub fn release(&mut self) {
        if let Some((giver, slot, ids)) = self.held.take() {
            giver.give_back(slot, &ids);
        }
    }
}

impl Drop for SlotRelease {
    fn drop(&mut self) {
        self.release();
    }
}

type RunJob<R> = Box<dyn FnOnce(Lease, SlotRelease) -> R + Send>;
type PrepareJob<R> = Box<dyn FnOnce() -> Result<RunJob<R>, R> + Send>;

/// A pool job: to run on a slot, or to prepare first.
enum PoolJob<R> {
    Run(RunJob<R>),
    Staged(PrepareJob<R>),
}

type PoolOut<I, R> = (I, std::thread::Result<R>);
type PoolShared<I, R> = Shared<(I, PoolJob<R>), PoolOut<I, R>>;

/// A pool of `jobs` workers for trials submitted one by one (as a DAG's dependencies finish).
///
/// ```
/// use aorta_exec::{Pool, Slots, SlotRequest};
/// let pool = Pool::new(Slots::new(2, vec!["0".into(), "1".into()]));
/// pool.submit("a", SlotRequest::gpus(1), |lease| lease.gpus().to_vec()).unwrap();
/// pool.submit("b", SlotRequest::cpu(), |lease| lease.gpus().to_vec()).unwrap();
/// let mut got = vec![pool.next_completed().unwrap(), pool.next_completed().unwrap()];
/// got.sort();
/// assert_eq!(got.len(), 2);
/// assert!(pool.next_completed().is_none());
/// ```
pub struct Pool<I, R> {
    slots: Slots,
    shared: Arc<PoolShared<I, R>>,
    workers: Vec<JoinHandle<()>>,
}

impl<I: Send + 'static, R: Send + 'static> Pool<I, R> {
    pub fn new(slots: Slots) -> Self {
        let shared = Arc::new(Shared::new(&slots));
        let giver: Arc<dyn GiveBack> = shared.clone();
        // `jobs` workers hold the slots; the others finish jobs that gave theirs back: two per
        // slot keep up when finishing takes up to twice as long as a trial, no more than cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let finishers = (2 * slots.jobs).min(cores).max(1);
        let workers = (0..slots.jobs + finishers)
            .map(|n| {
                let shared = Arc::clone(&shared);
                let giver = Arc::clone(&giver);
                std::thread::Builder::new()
                    .name(format!("aorta-worker-{n}"))
                    .spawn(move || {
                        shared.work(
                            Some(&giver),
                            |(id, job): (I, PoolJob<R>)| match job {
                                PoolJob::Run(_) => Prepared::Ready((id, job)),
                                PoolJob::Staged(prepare) => {
                                    match panic::catch_unwind(AssertUnwindSafe(prepare)) {
                                        Ok(Ok(run)) => Prepared::Ready((id, PoolJob::Run(run))),
                                        Ok(Err(out)) => Prepared::Done((id, Ok(out))),
                                        Err(p) => Prepared::Done((id, Err(p))),
                                    }
                                }
                            },
                            |(id, job): (I, PoolJob<R>), lease, release| {
                                let PoolJob::Run(job) = job else {
                                    unreachable!("staged jobs are prepared before they start")
                                };
                                (
                                    id,
                                    panic::catch_unwind(AssertUnwindSafe(move || {
                                        job(lease, release)
                                    })),
                                )
                            },
                        )
                    })
                    .expect("spawn pool worker")
            })
            .collect();
        Pool {
            slots,
            shared,
            workers,
        }
    }

    /// Queues a job; it starts once a worker and the requested devices are free. A request
    /// that can never be granted is refused here rather than waiting forever.
    pub fn submit(
        &self,
        id: I,
        request: SlotRequest,
        job: impl FnOnce(Lease) -> R + Send + 'static,
    ) -> Result<(), SlotError> {
        self.submit_releasing(id, request, move |lease, _release| job(lease))
    }

    /// As [`submit`](Self::submit), for a job that gives its slot back before it returns
    /// ([`SlotRelease::release`]), so the next job starts while it finishes.
    pub fn submit_releasing(
        &self,
        id: I,
        request: SlotRequest,
        job: impl FnOnce(Lease, SlotRelease) -> R + Send + 'static,
    ) -> Result<(), SlotError> {
        self.enqueue(id, request, PoolJob::Run(Box::new(job)))
    }

    /// As [`submit_releasing`](Self::submit_releasing), for a job with a first step that
    /// needs no slot: `prepare` runs on an idle worker while every slot is busy (or on the
    /// slot, if one is free when the job's turn comes); `Err` is the job's result already, and
    /// the job never takes a slot. A prepared job that never runs (the pool is dropped) is
    /// dropped, so what `P` holds should clean up after itself.
    pub fn submit_staged<P: Send + 'static>(
        &self,
        id: I,
        request: SlotRequest,
        prepare: impl FnOnce() -> Result<P, R> + Send + 'static,
        run: impl FnOnce(P, Lease, SlotRelease) -> R + Send + 'static,
    ) -> Result<(), SlotError> {
        let staged: PrepareJob<R> = Box::new(move || {
            prepare()
                .map(|p| -> RunJob<R> { Box::new(move |lease, release| run(p, lease, release)) })
        });
        self.enqueue(id, request, PoolJob::Staged(staged))
    }

    fn enqueue(&self, id: I, request: SlotRequest, job: PoolJob<R>) -> Result<(), SlotError> {
        self.slots.check(request)?;
        let fresh = matches!(job, PoolJob::Staged(_));
        let mut st = self.shared.lock();
        Shared::push(&mut st, request, (id, job), fresh);
        self.shared.cv.notify_one();
        Ok(())
    }

    /// Blocks until a job completes and returns it; `None` when nothing is queued, running or
    /// left to collect. A job that panicked re-raises its panic here.
    pub fn next_completed(&self) -> Option<(I, R)> {
        let mut st = self.shared.lock();
        loop {
            if let Some((id, res)) = st.done.pop_front() {
                drop(st);
                return Some((id, res.unwrap_or_else(|p| panic::resume_unwind(p))));
            }
            if st.queue.is_empty() && st.running == 0 {
                return None;
            }
            st = self
                .shared
                .done_cv
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Jobs submitted and not yet returned by `next_completed`.
    pub fn pending(&self) -> usize {
        let st = self.shared.lock();
        st.queue.len() + st.running + st.done.len()
    }

    pub fn slots(&self) -> &Slots {
        &self.slots
    }
}

impl<I, R> Drop for Pool<I, R> {
    /// Drops queued jobs, waits for running ones to finish, and joins the workers.
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.shutdown = true;
            st.queue.clear();
            st.ahead = 0;
            self.shared.cv.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Runs every item with its request through `slots` and returns the results in input order
/// (a batch convenience over the same scheduler; `f` may borrow). A panic in `f` is re-raised.
pub fn run_all<T, R, F>(
    items: Vec<(SlotRequest, T)>,
    slots: &Slots,
    f: F,
) -> Result<Vec<R>, SlotError>
where
    T: Send,
    R: Send,
    F: Fn(T, Lease) -> R + Sync,
{
    for (req, _) in &items {
        slots.check(*req)?;
    }
    let n = items.len();
    let shared: Shared<(usize, T), (usize, std::thread::Result<R>)> = Shared::new(slots);
    {
        let mut st = shared.lock();
        for (i, (req, t)) in items.into_iter().enumerate() {
            Shared::push(&mut st, req, (i, t), false);
        }
    }
    let mut results: Vec<Option<R>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        for _ in 0..slots.jobs.min(n.max(1)) {
            let (shared, f) = (&shared, &f);
            s.spawn(move || {
                shared.work(
                    None,
                    Prepared::Ready,
                    |(i, t): (usize, T), lease, _release| {
                        (i, panic::catch_unwind(AssertUnwindSafe(|| f(t, lease))))
                    },
                )
            });
        }
        let mut st = shared.lock();
        let mut collected = 0;
        let mut panicked = None;
        while collected < n {
            if let Some((i, res)) = st.done.pop_front() {
                collected += 1;
                match res {
                    Ok(r) => results[i] = Some(r),
                    Err(p) => panicked = panicked.or(Some(p)),
                }
                continue;
            }
            st = shared.done_cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.shutdown = true;
        shared.cv.notify_all();
        drop(st);
        if let Some(p) = panicked {
            panic::resume_unwind(p);
        }
    });
    Ok(results
        .into_iter()
        .map(|r| r.expect("every item completed"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_exclusive_and_least_loaded() {
        let mut d = Devices {
            load: vec![0; 3],
            cap: 1,
        };
        assert_eq!(d.acquire(2), Some(vec![0, 1]));
        assert_eq!(d.acquire(2), None);
        assert_eq!(d.acquire(1), Some(vec![2]));
        d.release(&[0]);
        assert_eq!(d.acquire(1), Some(vec![0]));
        let mut shared = Devices {
            load: vec![0; 2],
            cap: 2,
        };
        assert_eq!(shared.acquire(1), Some(vec![0]));
        assert_eq!(shared.acquire(1), Some(vec![1]));
        assert_eq!(shared.acquire(2), Some(vec![0, 1]));
        assert_eq!(shared.acquire(1), None);
    }

    #[test]
    fn lease_env() {
        let l = Lease {
            slot: 0,
            gpus: vec!["2".into(), "5".into()],
        };
        let env = l.env();
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "2,5");
        assert_eq!(env["HIP_VISIBLE_DEVICES"], "2,5");
        assert!(Lease {
            slot: 1,
            gpus: vec![]
        }
        .env()
        .is_empty());
        let mut spec = ProcessSpec::new(["true"], "/dev/null", "/dev/null");
        spec.env.insert("CUDA_VISIBLE_DEVICES".into(), "7".into());
        l.apply(&mut spec);
        assert_eq!(spec.env["CUDA_VISIBLE_DEVICES"], "2,5");
    }

    #[test]
    fn slots_dedupe_and_clamp() {
        let s = Slots::new(0, vec!["0".into(), "0".into(), "1".into()]);
        assert_eq!(s.jobs(), 1);
        assert_eq!(s.gpus(), ["0", "1"]);
        assert_eq!(
            s.check(SlotRequest::gpus(3)),
            Err(SlotError::TooManyGpus {
                requested: 3,
                available: 2
            })
        );
    }
}
