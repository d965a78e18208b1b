//! Helpers every workload shares: host↔GPU clock alignment, waiting on a mapped flag, stamps to
//! intervals, per-stream events, and best-of GEMM algorithm selection.

use std::time::Duration;

use crate::backend::{host_ns, Buf, Event, Gemm, Gpu, GpuError, Kernel, MemKind, Result, Stream};
use crate::metrics::{concurrency, Concurrency, Interval};

/// Maps the GPU's `%globaltimer` onto the host's monotonic clock (`host_ns`).
#[derive(Clone, Copy, Debug)]
pub struct ClockSync {
    /// globaltimer − host_ns.
    pub offset_ns: i128,
    /// Round trip of the best calibration sample (the offset is good to about half of it).
    pub rtt_ns: u64,
}

impl ClockSync {
    pub fn to_host(&self, gpu_ns: u64) -> f64 {
        (gpu_ns as i128 - self.offset_ns) as f64
    }
}

/// Flag slot reserved for calibration.
const SYNC_FLAG: u32 = 4095;

/// Launch a tiny kernel on an idle stream `rounds` times; keep the round trip with the
/// smallest host time and place its device stamp at the middle of it.
pub fn clock_sync(gpu: &mut dyn Gpu, stream: Stream, data: Buf, rounds: u32) -> Result<ClockSync> {
    let mut best: Option<ClockSync> = None;
    for r in 0..rounds.max(1) {
        gpu.reset_stamps(1)?;
        let seq = 0xC10C_0000 + r as u64;
        let t0 = host_ns();
        gpu.launch(
            stream,
            &Kernel::Tiny {
                data,
                elems: 1,
                stamp: Some(0),
                flag: Some((SYNC_FLAG, seq)),
            },
        )?;
        let t1 = wait_flag(gpu, SYNC_FLAG, seq, Duration::from_secs(5))?;
        gpu.sync()?;
        let (g0, _) = gpu.read_stamps(1)?[0];
        let rtt = t1 - t0;
        let offset = g0 as i128 - (t0 as i128 + t1 as i128) / 2;
        if best.is_none_or(|b| rtt < b.rtt_ns) {
            best = Some(ClockSync {
                offset_ns: offset,
                rtt_ns: rtt,
            });
        }
    }
    Ok(best.expect("at least one round"))
}

/// Spin until host-mapped flag `slot` holds `seq`; returns the host time it was seen.
pub fn wait_flag(gpu: &dyn Gpu, slot: u32, seq: u64, timeout: Duration) -> Result<u64> {
    let deadline = host_ns() + timeout.as_nanos() as u64;
    let mut i = 0u32;
    loop {
        if gpu.flag(slot) == seq {
            return Ok(host_ns());
        }
        i = i.wrapping_add(1);
        if i % 1024 == 0 && host_ns() > deadline {
            return Err(GpuError::call(
                "waiting for the tiny kernel's flag",
                format!("no completion after {timeout:?}"),
            ));
        }
        std::hint::spin_loop();
    }
}

/// Intervals from stamp slots: `owner[i]` is the stream of slot i. Unwritten slots are skipped.
pub fn stamp_intervals(stamps: &[(u64, u64)], owner: &[usize]) -> Vec<Interval> {
    owner
        .iter()
        .zip(stamps)
        .filter(|(_, (s, e))| *s != u64::MAX && e >= s)
        .map(|(&stream, &(s, e))| Interval {
            stream,
            start: s as f64,
            end: e as f64,
        })
        .collect()
}

/// A reference event on the NULL stream plus a start/end event pair per stream.
pub struct StreamEvents {
    reference: Event,
    pairs: Vec<(Event, Event)>,
}

