//! Spin-kernel workloads: spin_streams (queues, launch order, probe), tiny_kernel_stress and
//! launch_overhead.

use std::collections::BTreeMap;

use super::common::{
    clock_sync, create_streams, max_streams, stamp_intervals, streams_with_buffers, ClockSync,
    StreamEvents,
};
use super::timing_passes;
use crate::backend::{host_ns, Buf, Gpu, Kernel, MemKind, Result, Stream};
use crate::config::{Config, Order, Timer};
use crate::metrics::{concurrency, median, Concurrency, Stats};
use crate::results::{Metrics, Point};

struct Batch {
    conc: Concurrency,
    /// ms per unit of the intervals (stamps are ns, events ms).
    to_ms: f64,
    probe_us: Option<f64>,
    probe_start_us: Option<f64>,
}

struct SpinSetup<'a> {
    pool: &'a [Stream],
    k: usize,
    ns: u64,
    threads: u32,
}

fn spin_batch(
    gpu: &mut dyn Gpu,
    su: &SpinSetup,
    n: usize,
    order: Order,
    events: Option<&StreamEvents>,
    probe: Option<(Buf, u32, &ClockSync)>,
) -> Result<Batch> {
    let k = su.k;
    let slots = (n * k + 1) as u32;
    gpu.reset_stamps(slots)?;
    if let Some(ev) = events {
        ev.begin(gpu)?;
    }
    let launch = |gpu: &mut dyn Gpu, s: usize, j: usize| -> Result<()> {
        if let (Some(ev), 0) = (events, j) {
            ev.start(gpu, s, su.pool[s])?;
        }
        let kern = Kernel::Spin {
            ns: su.ns,
            grid: 1,
            block: su.threads,
            stamp: Some((s * k + j) as u32),
        };
        gpu.launch(su.pool[s], &kern)?;
        if let Some(ev) = events.filter(|_| j == k - 1) {
            ev.end(gpu, s, su.pool[s])?;
        }
        Ok(())
    };
    match order {
        Order::Breadth => {
            for j in 0..k {
                for s in 0..n {
                    launch(gpu, s, j)?;
                }
            }
        }
        Order::Depth => {
            for s in 0..n {
                for j in 0..k {
                    launch(gpu, s, j)?;
                }
            }
        }
    }
    let t_probe = host_ns();
    if let Some((data, elems, _)) = probe {
        gpu.launch(
            su.pool[n],
            &Kernel::Tiny {
                data,
                elems,
                stamp: Some((n * k) as u32),
                flag: None,
            },
        )?;
    }
    gpu.sync()?;
    let stamps = gpu.read_stamps(slots)?;
    let (conc, to_ms) = match events {
        Some(ev) => (ev.concurrency(gpu, n)?, 1.0),
        None => {
            let owner: Vec<usize> = (0..n * k).map(|i| i / k).collect();
            (
                concurrency(&stamp_intervals(&stamps[..n * k], &owner), n),
                1e-6,
            )
        }
    };
    let (mut probe_us, mut probe_start_us) = (None, None);
    if let Some((_, _, sync)) = probe {
        let (s, e) = stamps[n * k];
        if s != u64::MAX {
            probe_us = Some((sync.to_host(e) - t_probe as f64) / 1e3);
            probe_start_us = Some((sync.to_host(s) - t_probe as f64) / 1e3);
        }
    }
    Ok(Batch {
        conc,
        to_ms,
        probe_us,
        probe_start_us,
    })
}

