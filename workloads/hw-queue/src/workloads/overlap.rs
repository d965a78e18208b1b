//! copy_overlap (copy engines beside compute) and graph_subgraphs (fork/join as a CUDA graph).

use std::collections::BTreeMap;

use super::common::{create_streams, StreamEvents};
use super::gemm::planned_gemm;
use crate::backend::{host_ns, Buf, Event, Gemm, GemmShape, Gpu, Kernel, MemKind, Result, Stream};
use crate::config::Config;
use crate::metrics::{concurrency, intersection_length, median, union_length, Stats};
use crate::results::{Metrics, Point};

const COPIES: [&str; 3] = ["h2d", "d2h", "d2d"];

pub fn copy_overlap(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let streams = create_streams(gpu, 4)?; // compute, h2d, d2h, d2d
    let bytes = (cfg.copy_mib as usize) << 20;
    let pairs: Vec<(Buf, Buf)> = vec![
        (
            gpu.alloc(bytes, MemKind::Device)?,
            gpu.alloc(bytes, MemKind::PinnedHost)?,
        ),
        (
            gpu.alloc(bytes, MemKind::PinnedHost)?,
            gpu.alloc(bytes, MemKind::Device)?,
        ),
        (
            gpu.alloc(bytes, MemKind::Device)?,
            gpu.alloc(bytes, MemKind::Device)?,
        ),
    ];
    let sh = GemmShape {
        m: cfg.gemm[0],
        n: cfg.gemm[1],
        k: cfg.gemm[2],
        dtype: cfg.dtype,
    };
    let (g, g_ms, _) = planned_gemm(gpu, sh, 1, cfg.algos, streams[0], log)?;
    let reps = cfg.iterations.max(1);
    let ev = StreamEvents::new(gpu, 4)?;
    let copy = |gpu: &mut dyn Gpu, i: usize| -> Result<()> {
        ev.start(gpu, i + 1, streams[i + 1])?;
        for _ in 0..reps {
            gpu.copy(streams[i + 1], pairs[i].0, pairs[i].1, bytes)?;
        }
        ev.end(gpu, i + 1, streams[i + 1])
    };
    let gemms = |gpu: &mut dyn Gpu, n: usize| -> Result<()> {
        ev.start(gpu, 0, streams[0])?;
        for _ in 0..n {
            gpu.gemm(g, streams[0], 0)?;
        }
        ev.end(gpu, 0, streams[0])
    };
    let gbps = |ms: f64| reps as f64 * bytes as f64 / (ms * 1e-3) / 1e9;
    // Alone.
    let mut alone = BTreeMap::new();
    let mut copy_ms = [0.0; 3];
    for (i, name) in COPIES.iter().enumerate() {
        for _ in 0..2 {
            ev.begin(gpu)?;
            copy(gpu, i)?;
            gpu.sync()?;
        }
        let iv = ev.interval(gpu, i + 1)?;
        copy_ms[i] = iv.end - iv.start;
        alone.insert(format!("{name}_gbps"), gbps(copy_ms[i]));
    }
    let n_gemm = (copy_ms.iter().copied().fold(0.0, f64::max) / g_ms)
        .ceil()
        .max(1.0) as usize;
    ev.begin(gpu)?;
    gemms(gpu, n_gemm)?;
    gpu.sync()?;
    let giv = ev.interval(gpu, 0)?;
    let gemm_alone_ms = giv.end - giv.start;
    alone.insert(
        "gemm_tflops".into(),
        n_gemm as f64 * sh.flops() / (gemm_alone_ms * 1e-3) / 1e12,
    );
    // Together (one untimed round first).
    let mut iv = Vec::new();
    for _ in 0..2 {
        ev.begin(gpu)?;
        gemms(gpu, n_gemm)?;
        (0..3).try_for_each(|i| copy(gpu, i))?;
        gpu.sync()?;
        iv = ev.intervals(gpu, 4)?;
    }
    let c = concurrency(&iv, 4);
    let copies: Vec<(f64, f64)> = iv[1..].iter().map(|i| (i.start, i.end)).collect();
    let copy_busy = union_length(copies.clone());
    let overlap = intersection_length(vec![(iv[0].start, iv[0].end)], copies) / copy_busy.max(1e-9);
    let mut together = BTreeMap::new();
    for (i, name) in COPIES.iter().enumerate() {
        together.insert(
            format!("{name}_gbps"),
            gbps(iv[i + 1].end - iv[i + 1].start),
        );
    }
    together.insert(
        "gemm_tflops".into(),
        n_gemm as f64 * sh.flops() / ((iv[0].end - iv[0].start) * 1e-3) / 1e12,
    );
    together.insert("copy_overlap".into(), overlap);
    together.insert(
        "speedup".into(),
        (gemm_alone_ms + copy_ms.iter().sum::<f64>()) / c.span,
    );
    log(format!(
        "copy_overlap: alone h2d {:.1} d2h {:.1} d2d {:.0} GB/s, GEMM {:.0} TFLOP/s; together h2d {:.1} d2h {:.1} d2d {:.0} GB/s, GEMM {:.0} TFLOP/s, {:.0}% of copy time overlapped with compute",
        alone["h2d_gbps"], alone["d2h_gbps"], alone["d2d_gbps"], alone["gemm_tflops"],
        together["h2d_gbps"], together["d2h_gbps"], together["d2d_gbps"], together["gemm_tflops"], overlap * 100.0
    ));
    Ok(vec![
        Point {
            label: "alone".into(),
            streams: 1,
            order: None,
            metrics: Metrics {
                extra: alone,
                ..Default::default()
            },
        },
        Point {
            label: "together".into(),
            streams: 4,
            order: None,
            metrics: Metrics {
                concurrency: Some(c.concurrency),
                timing: Some("per-stream events".into()),
                span_ms: Some(c.span),
                busy_ms: c.busy,
                extra: together,
                ..Default::default()
            },
        },
    ])
}

