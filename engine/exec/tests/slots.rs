//! The scheduler: concurrency bound, exclusive GPUs, impossible requests, results.

use aorta_exec::{run, CancelToken, Pool, ProcessSpec, SlotError, SlotRequest, Slots};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn at_most_jobs_run_at_once() {
    let pool: Pool<usize, ()> = Pool::new(Slots::new(2, vec![]));
    let running = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    for i in 0..4 {
        let (running, max) = (Arc::clone(&running), Arc::clone(&max));
        pool.submit(i, SlotRequest::cpu(), move |_lease| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(200));
            running.fetch_sub(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    let mut ids: Vec<usize> = std::iter::from_fn(|| pool.next_completed())
        .map(|(id, ())| id)
        .collect();
    ids.sort();
    assert_eq!(ids, [0, 1, 2, 3]);
    assert_eq!(max.load(Ordering::SeqCst), 2);
}

/// A job that gives its slot back lets the next one start while it finishes, on the same
/// device, and the slot number is reused; one that does not, holds the slot to the end.
#[test]
fn a_released_slot_starts_the_next_job_while_the_first_finishes() {
    let pool: Pool<&str, (usize, Vec<String>, bool)> = Pool::new(Slots::new(1, vec!["0".into()]));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    pool.submit_releasing("first", SlotRequest::gpus(1), move |lease, mut release| {
        release.release();
        // Finishing: only possible if "second" got the slot and the device meanwhile.
        let overlapped = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        (lease.slot(), lease.gpus().to_vec(), overlapped)
    })
    .unwrap();
    pool.submit("second", SlotRequest::gpus(1), move |lease| {
        tx.send(()).unwrap();
        (lease.slot(), lease.gpus().to_vec(), true)
    })
    .unwrap();
    let mut done: Vec<_> = std::iter::from_fn(|| pool.next_completed()).collect();
    done.sort();
    assert_eq!(
        done,
        [
            ("first", (0, vec!["0".to_string()], true)),
            ("second", (0, vec!["0".to_string()], true))
        ]
    );

    // Without a release the slot is held: the second job cannot start before the first ends.
    let pool: Pool<usize, (Instant, Instant)> = Pool::new(Slots::new(1, vec![]));
    for i in 0..2 {
        pool.submit_releasing(i, SlotRequest::cpu(), |_lease, _release| {
            let start = Instant::now();
            std::thread::sleep(Duration::from_millis(100));
            (start, Instant::now())
        })
        .unwrap();
    }
    let mut iv: Vec<_> = std::iter::from_fn(|| pool.next_completed())
        .map(|(_, t)| t)
        .collect();
    iv.sort();
    assert!(iv[0].1 <= iv[1].0, "two jobs held one slot at once");
}

#[test]
fn gpu_trials_never_share_a_device() {
    let pool: Pool<usize, Vec<String>> = Pool::new(Slots::new(4, vec!["0".into(), "1".into()]));
    let intervals: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::default();
    for i in 0..4 {
        let intervals = Arc::clone(&intervals);
        pool.submit(i, SlotRequest::gpus(1), move |lease| {
            let start = Instant::now();
            std::thread::sleep(Duration::from_millis(150));
            let end = Instant::now();
            let mut iv = intervals.lock().unwrap();
            for g in lease.gpus() {
                iv.push((g.clone(), start, end));
            }
            lease.gpus().to_vec()
        })
        .unwrap();
    }
    let done: Vec<_> = std::iter::from_fn(|| pool.next_completed()).collect();
    assert_eq!(done.len(), 4);
    assert!(done.iter().all(|(_, g)| g.len() == 1));
    let iv = intervals.lock().unwrap();
    for (i, a) in iv.iter().enumerate() {
        for b in &iv[i + 1..] {
            if a.0 == b.0 {
                assert!(
                    a.2 <= b.1 || b.2 <= a.1,
                    "GPU {} used by two trials at once",
                    a.0
                );
            }
        }
    }
}

#[test]
fn a_request_beyond_the_machine_is_an_error_not_a_deadlock() {
    let pool: Pool<&str, ()> = Pool::new(Slots::new(2, vec!["0".into()]));
    let err = pool
        .submit("big", SlotRequest::gpus(2), |_| ())
        .unwrap_err();
    assert_eq!(
        err,
        SlotError::TooManyGpus {
            requested: 2,
            available: 1
        }
    );
    assert!(err.to_string().contains("2 GPU(s)"));
    assert!(pool.next_completed().is_none());
    let pool: Pool<&str, ()> = Pool::new(Slots::new(1, vec![]));
    let err = pool
        .submit_staged(
            "gpu",
            SlotRequest::gpus(1),
            || Ok(()),
            |(), _| (),
            |(), _| (),
        )
        .unwrap_err();
    assert_eq!(
        err,
        SlotError::TooManyGpus {
            requested: 1,
            available: 0
        }
    );
}

#[test]
fn multi_gpu_and_cpu_trials_mix() {
    let slots = Slots::new(3, vec!["a".into(), "b".into(), "c".into()]);
    let pool: Pool<usize, usize> = Pool::new(slots);
    for (i, request) in [
        SlotRequest::gpus(2),
        SlotRequest::gpus(2),
        SlotRequest::cpu(),
        SlotRequest::gpus(3),
    ]
    .into_iter()
    .enumerate()
    {
        pool.submit(i, request, |lease| lease.gpus().len()).unwrap();
    }
    let mut out: Vec<_> = std::iter::from_fn(|| pool.next_completed()).collect();
    out.sort();
    assert_eq!(out, [(0, 2), (1, 2), (2, 0), (3, 3)]);
}

#[test]
fn shared_mode_allows_co_location() {
    let pool: Pool<usize, ()> = Pool::new(Slots::new(4, vec!["0".into()]).share_gpus(2));
    let running = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    for i in 0..4 {
        let (running, max) = (Arc::clone(&running), Arc::clone(&max));
        pool.submit(i, SlotRequest::gpus(1), move |_| {
            max.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(150));
            running.fetch_sub(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    while pool.next_completed().is_some() {}
    assert_eq!(max.load(Ordering::SeqCst), 2);
}

#[test]
fn lease_reaches_the_child_environment() {
    let dir = tempfile::tempdir().unwrap();
    let pool: Pool<usize, String> = Pool::new(Slots::new(2, vec!["3".into(), "7".into()]));
    for i in 0..2 {
        let out = dir.path().join(format!("out{i}"));
        pool.submit(i, SlotRequest::gpus(2), move |lease| {
            let mut spec = ProcessSpec::new(
                [
                    "sh",
                    "-c",
                    "echo $CUDA_VISIBLE_DEVICES/$HIP_VISIBLE_DEVICES",
                ],
                &out,
                "/dev/null",
            );
            lease.apply(&mut spec);
            run(&spec, &CancelToken::new()).unwrap();
            std::fs::read_to_string(&out).unwrap()
        })
        .unwrap();
    }
    while let Some((_, s)) = pool.next_completed() {
        assert_eq!(s, "3,7/3,7\n");
    }
}

#[test]
fn a_panicking_job_re_raises_in_next_completed() {
    let pool: Pool<u8, ()> = Pool::new(Slots::new(1, vec![]));
    pool.submit(1, SlotRequest::cpu(), |_| panic!("boom"))
        .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.next_completed()));
    assert!(r.is_err());
    // The pool is still usable.
    pool.submit(2, SlotRequest::cpu(), |_| ()).unwrap();
    assert_eq!(pool.next_completed(), Some((2, ())));
}

/// A staged job's first step runs while every slot is busy, so its process can start the
/// moment a slot is given back; jobs still start in submission order, and a prepare step that
/// already has the result never takes a slot.
#[test]
fn a_staged_job_is_prepared_while_every_slot_is_busy() {
    let pool: Pool<usize, Option<bool>> = Pool::new(Slots::new(1, vec![]));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    pool.submit(0, SlotRequest::cpu(), move |_lease| {
        // Holds the only slot until job 1 has been prepared.
        Some(rx.recv_timeout(Duration::from_secs(10)).is_ok())
    })
    .unwrap();
    pool.submit_staged(
        1,
        SlotRequest::cpu(),
        move || {
            tx.send(()).unwrap();
            Ok("prepared")
        },
        |p, _lease| p,
        |p, _release| Some(p == "prepared"),
    )
    .unwrap();
    let mut done: Vec<_> = std::iter::from_fn(|| pool.next_completed()).collect();
    done.sort();
    assert_eq!(done, [(0, Some(true)), (1, Some(true))]);

    // Order: one slot, twelve staged jobs, started in submission order; odd ones are done
    // in their prepare step and never run.
    let pool: Pool<usize, Option<usize>> = Pool::new(Slots::new(1, vec![]));
    let started = Arc::new(Mutex::new(Vec::new()));
    for i in 0..12 {
        let started = Arc::clone(&started);
        pool.submit_staged(
            i,
            SlotRequest::cpu(),
            move || if i % 2 == 1 { Err(None) } else { Ok(i) },
            move |i, _lease| {
                started.lock().unwrap().push(i);
                i
            },
            |i, mut release| {
                std::thread::sleep(Duration::from_millis(5));
                release.release();
                Some(i)
            },
        )
        .unwrap();
    }
    let mut done: Vec<_> = std::iter::from_fn(|| pool.next_completed()).collect();
    done.sort();
    let expected: Vec<_> = (0..12).map(|i| (i, (i % 2 == 0).then_some(i))).collect();
    assert_eq!(done, expected);
    assert_eq!(*started.lock().unwrap(), [0, 2, 4, 6, 8, 10]);
}

/// A panic in a prepare step is the job's result, re-raised by `next_completed`.
#[test]
fn a_panicking_prepare_step_re_raises_in_next_completed() {
    let pool: Pool<u8, ()> = Pool::new(Slots::new(1, vec![]));
    pool.submit_staged(
        1,
        SlotRequest::cpu(),
        || -> Result<(), ()> { panic!("boom") },
        |(), _| (),
        |(), _| (),
    )
    .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.next_completed()));
    assert!(r.is_err());
    pool.submit(2, SlotRequest::cpu(), |_| ()).unwrap();
    assert_eq!(pool.next_completed(), Some((2, ())));
}

/// A prepared job is started by the thread that gives the slot back, inside its release, and
/// another worker waits for it; a panic in a start step is that job's result, and the slot
/// comes back.
#[test]
fn the_releasing_thread_starts_the_next_prepared_job() {
    let pool: Pool<usize, Option<bool>> = Pool::new(Slots::new(1, vec![]));
    let releaser = Arc::new(Mutex::new(None));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let r = Arc::clone(&releaser);
    pool.submit_releasing(0, SlotRequest::cpu(), move |_lease, mut release| {
        // Job 1 is prepared ahead while this one holds the slot.
        ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        std::thread::sleep(Duration::from_millis(50)); // the preparer is idle again
        *r.lock().unwrap() = Some(std::thread::current().id());
        release.release();
        None
    })
    .unwrap();
    let starter = Arc::new(Mutex::new(None));
    let s = Arc::clone(&starter);
    pool.submit_staged(
        1,
        SlotRequest::cpu(),
        move || {
            ready_tx.send(()).unwrap();
            Ok(())
        },
        move |(), _lease| *s.lock().unwrap() = Some(std::thread::current().id()),
        |(), _release| Some(true),
    )
    .unwrap();
    pool.submit_staged(
        2,
        SlotRequest::cpu(),
        || Ok(()),
        |(), _lease| -> () { panic!("start failed") },
        |(), _release| Some(true),
    )
    .unwrap();
    pool.submit(3, SlotRequest::cpu(), |_| Some(true)).unwrap();
    let mut done = Vec::new();
    let mut panics = 0;
    loop {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.next_completed())) {
            Ok(Some(d)) => done.push(d),
            Ok(None) => break,
            Err(_) => panics += 1,
        }
    }
    done.sort();
    assert_eq!(done, [(0, None), (1, Some(true)), (3, Some(true))]);
    assert_eq!(panics, 1, "job 2's start step panicked");
    assert_eq!(
        *starter.lock().unwrap(),
        *releaser.lock().unwrap(),
        "job 1 started on the thread that released job 0's slot"
    );
}