pub fn spin_streams(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let max_n = *cfg.streams.iter().max().expect("validated") as usize;
    // Streams first and in order, so stream i sits on queue i mod C; the probe of n streams is
    // stream n, the (n+1)-th.
    let pool = create_streams(gpu, max_n + 1)?;
    let data = gpu.alloc(cfg.tiny_elems.max(1) as usize * 4, MemKind::Device)?;
    let rate = if cfg.timer == Timer::Clock64 {
        gpu.use_clock64(true)?
    } else {
        None
    };
    let events = StreamEvents::new(gpu, max_n)?;
    let (dev_pass, ev_pass) = timing_passes(cfg.timing);
    let su = SpinSetup {
        pool: &pool,
        k: cfg.kernels_per_stream as usize,
        ns: (cfg.kernel_ms * 1e6) as u64,
        threads: cfg.threads,
    };
    let mut points = Vec::new();
    for &order in &cfg.orders {
        for &n in &cfg.streams {
            let n = n as usize;
            let sync = clock_sync(gpu, pool[n], data, 8)?;
            let (mut conc, mut conc_ev, mut spans, mut peaks) = (vec![], vec![], vec![], vec![]);
            let (mut probe, mut probe_start) = (vec![], vec![]);
            let mut busy = vec![0.0; n];
            for it in 0..cfg.warmup + cfg.iterations {
                let keep = it >= cfg.warmup;
                if dev_pass {
                    let pr = cfg.probe.then_some((data, cfg.tiny_elems, &sync));
                    let b = spin_batch(gpu, &su, n, order, None, pr)?;
                    if keep {
                        conc.push(b.conc.concurrency);
                        spans.push(b.conc.span * b.to_ms);
                        peaks.push(b.conc.peak as f64);
                        busy.iter_mut()
                            .zip(&b.conc.busy)
                            .for_each(|(a, x)| *a += x * b.to_ms / cfg.iterations as f64);
                        probe.extend(b.probe_us);
                        probe_start.extend(b.probe_start_us);
                    }
                }
                if ev_pass {
                    let b = spin_batch(gpu, &su, n, order, Some(&events), None)?;
                    if keep {
                        conc_ev.push(b.conc.concurrency);
                        if !dev_pass {
                            spans.push(b.conc.span);
                            busy.iter_mut()
                                .zip(&b.conc.busy)
                                .for_each(|(a, x)| *a += x / cfg.iterations as f64);
                        }
                    }
                }
            }
            let mut extra = BTreeMap::new();
            if !conc.is_empty() {
                extra.insert(
                    "concurrency_min".into(),
                    conc.iter().copied().fold(f64::INFINITY, f64::min),
                );
                extra.insert(
                    "concurrency_max".into(),
                    conc.iter().copied().fold(0.0, f64::max),
                );
                extra.insert("peak_running".into(), median(&peaks));
            }
            if let Some(s) = Stats::from_samples(&probe_start) {
                extra.insert("probe_start_wait_us".into(), s.p50);
            }
            extra.insert("clock_sync_rtt_us".into(), sync.rtt_ns as f64 / 1e3);
            if let Some(r) = rate {
                extra.insert("sm_cycles_per_ns".into(), r);
            }
            let concurrency = if dev_pass {
                median(&conc)
            } else {
                median(&conc_ev)
            };
            let m = Metrics {
                concurrency: Some(concurrency),
                concurrency_events: ev_pass.then(|| median(&conc_ev)),
                ideal_concurrency: Some(n as f64),
                timing: Some(
                    if dev_pass {
                        "device globaltimer stamps"
                    } else {
                        "per-stream events"
                    }
                    .into(),
                ),
                span_ms: Some(median(&spans)),
                busy_ms: busy,
                tiny_latency_us: Stats::from_samples(&probe),
                extra,
                ..Default::default()
            };
            log(format!(
                "spin_streams {:>7} streams={n:<3} concurrency {concurrency:6.2}{}{}",
                order.as_str(),
                m.concurrency_events
                    .map(|c| format!(" (events {c:.2})"))
                    .unwrap_or_default(),
                m.tiny_latency_us
                    .as_ref()
                    .map(|s| format!("  probe p50 {:.1} µs", s.p50))
                    .unwrap_or_default()
            ));
            points.push(Point {
                label: order.as_str().into(),
                streams: n as u32,
                order: Some(order),
                metrics: m,
            });
        }
    }
    Ok(points)
}

