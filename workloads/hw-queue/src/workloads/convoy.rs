//! Latency under load, measured from the host-side launch: priority_convoy (a tiny kernel vs a
//! multi-wave kernel) and prefill_decode (decode steps vs prefill GEMMs).
//!
//! The host takes its clock right before the launch call and spins on a host-mapped flag that
//! the tiny kernel sets; device stamps, mapped onto the host clock, split that time into waiting
//! and running. An event recorded on the probe's stream would start only when the probe's queue
//! gets to it, so it hides the wait (reported beside, as `event_latency_us_*`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::common::{clock_sync, spin_host, wait_flag, ClockSync};
use super::gemm::planned_gemm;
use crate::backend::{
    host_ns, Buf, Event, GemmShape, Gpu, Kernel, MemKind, Priority, Result, Stream,
};
use crate::config::Config;
use crate::metrics::{median, Stats};
use crate::results::{Metrics, Point};

const PROBE_FLAG: u32 = 0;

fn high(cfg: &Config) -> Priority {
    cfg.priority.map_or(Priority::High, Priority::Value)
}

struct Probe {
    data: Buf,
    seq: u64,
}

impl Probe {
    /// Launch the tiny kernel on `s`; returns (host launch time, host time completion was seen).
    /// With `events`, a timing event is recorded on `s` right before and right after the launch.
    fn fire(
        &mut self,
        gpu: &mut dyn Gpu,
        s: Stream,
        stamp: Option<u32>,
        events: Option<(Event, Event)>,
    ) -> Result<(u64, u64)> {
        self.seq += 1;
        if let Some((e0, _)) = events {
            gpu.record(e0, Some(s))?;
        }
        let t0 = host_ns();
        gpu.launch(
            s,
            &Kernel::Tiny {
                data: self.data,
                elems: 1,
                stamp,
                flag: Some((PROBE_FLAG, self.seq)),
            },
        )?;
        if let Some((_, e1)) = events {
            gpu.record(e1, Some(s))?;
        }
        let t1 = wait_flag(gpu, PROBE_FLAG, self.seq, Duration::from_secs(60))?;
        Ok((t0, t1))
    }
}

fn point(label: &str, streams: u32, lat: &[f64], extra: BTreeMap<String, f64>) -> Point {
    Point {
        label: label.into(),
        streams,
        order: None,
        metrics: Metrics {
            tiny_latency_us: Stats::from_samples(lat),
            timing: Some("host clock at launch → host-mapped completion flag".into()),
            extra,
            ..Default::default()
        },
    }
}

pub fn priority_convoy(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let long = gpu.create_stream(Priority::Normal)?;
    let normal = gpu.create_stream(Priority::Normal)?;
    let hi = gpu.create_stream(high(cfg))?;
    let data = gpu.alloc(4096, MemKind::Device)?;
    let mut probe = Probe { data, seq: 0 };
    let bps = gpu.spin_blocks_per_sm(cfg.threads)?;
    let grid = cfg.waves * gpu.info().sm_count * bps;
    let block_ns = (cfg.block_ms * 1e6) as u64;
    let delay = (cfg.delay_ms * 1e6) as u64;
    let sync = clock_sync(gpu, normal, data, 16)?;
    let (ev0, ev1) = (gpu.create_event()?, gpu.create_event()?);
    // Load the spin kernel (lazy module loading) before anything is timed.
    gpu.launch(
        long,
        &Kernel::Spin {
            ns: 1000,
            grid: 1,
            block: cfg.threads,
            stamp: None,
        },
    )?;
    gpu.sync()?;
    let mut base = BTreeMap::new();
    base.insert("waves".into(), cfg.waves as f64);
    base.insert("blocks_per_sm".into(), bps as f64);
    base.insert("grid_blocks".into(), grid as f64);
    base.insert("block_ms".into(), cfg.block_ms);
    base.insert("clock_sync_rtt_us".into(), sync.rtt_ns as f64 / 1e3);

    let mut idle = Vec::new();
    for _ in 0..cfg.samples.max(10) {
        let (t0, t1) = probe.fire(gpu, normal, None, None)?;
        idle.push((t1 - t0) as f64 / 1e3);
    }
    log(format!(
        "priority_convoy idle: tiny kernel p50 {:.1} µs from launch",
        median(&idle)
    ));
    let mut points = vec![point("idle", 1, &idle, base.clone())];

    for (label, s) in [("normal", normal), ("high", hi)] {
        let (mut lat, mut start_wait, mut remaining, mut long_ms, mut ratio) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut ev_lat = Vec::new();
        for i in 0..2 * cfg.samples {
            let with_events = i >= cfg.samples;
            gpu.reset_stamps(2)?;
            let t_long = host_ns();
            gpu.launch(
                long,
                &Kernel::Spin {
                    ns: block_ns,
                    grid,
                    block: cfg.threads,
                    stamp: Some(0),
                },
            )?;
            spin_host((t_long + delay).saturating_sub(host_ns()));
            let (t0, t1) = probe.fire(gpu, s, Some(1), with_events.then_some((ev0, ev1)))?;
            gpu.sync()?;
            if with_events {
                ev_lat.push(gpu.elapsed_ms(ev0, ev1)? * 1e3);
                continue;
            }
            let st = gpu.read_stamps(2)?;
            let to = |g: u64, sync: &ClockSync| sync.to_host(g) - t0 as f64;
            let l = (t1 - t0) as f64 / 1e3;
            let rem = to(st[0].1, &sync) / 1e3;
            lat.push(l);
            start_wait.push(to(st[1].0, &sync) / 1e3);
            remaining.push(rem);
            long_ms.push((st[0].1 - st[0].0) as f64 / 1e6);
            ratio.push(l / rem.max(1.0));
        }
        let mut extra = base.clone();
        extra.insert("start_wait_us".into(), median(&start_wait));
        extra.insert("long_remaining_us".into(), median(&remaining));
        extra.insert("long_kernel_ms".into(), median(&long_ms));
        extra.insert("wait_over_remaining".into(), median(&ratio));
        if let Some(e) = Stats::from_samples(&ev_lat) {
            extra.insert("event_latency_us_p50".into(), e.p50);
            extra.insert("event_latency_us_p99".into(), e.p99);
        }
        let p = point(label, 2, &lat, extra);
        let st = p.metrics.tiny_latency_us.clone().unwrap_or_default();
        log(format!(
            "priority_convoy {label:>6}: p50 {:.0} µs p99 {:.0} µs from launch; long kernel had {:.0} µs left; event-timed {:.0} µs",
            st.p50,
            st.p99,
            median(&remaining),
            Stats::from_samples(&ev_lat).map_or(0.0, |e| e.p50)
        ));
        points.push(p);
    }
    Ok(points)
}

