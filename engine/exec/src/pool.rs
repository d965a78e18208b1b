//! [`Pool`]: the engine's interface to the slots. It takes trials as the DAG's dependencies
//! finish and returns them as they complete. Workers are plain std threads (a trial blocks on
//! its child for minutes; a work-stealing pool is the wrong tool). Queued trials start
//! first-fit in submission order: a trial that fits the free devices may overtake an older one
//! waiting for more GPUs than are free.
//!
//! A slot is held by a trial's process, not by the work around it:
//!
//! - after: a job gives its slot and devices back ([`SlotRelease`]) once its process has
//!   exited, and finishes (classify the logs, store the outputs) while the next trial runs;
//! - before: a staged job ([`Pool::submit_staged`]) has a `prepare` step (claim the key, make
//!   the staging directory) that an idle worker runs ahead while every slot is busy; at most
//!   `jobs + 1` jobs are prepared ahead (with only `jobs`, the job that takes a freed slot was
//!   the only one ready, and its successor's preparation raced the new process: on a 2-core
//!   VM about one trial of `true` in ten then found its successor unprepared), and a job being
//!   prepared keeps its place in the queue (it holds one free slot for itself, so a later job
//!   overtakes it only where another slot is free);
//! - in between: a prepared job is started (its process spawned) by the thread that gives the
//!   slot back, inside [`SlotRelease::release`], and an idle worker is woken to wait for it.
//!   Waking a worker to spawn it instead cost a thread wake-up (70 µs on a 2-core VM) before
//!   the process started. The releasing thread does so only while a worker is idle to take
//!   the wait over, so a started process is never left without a thread enforcing its
//!   timeout. It then yields its core once, so that the woken waiter runs first and blocks on
//!   the process: queued behind the releasing thread's own finishing work (the new process
//!   holding the other core of a 2-core machine), the waiter saw the exit late, and the gap
//!   from one trial's exit to the next one's spawn had a 90th percentile of 349 µs against
//!   the spawn floor's 249 µs (267 µs with the yield; docs/benchmarks.md).
//!
//! So the pool has more workers than slots: `jobs` that wait for processes and two per slot
//! (at most one per core) that finish and prepare.

use crate::slots::{Devices, Lease, SlotError, SlotRequest, Slots};
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

type FinishJob<R> = Box<dyn FnOnce(SlotRelease) -> R + Send>;
type StartJob<R> = Box<dyn FnOnce(Lease) -> FinishJob<R> + Send>;
type RunJob<R> = Box<dyn FnOnce(Lease, SlotRelease) -> R + Send>;
type PrepareJob<R> = Box<dyn FnOnce() -> Result<StartJob<R>, R> + Send>;

/// A queued job.
enum Stage<R> {
    /// [`Pool::submit_releasing`]: the whole job on one worker, with its slot.
    Run(RunJob<R>),
    /// [`Pool::submit_staged`], not prepared yet.
    Fresh(PrepareJob<R>),
    /// Being prepared ahead by a worker.
    Preparing,
    /// Prepared: started by whichever thread has a slot for it.
    Ready(StartJob<R>),
}

struct Entry<I, R> {
    /// Finds the entry again after its preparation (the queue shifts meanwhile).
    seq: u64,
    id: I,
    request: SlotRequest,
    stage: Stage<R>,
    /// Prepared (or being prepared) ahead: counts against [`State::ahead`].
    ahead: bool,
}

/// What an idle worker does next.
enum Action<I, R> {
    /// Wait for a started job's process and finish the job.
    Finish(I, FinishJob<R>, SlotRelease),
    /// Prepare a fresh job ahead, without a slot.
    Prepare { seq: u64, job: PrepareJob<R> },
    /// Run a job on a slot (preparing and starting it first where it needs that).
    Start(I, Stage<R>, Lease, SlotRelease),
}

type Out<I, R> = (I, std::thread::Result<R>);

struct State<I, R> {
    queue: VecDeque<Entry<I, R>>,
    /// Jobs started on a releasing thread, for a worker to wait for.
    started: VecDeque<(I, FinishJob<R>, SlotRelease)>,
    next_seq: u64,
    /// Entries prepared or being prepared ahead; at most `ahead_limit` (`jobs + 1`).
    ahead: usize,
    ahead_limit: usize,
    devices: Devices,
    /// Slot numbers not held by a running process (see [`Lease::slot`]).
    free_slots: Vec<usize>,
    /// Workers waiting for work.
    idle: usize,
    /// Jobs started and not yet returned, holding a slot or finishing after giving it back.
    running: usize,
    done: VecDeque<Out<I, R>>,
    shutdown: bool,
}

struct Shared<I, R> {
    state: Mutex<State<I, R>>,
    /// Wakes one idle worker: a job was queued, started or prepared, or a slot given back.
    /// Workers are alike, so one wake-up per event suffices (a wake-up for every thread per
    /// trial cost more than the trial's own bookkeeping once the pool had a worker per core).
    cv: Condvar,
    /// Wakes the collector: a result is ready.
    done_cv: Condvar,
    gpus: Vec<String>,
    /// Handed to each [`SlotRelease`]; weak, so a release outliving the pool does nothing.
    me: Weak<Shared<I, R>>,
}