pub fn tiny_kernel_stress(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let max_n = max_streams(cfg);
    let (pool, bufs) = streams_with_buffers(gpu, max_n, cfg.tiny_elems)?;
    let sync = clock_sync(gpu, pool[0], bufs[0], 8)?;
    let ops = cfg.ops_per_stream.max(1) as usize;
    let mut points = Vec::new();
    for &order in &cfg.orders {
        for &n in &cfg.streams {
            let n = n as usize;
            let total = n * ops;
            let (mut launch, mut lat, mut conc, mut rate, mut gflops, mut spans) =
                (vec![], vec![], vec![], vec![], vec![], vec![]);
            for it in 0..cfg.warmup + cfg.iterations {
                gpu.reset_stamps(total as u32)?;
                let mut t_launch = vec![0u64; total];
                let mut go = |gpu: &mut dyn Gpu, s: usize, op: usize| -> Result<()> {
                    let slot = s * ops + op;
                    t_launch[slot] = host_ns();
                    gpu.launch(
                        pool[s],
                        &Kernel::Tiny {
                            data: bufs[s],
                            elems: cfg.tiny_elems,
                            stamp: Some(slot as u32),
                            flag: None,
                        },
                    )
                };
                let t0 = host_ns();
                match order {
                    Order::Breadth => {
                        (0..ops).try_for_each(|op| (0..n).try_for_each(|s| go(gpu, s, op)))?
                    }
                    Order::Depth => {
                        (0..n).try_for_each(|s| (0..ops).try_for_each(|op| go(gpu, s, op)))?
                    }
                }
                let t1 = host_ns();
                gpu.sync()?;
                if it < cfg.warmup {
                    continue;
                }
                let stamps = gpu.read_stamps(total as u32)?;
                let owner: Vec<usize> = (0..total).map(|i| i / ops).collect();
                let c = concurrency(&stamp_intervals(&stamps, &owner), n);
                launch.push((t1 - t0) as f64 / total as f64 / 1e3);
                lat.extend(
                    stamps
                        .iter()
                        .zip(&t_launch)
                        .filter(|(s, _)| s.0 != u64::MAX)
                        .map(|(s, t)| (sync.to_host(s.1) - *t as f64) / 1e3),
                );
                let span_s = (c.span * 1e-9).max(1e-9);
                rate.push(total as f64 / span_s);
                gflops.push(5.0 * cfg.tiny_elems as f64 * total as f64 / span_s / 1e9);
                spans.push(c.span * 1e-6);
                conc.push(c.concurrency);
            }
            let mut extra = BTreeMap::new();
            extra.insert("aorta_gflops".into(), median(&gflops));
            let m = Metrics {
                concurrency: Some(median(&conc)),
                timing: Some("device globaltimer stamps".into()),
                span_ms: Some(median(&spans)),
                launch_us: Stats::from_samples(&launch),
                tiny_latency_us: Stats::from_samples(&lat),
                throughput: Some(median(&rate)),
                throughput_unit: Some("kernels/s".into()),
                extra,
                ..Default::default()
            };
            log(format!(
                "tiny_kernel_stress {:>7} streams={n:<3} {:.0} kernels/s, launch {:.2} µs, latency p50 {:.0} µs",
                order.as_str(),
                median(&rate),
                median(&launch),
                m.tiny_latency_us.as_ref().map_or(0.0, |s| s.p50)
            ));
            points.push(Point {
                label: order.as_str().into(),
                streams: n as u32,
                order: Some(order),
                metrics: m,
            });
        }
    }
    Ok(points)
}

const BATCH: usize = 256;