pub fn prefill_decode(
    cfg: &Config,
    gpu: &mut dyn Gpu,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Point>> {
    let prefill = gpu.create_stream(Priority::Normal)?;
    let dec_n = gpu.create_stream(Priority::Normal)?;
    let dec_h = gpu.create_stream(high(cfg))?;
    let data = gpu.alloc(4096, MemKind::Device)?;
    let mut probe = Probe { data, seq: 0 };
    let sync = clock_sync(gpu, dec_n, data, 16)?;
    let psh = GemmShape {
        m: cfg.gemm[0],
        n: cfg.gemm[1],
        k: cfg.gemm[2],
        dtype: cfg.dtype,
    };
    let dsh = GemmShape {
        m: cfg.batch as u64,
        n: cfg.hidden as u64,
        k: cfg.hidden as u64,
        dtype: cfg.dtype,
    };
    let (pg, p_ms, p_extra) = planned_gemm(gpu, psh, 1, cfg.algos, prefill, log)?;
    let (dg, _, _) = planned_gemm(gpu, dsh, 2, cfg.algos, dec_n, log)?;
    let mut token = |gpu: &mut dyn Gpu, s: Stream, out: u32| -> Result<(u64, u64)> {
        let t0 = host_ns();
        for _ in 0..cfg.layers {
            gpu.gemm(dg, s, out)?;
        }
        let (_, t1) = probe.fire(gpu, s, None, None)?;
        Ok((t0, t1))
    };
    let mut alone = Vec::new();
    for _ in 0..cfg.samples {
        let (t0, t1) = token(gpu, dec_n, 0)?;
        alone.push((t1 - t0) as f64 / 1e3);
    }
    let alone_p50_ms = median(&alone) / 1e3;
    let prefill_alone = p_extra["gemm_best_tflops"];
    log(format!(
        "prefill_decode alone: token p50 {:.0} µs; prefill alone {prefill_alone:.0} TFLOP/s",
        alone_p50_ms * 1e3
    ));
    let mut points = vec![point("decode_alone", 1, &alone, BTreeMap::new())];
    let (e0, e1) = (gpu.create_event()?, gpu.create_event()?);
    for (label, s, out) in [("mixed_normal", dec_n, 0), ("mixed_high", dec_h, 1)] {
        gpu.reset_stamps(1)?;
        // Enough prefill to outlast the decode steps (they slow down under load).
        let n_prefill = (((cfg.samples as f64 * alone_p50_ms * 20.0 + 50.0) / p_ms).ceil()
            as usize)
            .clamp(8, 4000);
        gpu.record(e0, Some(prefill))?;
        for _ in 0..n_prefill {
            gpu.gemm(pg, prefill, 0)?;
        }
        gpu.launch(
            prefill,
            &Kernel::Tiny {
                data,
                elems: 1,
                stamp: Some(0),
                flag: None,
            },
        )?;
        gpu.record(e1, Some(prefill))?;
        let mut steps = Vec::new();
        for _ in 0..cfg.samples {
            steps.push(token(gpu, s, out)?);
        }
        gpu.sync()?;
        let end = sync.to_host(gpu.read_stamps(1)?[0].1);
        let lat: Vec<f64> = steps
            .iter()
            .filter(|(_, t1)| (*t1 as f64) <= end)
            .map(|(t0, t1)| (t1 - t0) as f64 / 1e3)
            .collect();
        let tflops = n_prefill as f64 * psh.flops() / (gpu.elapsed_ms(e0, e1)? * 1e-3) / 1e12;
        let mut extra = BTreeMap::new();
        extra.insert("prefill_alone_tflops".into(), prefill_alone);
        extra.insert("prefill_slowdown".into(), prefill_alone / tflops);
        extra.insert("samples_under_load".into(), lat.len() as f64);
        let mut p = point(label, 2, &lat, extra);
        p.metrics.throughput = Some(tflops);
        p.metrics.throughput_unit = Some("prefill TFLOP/s".into());
        let st = p.metrics.tiny_latency_us.clone().unwrap_or_default();
        log(format!("prefill_decode {label}: token p50 {:.0} µs p99 {:.0} µs ({} under load); prefill {tflops:.0} TFLOP/s", st.p50, st.p99, lat.len()));
        points.push(p);
    }
    Ok(points)
}