impl<I: Send + 'static, R: Send + 'static> Shared<I, R> {
    fn lock(&self) -> MutexGuard<'_, State<I, R>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The first queued entry (in queue order) that fits a free slot and devices, unless an
    /// entry being prepared holds the last free slot before it.
    fn first_startable(st: &State<I, R>) -> Option<usize> {
        let mut free = st.free_slots.len();
        for (i, e) in st.queue.iter().enumerate() {
            if free == 0 {
                return None;
            }
            if !st.devices.fits(e.request.gpus) {
                continue;
            }
            if matches!(e.stage, Stage::Preparing) {
                free -= 1;
                continue;
            }
            return Some(i);
        }
        None
    }

    /// Takes entry `i` out of the queue with a slot and its devices.
    fn take(&self, st: &mut State<I, R>, i: usize) -> (I, Stage<R>, Lease, SlotRelease) {
        let e = st.queue.remove(i).expect("index in range");
        let ids = st.devices.acquire(e.request.gpus).expect("fits");
        let slot = st.free_slots.pop().expect("a free slot");
        st.running += 1;
        if e.ahead {
            st.ahead -= 1;
        }
        let lease = Lease {
            slot,
            gpus: ids.iter().map(|&i| self.gpus[i].clone()).collect(),
        };
        let release = SlotRelease {
            held: Some((self.me.clone(), slot, ids)),
        };
        (e.id, e.stage, lease, release)
    }