impl StreamEvents {
    pub fn new(gpu: &mut dyn Gpu, streams: usize) -> Result<Self> {
        let reference = gpu.create_event()?;
        let mut pairs = Vec::with_capacity(streams);
        for _ in 0..streams {
            pairs.push((gpu.create_event()?, gpu.create_event()?));
        }
        Ok(StreamEvents { reference, pairs })
    }
    pub fn begin(&self, gpu: &mut dyn Gpu) -> Result<()> {
        gpu.record(self.reference, None)
    }
    pub fn start(&self, gpu: &mut dyn Gpu, i: usize, s: Stream) -> Result<()> {
        gpu.record(self.pairs[i].0, Some(s))
    }
    pub fn end(&self, gpu: &mut dyn Gpu, i: usize, s: Stream) -> Result<()> {
        gpu.record(self.pairs[i].1, Some(s))
    }
    /// After sync: stream i's [start, end] in ms from the reference (pair i must be recorded).
    pub fn interval(&self, gpu: &dyn Gpu, i: usize) -> Result<Interval> {
        let (a, b) = self.pairs[i];
        Ok(Interval {
            stream: i,
            start: gpu.elapsed_ms(self.reference, a)?,
            end: gpu.elapsed_ms(self.reference, b)?,
        })
    }
    /// After sync: per-stream [start, end] in ms from the reference, for the first `n` pairs.
    pub fn intervals(&self, gpu: &dyn Gpu, n: usize) -> Result<Vec<Interval>> {
        let mut v = Vec::with_capacity(n);
        for (i, (a, b)) in self.pairs.iter().take(n).enumerate() {
            let start = gpu.elapsed_ms(self.reference, *a)?;
            let end = gpu.elapsed_ms(self.reference, *b)?;
            v.push(Interval {
                stream: i,
                start,
                end,
            });
        }
        Ok(v)
    }
    pub fn concurrency(&self, gpu: &dyn Gpu, n: usize) -> Result<Concurrency> {
        Ok(concurrency(&self.intervals(gpu, n)?, n))
    }
}

/// Time every heuristic candidate (`reps` back-to-back GEMMs between two events on one idle
/// stream, best of 3 repetitions), select the fastest. Returns (index, ms) per candidate.
pub fn tune_gemm(
    gpu: &mut dyn Gpu,
    gemm: Gemm,
    stream: Stream,
    reps: u32,
) -> Result<Vec<(usize, f64)>> {
    let (e0, e1) = (gpu.create_event()?, gpu.create_event()?);
    let mut out = Vec::new();
    for algo in gpu.gemm_algos(gemm) {
        gpu.gemm_select(gemm, algo.index);
        gpu.gemm(gemm, stream, 0)?;
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            gpu.record(e0, Some(stream))?;
            for _ in 0..reps {
                gpu.gemm(gemm, stream, 0)?;
            }
            gpu.record(e1, Some(stream))?;
            gpu.sync_stream(stream)?;
            best = best.min(gpu.elapsed_ms(e0, e1)? / reps as f64);
        }
        out.push((algo.index, best));
    }
    if let Some(&(i, _)) = out.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        gpu.gemm_select(gemm, i);
    }
    Ok(out)
}

/// Wait on the host for about `ns` (busy, for sub-millisecond accuracy).
pub fn spin_host(ns: u64) {
    let end = host_ns() + ns;
    while host_ns() < end {
        std::hint::spin_loop();
    }
}

/// The largest stream count a config sweeps (validated non-empty).
pub fn max_streams(cfg: &crate::config::Config) -> usize {
    cfg.streams.iter().copied().max().unwrap_or(1) as usize
}

/// `n` streams, each with a device buffer of `elems` f32s (at least one, never a zero-size alloc).
pub fn streams_with_buffers(
    gpu: &mut dyn Gpu,
    n: usize,
    elems: u32,
) -> Result<(Vec<Stream>, Vec<Buf>)> {
    let pool = create_streams(gpu, n)?;
    let bufs = (0..n)
        .map(|_| gpu.alloc(elems.max(1) as usize * 4, MemKind::Device))
        .collect::<Result<_>>()?;
    Ok((pool, bufs))
}

pub fn create_streams(gpu: &mut dyn Gpu, n: usize) -> Result<Vec<Stream>> {
    (0..n)
        .map(|_| gpu.create_stream(crate::backend::Priority::Normal))
        .collect()
}