/// Host µs per call of `f`, in batches of BATCH with a sync in between (not timed).
fn per_call(
    gpu: &mut dyn Gpu,
    launches: u32,
    f: &mut dyn FnMut(&mut dyn Gpu) -> Result<()>,
) -> Result<Option<Stats>> {
    let batches = (launches as usize / BATCH).max(2);
    let mut v = Vec::with_capacity(batches);
    for b in 0..batches + 1 {
        let t0 = host_ns();
        for _ in 0..BATCH {
            f(gpu)?;
        }
        let t1 = host_ns();
        gpu.sync()?;
        if b > 0 {
            v.push((t1 - t0) as f64 / BATCH as f64 / 1e3);
        }
    }
    Ok(Stats::from_samples(&v))
}

pub fn launch_overhead(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let s = gpu.create_stream(crate::backend::Priority::Normal)?;
    let data = gpu.alloc(4096, MemKind::Device)?;
    let ev = gpu.create_event()?;
    let mut points = Vec::new();
    let mut push = |label: &str,
                    stats: Option<Stats>,
                    extra: BTreeMap<String, f64>,
                    log: &mut dyn FnMut(String)| {
        log(format!(
            "launch_overhead {label:>12}: {:.3} µs per call (p50)",
            stats.as_ref().map_or(f64::NAN, |s| s.p50)
        ));
        points.push(Point {
            label: label.into(),
            streams: 1,
            order: None,
            metrics: Metrics {
                launch_us: stats,
                extra,
                ..Default::default()
            },
        });
    };
    let l = cfg.launches;
    let st = per_call(gpu, l, &mut |g| g.launch(s, &Kernel::Empty))?;
    push("empty", st, BTreeMap::new(), log);
    let st = per_call(gpu, l, &mut |g| {
        g.launch(
            s,
            &Kernel::Spin {
                ns: 0,
                grid: 1,
                block: 32,
                stamp: None,
            },
        )
    })?;
    push("spin_2args", st, BTreeMap::new(), log);
    let st = per_call(gpu, l, &mut |g| {
        g.launch(
            s,
            &Kernel::Tiny {
                data,
                elems: 1,
                stamp: None,
                flag: None,
            },
        )
    })?;
    push("tiny_5args", st, BTreeMap::new(), log);
    let st = per_call(gpu, l, &mut |g| g.record(ev, Some(s)))?;
    push("event_record", st, BTreeMap::new(), log);

    // A graph of BATCH empty kernels: host cost per kernel of one cuGraphLaunch, and GPU time per
    // kernel in the graph against eager launches.
    gpu.begin_capture(s)?;
    for _ in 0..BATCH {
        gpu.launch(s, &Kernel::Empty)?;
    }
    let graph = gpu.end_capture(s)?;
    let (e0, e1) = (gpu.create_event()?, gpu.create_event()?);
    let reps = (l as usize / BATCH).clamp(4, 100);
    let mut host = Vec::new();
    gpu.launch_graph(graph, s)?;
    gpu.record(e0, Some(s))?;
    for _ in 0..reps {
        let t0 = host_ns();
        gpu.launch_graph(graph, s)?;
        host.push((host_ns() - t0) as f64 / BATCH as f64 / 1e3);
    }
    gpu.record(e1, Some(s))?;
    gpu.sync()?;
    let graph_gpu = gpu.elapsed_ms(e0, e1)? * 1e3 / (reps * BATCH) as f64;
    gpu.record(e0, Some(s))?;
    for _ in 0..BATCH {
        gpu.launch(s, &Kernel::Empty)?;
    }
    gpu.record(e1, Some(s))?;
    gpu.sync()?;
    let eager_gpu = gpu.elapsed_ms(e0, e1)? * 1e3 / BATCH as f64;
    let mut extra = BTreeMap::new();
    extra.insert("graph_gpu_us_per_kernel".into(), graph_gpu);
    extra.insert("eager_gpu_us_per_kernel".into(), eager_gpu);
    push("graph_256", Stats::from_samples(&host), extra, log);
    Ok(points)
}