    /// What an idle worker can do now, taken out of the state under the lock: wait for a
    /// started job, start the first job that fits, or prepare the first fresh job ahead.
    fn next_action(&self, st: &mut State<I, R>) -> Option<Action<I, R>> {
        if let Some((id, finish, release)) = st.started.pop_front() {
            return Some(Action::Finish(id, finish, release));
        }
        if let Some(i) = Self::first_startable(st) {
            let (id, stage, lease, release) = self.take(st, i);
            return Some(Action::Start(id, stage, lease, release));
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

    /// One worker's loop; it ends at shutdown once no started job is left to wait for.
    fn work(&self) {
        loop {
            let action = {
                let mut st = self.lock();
                loop {
                    if let Some(a) = self.next_action(&mut st) {
                        break a;
                    }
                    if st.shutdown {
                        return;
                    }
                    st.idle += 1;
                    st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                    st.idle -= 1;
                }
            };
            match action {
                Action::Finish(id, finish, release) => {
                    let out = panic::catch_unwind(AssertUnwindSafe(move || finish(release)));
                    self.publish(id, out);
                }
                Action::Prepare { seq, job } => {
                    let prepared = panic::catch_unwind(AssertUnwindSafe(job));
                    self.prepared_ahead(seq, prepared);
                }
                Action::Start(id, stage, lease, release) => {
                    let out = panic::catch_unwind(AssertUnwindSafe(move || match stage {
                        Stage::Run(run) => run(lease, release),
                        Stage::Ready(start) => start(lease)(release),
                        Stage::Fresh(prepare) => match prepare() {
                            Ok(start) => start(lease)(release),
                            // Dropping `release` gives the slot back.
                            Err(out) => out,
                        },
                        Stage::Preparing => unreachable!("never taken while preparing"),
                    }));
                    self.publish(id, out);
                }
            }
        }
    }

    /// Puts a job prepared ahead back in its place, or publishes its early result. The queue
    /// may have been cleared meanwhile (shutdown): the job is then dropped.
    fn prepared_ahead(&self, seq: u64, prepared: std::thread::Result<Result<StartJob<R>, R>>) {
        let mut st = self.lock();
        let Some(i) = st.queue.iter().position(|e| e.seq == seq) else {
            return;
        };
        match prepared {
            Ok(Ok(start)) => st.queue[i].stage = Stage::Ready(start),
            Ok(Err(out)) => self.done_early(&mut st, i, Ok(out)),
            Err(p) => self.done_early(&mut st, i, Err(p)),
        }
        // A slot may have been given back meanwhile with the entry blocking it: this worker
        // looks again before it sleeps, so there is nobody else to wake.
    }

    fn done_early(&self, st: &mut State<I, R>, i: usize, out: std::thread::Result<R>) {
        let e = st.queue.remove(i).expect("index in range");
        if e.ahead {
            st.ahead -= 1;
        }
        st.done.push_back((e.id, out));
        self.done_cv.notify_all();
    }

    fn publish(&self, id: I, out: std::thread::Result<R>) {
        let mut st = self.lock();
        st.running -= 1;
        st.done.push_back((id, out));
        self.done_cv.notify_all();
    }

    /// A slot and its devices come back. If the job that gets them is prepared and a worker is
    /// idle to wait for it, it is started here, on the releasing thread; otherwise a worker is
    /// woken to start it.
    fn give_back(&self, slot: usize, ids: &[usize]) {
        let mut st = self.lock();
        st.devices.release(ids);
        st.free_slots.push(slot);
        let start_here = Self::first_startable(&st).filter(|&i| {
            matches!(st.queue[i].stage, Stage::Ready(_)) && st.idle > st.started.len()
        });
        let Some(i) = start_here else {
            drop(st);
            self.cv.notify_one();
            return;
        };
        let (id, stage, lease, release) = self.take(&mut st, i);
        drop(st);
        let Stage::Ready(start) = stage else {
            unreachable!("checked ready")
        };
        match panic::catch_unwind(AssertUnwindSafe(move || start(lease))) {
            Ok(finish) => {
                self.lock().started.push_back((id, finish, release));
                self.cv.notify_one();
                // The waiter first (module doc, "in between").
                std::thread::yield_now();
            }
            Err(p) => {
                self.publish(id, Err(p));
                drop(release);
            }
        }
    }
}

/// A running job's hold on its slot and devices. [`release`](Self::release) gives them to the
/// next queued job while this one goes on (once its process has exited, so a device is never
/// shared against the request); dropping it releases too, so a job that returns or panics
/// never keeps its slot.
pub struct SlotRelease {
    held: Option<(Weak<dyn GiveBack>, usize, Vec<usize>)>,
}

/// What a [`SlotRelease`] calls: the pool's slot bookkeeping.
trait GiveBack: Send + Sync {
    fn give_back(&self, slot: usize, ids: &[usize]);
}

impl<I: Send + 'static, R: Send + 'static> GiveBack for Shared<I, R> {
    fn give_back(&self, slot: usize, ids: &[usize]) {
        Shared::give_back(self, slot, ids);
    }
}

impl SlotRelease {
    /// Gives the slot and devices back now (and may start the next job's process on this
    /// thread, see the module docs); later calls do nothing.
    pub fn release(&mut self) {
        if let Some((giver, slot, ids)) = self.held.take() {
            if let Some(giver) = giver.upgrade() {
                giver.give_back(slot, &ids);
            }
        }
    }
}

impl Drop for SlotRelease {
    fn drop(&mut self) {
        self.release();
    }
}

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
    shared: Arc<Shared<I, R>>,
    workers: Vec<JoinHandle<()>>,
}

impl<I: Send + 'static, R: Send + 'static> Pool<I, R> {
    pub fn new(slots: Slots) -> Self {
        let shared = Arc::new_cyclic(|me| Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                started: VecDeque::new(),
                next_seq: 0,
                ahead: 0,
                ahead_limit: slots.jobs() + 1,
                devices: Devices::new(slots.gpus().len(), slots.trials_per_gpu()),
                free_slots: (0..slots.jobs()).rev().collect(),
                idle: 0,
                running: 0,
                done: VecDeque::new(),
                shutdown: false,
            }),
            cv: Condvar::new(),
            done_cv: Condvar::new(),
            gpus: slots.gpus().to_vec(),
            me: me.clone(),
        });
        // `jobs` workers wait for processes; the others finish jobs that gave their slot back
        // and prepare the next ones: two per slot, no more than cores.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let finishers = (2 * slots.jobs()).min(cores).max(1);
        let workers = (0..slots.jobs() + finishers)
            .map(|n| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("aorta-worker-{n}"))
                    .spawn(move || shared.work())
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
        self.enqueue(id, request, Stage::Run(Box::new(job)))
    }

    /// A job in three steps, so that only its process holds a slot:
    ///
    /// - `prepare` needs no slot: it runs on an idle worker while every slot is busy (or on
    ///   the slot, if one is free when the job's turn comes); `Err` is the job's result
    ///   already, and the job never takes a slot;
    /// - `start` gets the slot and should only start the process: it may run on the thread
    ///   of another job, inside that job's [`SlotRelease::release`];
    /// - `finish` waits for the process, gives the slot back and finishes, on a worker.
    ///
    /// A job prepared or started that never finishes (the pool is dropped first) is
    /// dropped, so what `P` and `S` hold should clean up after themselves.
    pub fn submit_staged<P: Send + 'static, S: Send + 'static>(
        &self,
        id: I,
        request: SlotRequest,
        prepare: impl FnOnce() -> Result<P, R> + Send + 'static,
        start: impl FnOnce(P, Lease) -> S + Send + 'static,
        finish: impl FnOnce(S, SlotRelease) -> R + Send + 'static,
    ) -> Result<(), SlotError> {
        let staged: PrepareJob<R> = Box::new(move || {
            prepare().map(|p| -> StartJob<R> {
                Box::new(move |lease| {
                    let s = start(p, lease);
                    Box::new(move |release| finish(s, release))
                })
            })
        });
        self.enqueue(id, request, Stage::Fresh(staged))
    }

    fn enqueue(&self, id: I, request: SlotRequest, stage: Stage<R>) -> Result<(), SlotError> {
        self.slots.check(request)?;
        let mut st = self.shared.lock();
        let seq = st.next_seq;
        st.next_seq += 1;
        st.queue.push_back(Entry {
            seq,
            id,
            request,
            stage,
            ahead: false,
        });
        drop(st);
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
    /// Drops queued jobs, waits for started and running ones to finish, and joins the
    /// workers.
    fn drop(&mut self) {
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
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