struct Fork<'a> {
    pool: &'a [Stream],
    n: usize,
    gemm: Gemm,
    layers: u32,
    data: Buf,
    fork: Event,
    joins: &'a [Event],
    agg: Event,
}

impl Fork<'_> {
    /// split on stream 0 → one subgraph (layers GEMMs) on each of streams 1..n-1 → aggregate on
    /// stream n-1 → back to stream 0. `serial`: everything on stream 0.
    fn enqueue(&self, gpu: &mut dyn Gpu, serial: bool) -> Result<()> {
        let (origin, last) = (self.pool[0], self.pool[self.n - 1]);
        let tiny = Kernel::Tiny {
            data: self.data,
            elems: 1024,
            stamp: None,
            flag: None,
        };
        gpu.launch(origin, &tiny)?;
        let subs = &self.pool[1..self.n - 1];
        if serial {
            for j in 0..subs.len() {
                (0..self.layers).try_for_each(|_| gpu.gemm(self.gemm, origin, j as u32))?;
            }
            return gpu.launch(origin, &tiny);
        }
        gpu.record(self.fork, Some(origin))?;
        for (j, &s) in subs.iter().enumerate() {
            gpu.wait_event(s, self.fork)?;
            (0..self.layers).try_for_each(|_| gpu.gemm(self.gemm, s, j as u32))?;
            gpu.record(self.joins[j], Some(s))?;
        }
        for j in 0..subs.len() {
            gpu.wait_event(last, self.joins[j])?;
        }
        gpu.launch(last, &tiny)?;
        gpu.record(self.agg, Some(last))?;
        gpu.wait_event(origin, self.agg)
    }
}

pub fn graph_subgraphs(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let max_n = (*cfg.streams.iter().max().expect("validated") as usize).max(3);
    let pool = create_streams(gpu, max_n)?;
    let data = gpu.alloc(4096, MemKind::Device)?;
    let sh = GemmShape {
        m: cfg.batch as u64,
        n: cfg.hidden as u64,
        k: cfg.hidden as u64,
        dtype: cfg.dtype,
    };
    let (gemm, _, _) = planned_gemm(gpu, sh, max_n as u32, cfg.algos, pool[0], log)?;
    let fork = gpu.create_marker()?;
    let agg = gpu.create_marker()?;
    let joins: Vec<Event> = (0..max_n)
        .map(|_| gpu.create_marker())
        .collect::<Result<_>>()?;
    let (e0, e1) = (gpu.create_event()?, gpu.create_event()?);
    let mut points = Vec::new();
    for &n in &cfg.streams {
        let n = (n as usize).max(3);
        let f = Fork {
            pool: &pool,
            n,
            gemm,
            layers: cfg.layers,
            data,
            fork,
            joins: &joins,
            agg,
        };
        let origin = pool[0];
        let time = |gpu: &mut dyn Gpu,
                    mode: &str,
                    graph: Option<crate::backend::Graph>|
         -> Result<(Vec<f64>, Vec<f64>)> {
            let (mut gpu_ms, mut submit) = (vec![], vec![]);
            for it in 0..cfg.warmup + cfg.iterations {
                gpu.record(e0, Some(origin))?;
                let t0 = host_ns();
                match graph {
                    Some(gr) => gpu.launch_graph(gr, origin)?,
                    None => f.enqueue(gpu, mode == "serial")?,
                }
                let t1 = host_ns();
                gpu.record(e1, Some(origin))?;
                gpu.sync()?;
                if it >= cfg.warmup {
                    gpu_ms.push(gpu.elapsed_ms(e0, e1)?);
                    submit.push((t1 - t0) as f64 / 1e3);
                }
            }
            Ok((gpu_ms, submit))
        };
        let (serial, _) = time(gpu, "serial", None)?;
        let (eager, eager_submit) = time(gpu, "eager", None)?;
        gpu.begin_capture(origin)?;
        f.enqueue(gpu, false)?;
        let graph = gpu.end_capture(origin)?;
        let (graphed, graph_submit) = time(gpu, "graph", Some(graph))?;
        let serial_ms = median(&serial);
        for (label, ms, sub) in [
            ("eager", &eager, &eager_submit),
            ("graph", &graphed, &graph_submit),
        ] {
            let mut extra = BTreeMap::new();
            extra.insert("serial_ms".into(), serial_ms);
            extra.insert("speedup_vs_serial".into(), serial_ms / median(ms));
            extra.insert("subgraphs".into(), (n - 2) as f64);
            log(format!(
                "graph_subgraphs {label:>5} streams={n:<3} {:.3} ms per iteration (serial {serial_ms:.3}), host submit {:.1} µs",
                median(ms),
                median(sub)
            ));
            points.push(Point {
                label: label.into(),
                streams: n as u32,
                order: None,
                metrics: Metrics {
                    iteration_ms: Stats::from_samples(ms),
                    launch_us: Stats::from_samples(sub),
                    throughput: Some(cfg.batch as f64 / (median(ms) * 1e-3)),
                    throughput_unit: Some("samples/s".into()),
                    timing: Some("events on the origin stream; launch_us = host time to submit one iteration".into()),
                    extra,
                    ..Default::default()
                },
            });
        }
    }
    Ok(points)
}
