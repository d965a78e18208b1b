//! GEMM workloads of AORTA's P0 set: large_gemm_only and hetero_kernels.

use std::collections::BTreeMap;

use super::common::{
    clock_sync, create_streams, max_streams, streams_with_buffers, tune_gemm, StreamEvents,
};
use super::dtype_name;
use crate::backend::{host_ns, Gemm, GemmShape, Gpu, Kernel, Result, Stream};
use crate::config::{Config, Order};
use crate::metrics::{median, Stats};
use crate::results::{Metrics, Point};

fn shape(cfg: &Config) -> GemmShape {
    GemmShape {
        m: cfg.gemm[0],
        n: cfg.gemm[1],
        k: cfg.gemm[2],
        dtype: cfg.dtype,
    }
}

/// Plan and tune; returns the GEMM and its extra metrics (best and heuristic-first TFLOP/s).
pub(super) fn planned_gemm(
    gpu: &mut dyn Gpu,
    shape: GemmShape,
    outputs: u32,
    algos: u32,
    stream: Stream,
    log: &mut dyn FnMut(String),
) -> Result<(Gemm, f64, BTreeMap<String, f64>)> {
    let g = gpu.gemm_plan(shape, outputs, algos)?;
    let tuned = tune_gemm(gpu, g, stream, 3)?;
    let tf = |ms: f64| shape.flops() / (ms * 1e-3) / 1e12;
    let best = tuned.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
    log(format!(
        "cuBLASLt {}x{}x{} {}: {} candidates, TFLOP/s {}",
        shape.m,
        shape.n,
        shape.k,
        dtype_name(shape.dtype),
        tuned.len(),
        tuned
            .iter()
            .map(|t| format!("{:.1}", tf(t.1)))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let mut extra = BTreeMap::new();
    extra.insert("gemm_best_tflops".into(), tf(best));
    extra.insert("gemm_heuristic_first_tflops".into(), tf(tuned[0].1));
    extra.insert("gemm_best_ms".into(), best);
    Ok((g, best, extra))
}

pub fn large_gemm_only(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let max_n = *cfg.streams.iter().max().expect("validated") as usize;
    let pool = create_streams(gpu, max_n)?;
    let sh = shape(cfg);
    let (g, best_ms, base_extra) = planned_gemm(gpu, sh, max_n as u32, cfg.algos, pool[0], log)?;
    let best_tflops = sh.flops() / (best_ms * 1e-3) / 1e12;
    let events = StreamEvents::new(gpu, max_n)?;
    let mut points = Vec::new();
    for &n in &cfg.streams {
        let n = n as usize;
        let (mut tput, mut conc, mut spans, mut walls) = (vec![], vec![], vec![], vec![]);
        let mut busy = vec![0.0; n];
        for it in 0..cfg.warmup + cfg.iterations {
            let t0 = host_ns();
            events.begin(gpu)?;
            for (s, &st) in pool.iter().enumerate().take(n) {
                events.start(gpu, s, st)?;
                gpu.gemm(g, st, s as u32)?;
                events.end(gpu, s, st)?;
            }
            gpu.sync()?;
            let wall = (host_ns() - t0) as f64 / 1e6;
            if it < cfg.warmup {
                continue;
            }
            let c = events.concurrency(gpu, n)?;
            tput.push(n as f64 * sh.flops() / (c.span * 1e-3) / 1e12);
            conc.push(c.concurrency);
            spans.push(c.span);
            walls.push(wall);
            busy.iter_mut()
                .zip(&c.busy)
                .for_each(|(a, b)| *a += b / cfg.iterations as f64);
        }
        let mut extra = base_extra.clone();
        extra.insert("efficiency_vs_best".into(), median(&tput) / best_tflops);
        log(format!(
            "large_gemm_only streams={n:<3} {:.1} TFLOP/s ({:.0}% of best single-stream)",
            median(&tput),
            100.0 * median(&tput) / best_tflops
        ));
        points.push(Point {
            label: "gemm".into(),
            streams: n as u32,
            order: None,
            metrics: Metrics {
                concurrency: Some(median(&conc)),
                timing: Some("per-stream events".into()),
                span_ms: Some(median(&spans)),
                busy_ms: busy,
                iteration_ms: Stats::from_samples(&walls),
                throughput: Some(median(&tput)),
                throughput_unit: Some("TFLOP/s".into()),
                extra,
                ..Default::default()
            },
        });
    }
    Ok(points)
}

pub fn hetero_kernels(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let max_n = max_streams(cfg);
    let (pool, bufs) = streams_with_buffers(gpu, max_n, cfg.tiny_elems)?;
    let sh = shape(cfg);
    let (g, _, base_extra) =
        planned_gemm(gpu, sh, (max_n / 2).max(1) as u32, cfg.algos, pool[0], log)?;
    let sync = clock_sync(gpu, pool[max_n - 1], bufs[0], 8)?;
    let events = StreamEvents::new(gpu, max_n)?;
    let mut points = Vec::new();
    for &order in &cfg.orders {
        for &n in &cfg.streams {
            let n = n as usize;
            let large = (n / 2).max(1);
            let small = n - large;
            // As AORTA: `ratio` tiny ops per GEMM; alternating puts tiny op r of each GEMM on small
            // stream r mod #small, batched puts op i on i mod #small (GEMM streams if no small).
            let n_ops = cfg.ratio as usize * large;
            let stream_of = |op: usize| {
                let r = if order == Order::Breadth {
                    op % cfg.ratio.max(1) as usize
                } else {
                    op
                };
                if small > 0 {
                    large + r % small
                } else {
                    r % large
                }
            };
            let flops = sh.flops() * large as f64 + 3.0 * cfg.tiny_elems as f64 * n_ops as f64;
            let (mut tput, mut tput_wall, mut conc, mut spans, mut walls, mut lat) =
                (vec![], vec![], vec![], vec![], vec![], vec![]);
            let mut busy = vec![0.0; n];
            for it in 0..cfg.warmup + cfg.iterations {
                gpu.reset_stamps(n_ops.max(1) as u32)?;
                let mut t_launch = vec![0u64; n_ops];
                let t0 = host_ns();
                events.begin(gpu)?;
                for (s, &st) in pool.iter().enumerate().take(n) {
                    events.start(gpu, s, st)?;
                }
                let mut tiny = |gpu: &mut dyn Gpu, op: usize| -> Result<()> {
                    let s = stream_of(op);
                    t_launch[op] = host_ns();
                    gpu.launch(
                        pool[s],
                        &Kernel::Tiny {
                            data: bufs[s],
                            elems: cfg.tiny_elems,
                            stamp: Some(op as u32),
                            flag: None,
                        },
                    )
                };
                match order {
                    // AORTA's "alternating": each GEMM followed by its `ratio` tiny ops.
                    Order::Breadth => {
                        for (i, &st) in pool.iter().enumerate().take(large) {
                            gpu.gemm(g, st, i as u32)?;
                            for r in 0..cfg.ratio as usize {
                                tiny(gpu, i * cfg.ratio as usize + r)?;
                            }
                        }
                    }
                    // "batched": every GEMM, then every tiny op.
                    Order::Depth => {
                        for (i, &st) in pool.iter().enumerate().take(large) {
                            gpu.gemm(g, st, i as u32)?;
                        }
                        (0..n_ops).try_for_each(|op| tiny(gpu, op))?;
                    }
                }
                for (s, &st) in pool.iter().enumerate().take(n) {
                    events.end(gpu, s, st)?;
                }
                gpu.sync()?;
                let wall = (host_ns() - t0) as f64 / 1e6;
                if it < cfg.warmup {
                    continue;
                }
                let c = events.concurrency(gpu, n)?;
                let stamps = gpu.read_stamps(n_ops as u32)?;
                lat.extend(
                    stamps
                        .iter()
                        .zip(&t_launch)
                        .filter(|(s, _)| s.0 != u64::MAX)
                        .map(|(s, t)| (sync.to_host(s.1) - *t as f64) / 1e3),
                );
                tput.push(flops / (c.span * 1e-3) / 1e9);
                tput_wall.push(flops / (wall * 1e-3) / 1e9);
                conc.push(c.concurrency);
                spans.push(c.span);
                walls.push(wall);
                busy.iter_mut()
                    .zip(&c.busy)
                    .for_each(|(a, b)| *a += b / cfg.iterations as f64);
            }
            let mut extra = base_extra.clone();
            extra.insert("aorta_gflops_wall".into(), median(&tput_wall));
            extra.insert("large_streams".into(), large as f64);
            extra.insert("tiny_ops".into(), n_ops as f64);
            let m = Metrics {
                concurrency: Some(median(&conc)),
                timing: Some(
                    "per-stream events; tiny latency from device stamps vs host launch time".into(),
                ),
                span_ms: Some(median(&spans)),
                busy_ms: busy,
                iteration_ms: Stats::from_samples(&walls),
                tiny_latency_us: Stats::from_samples(&lat),
                throughput: Some(median(&tput)),
                throughput_unit: Some("GFLOP/s (AORTA formula)".into()),
                extra,
                ..Default::default()
            };
            log(format!(
                "hetero_kernels {:>7} streams={n:<3} {:.0} GFLOP/s, concurrency {:.2}, tiny latency p50 {:.0} µs p99 {:.0} µs",
                order.as_str(),
                median(&tput),
                median(&conc),
                m.tiny_latency_us.as_ref().map_or(0.0, |s| s.p50),
                m.tiny_latency_us.as_ref().map_or(0.0, |s| s.p99)
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
