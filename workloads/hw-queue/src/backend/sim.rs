//! A simulated GPU for tests and demos (`AORTA_HW_QUEUE_BACKEND=sim`): C hardware queues fed
//! round-robin by streams in creation order (C from CUDA_DEVICE_MAX_CONNECTIONS at creation, like
//! the driver), a queue entry starting at max(the previous entry's start, its stream predecessor's
//! end), unlimited SMs (a grid larger than 2 blocks per SM runs in waves), no priorities, no SM
//! contention. Work runs in real time on the host clock: kernels of known length (spin `ns` per
//! wave, tiny 2 µs, GEMMs at 50 TFLOP/s, copies at 50 GB/s), `sync` sleeps until the work is done,
//! and a mapped flag reads as set once its kernel has ended, so the host-side latency machinery
//! (clock sync, stamps, flags) is exercised as on a GPU. It is the queue model of
//! `analysis::model_concurrency`, executed through the `Gpu` trait.

use std::cell::Cell;

use super::{
    host_ns, AlgoInfo, Buf, DeviceInfo, Event, Gemm, GemmShape, Gpu, GpuError, Graph, Kernel,
    MemKind, Priority, Result, Stream, FLAG_SLOTS,
};

const DEV_OFFSET: f64 = 1.0e12;

pub struct SimGpu {
    info: DeviceInfo,
    conns: usize,
    queue_of: Vec<usize>,
    queue_time: Vec<f64>,
    stream_end: Vec<f64>,
    events: Vec<f64>,
    stamps: Vec<(u64, u64)>,
    /// (value, device time it is written).
    flags: Vec<Cell<(u64, f64)>>,
    gemms: Vec<GemmShape>,
    capture_start: Option<f64>,
    graphs: Vec<f64>,
    /// When the host "issues" the next launch: 1 µs after the previous one, from the last sync
    /// (never more than 1 ms behind the real clock). Bulk work is placed at this virtual issue
    /// time so a briefly descheduled host thread does not change the simulated schedule; tiny
    /// kernels use the real clock, as probes.
    issue: Cell<f64>,
}

impl SimGpu {
    pub fn new(conns: usize) -> Self {
        let conns = conns.max(1);
        SimGpu {
            info: DeviceInfo {
                backend: "sim".into(),
                name: format!("simulated GPU, {conns} queues"),
                compute_capability: "sim".into(),
                sm_count: 132,
                max_threads_per_sm: 2048,
                driver_version: "sim".into(),
                compiler_version: "none".into(),
                priority_range: (0, -5),
                queue_env: Some(("CUDA_DEVICE_MAX_CONNECTIONS".into(), conns.to_string())),
                ..Default::default()
            },
            conns,
            queue_of: vec![],
            queue_time: vec![0.0; conns],
            stream_end: vec![],
            events: vec![],
            stamps: vec![],
            flags: (0..FLAG_SLOTS).map(|_| Cell::new((0, 0.0))).collect(),
            gemms: vec![],
            capture_start: None,
            graphs: vec![],
            issue: Cell::new(0.0),
        }
    }
    /// The simulated `%globaltimer`: the host clock plus a fixed offset.
    fn now(&self) -> f64 {
        host_ns() as f64 + DEV_OFFSET
    }
    fn sleep_until(&self, t: f64) {
        let left = t - self.now();
        if left > 0.0 {
            std::thread::sleep(std::time::Duration::from_nanos(left as u64));
        }
    }
    fn next_issue(&self) -> f64 {
        let t = self.issue.get().max(self.now() - 1e6) + 1_000.0;
        self.issue.set(t);
        t
    }
    /// Enqueue `dur` ns of work on stream s, issued at `at`; returns (start, end).
    fn work_at(&mut self, s: Stream, dur: f64, at: f64) -> (f64, f64) {
        let q = self.queue_of[s.0];
        let start = at.max(self.queue_time[q]).max(self.stream_end[s.0]);
        self.queue_time[q] = start;
        self.stream_end[s.0] = start + dur;
        (start, start + dur)
    }
    fn work(&mut self, s: Stream, dur: f64) -> (f64, f64) {
        let at = self.next_issue();
        self.work_at(s, dur, at)
    }
    fn stamp(&mut self, slot: Option<u32>, (a, b): (f64, f64)) {
        if let Some(i) = slot {
            let e = &mut self.stamps[i as usize];
            e.0 = e.0.min(a as u64);
            e.1 = e.1.max(b as u64);
        }
    }
}

impl Gpu for SimGpu {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn create_stream(&mut self, _p: Priority) -> Result<Stream> {
        self.queue_of.push(self.stream_end.len() % self.conns);
        self.stream_end.push(0.0);
        Ok(Stream(self.stream_end.len() - 1))
    }
    fn create_event(&mut self) -> Result<Event> {
        self.events.push(f64::NAN); // never recorded: elapsed_ms fails, as CUDA does
        Ok(Event(self.events.len() - 1))
    }
    fn create_marker(&mut self) -> Result<Event> {
        self.create_event()
    }
    fn record(&mut self, e: Event, s: Option<Stream>) -> Result<()> {
        self.events[e.0] = match s {
            None => self.next_issue(),
            Some(s) => self.next_issue().max(self.stream_end[s.0]),
        };
        Ok(())
    }
    fn wait_event(&mut self, s: Stream, e: Event) -> Result<()> {
        self.stream_end[s.0] = self.stream_end[s.0].max(self.events[e.0]);
        Ok(())
    }
    fn elapsed_ms(&self, a: Event, b: Event) -> Result<f64> {
        let (x, y) = (self.events[a.0], self.events[b.0]);
        if x.is_nan() || y.is_nan() {
            return Err(GpuError::call(
                "cuEventElapsedTime",
                "event never recorded (CUDA_ERROR_INVALID_HANDLE)",
            ));
        }
        Ok((y - x) / 1e6)
    }
    fn sync_stream(&self, s: Stream) -> Result<()> {
        self.sleep_until(self.stream_end[s.0]);
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        self.sleep_until(self.stream_end.iter().copied().fold(0.0, f64::max));
        self.issue.set(self.now());
        Ok(())
    }
    fn launch(&mut self, s: Stream, k: &Kernel) -> Result<()> {
        match *k {
            Kernel::Spin {
                ns, stamp, grid, ..
            } => {
                let waves = grid.div_ceil(self.info.sm_count * 2).max(1);
                let iv = self.work(s, ns as f64 * waves as f64);
                self.stamp(stamp, iv);
            }
            Kernel::Tiny { stamp, flag, .. } => {
                let at = self.now();
                self.issue.set(self.issue.get().max(at));
                let iv = self.work_at(s, 2_000.0, at);
                self.stamp(stamp, iv);
                if let Some((slot, seq)) = flag {
                    self.flags[slot as usize].set((seq, iv.1));
                }
            }
            Kernel::Empty => {
                self.work(s, 1_000.0);
            }
        }
        Ok(())
    }
    fn reset_stamps(&mut self, slots: u32) -> Result<()> {
        self.stamps = vec![(u64::MAX, 0); slots as usize];
        Ok(())
    }
    fn read_stamps(&mut self, slots: u32) -> Result<Vec<(u64, u64)>> {
        Ok(self.stamps[..slots as usize].to_vec())
    }
    fn flag(&self, slot: u32) -> u64 {
        let (value, at) = self.flags[slot as usize].get();
        if self.now() >= at {
            value
        } else {
            0
        }
    }
    fn alloc(&mut self, _bytes: usize, _k: MemKind) -> Result<Buf> {
        Ok(Buf(0))
    }
    fn copy(&mut self, s: Stream, _d: Buf, _src: Buf, bytes: usize) -> Result<()> {
        self.work(s, bytes as f64 / 50.0); // 50 GB/s
        Ok(())
    }
    fn gemm_plan(&mut self, shape: GemmShape, _o: u32, _c: u32) -> Result<Gemm> {
        self.gemms.push(shape);
        Ok(Gemm(self.gemms.len() - 1))
    }
    fn gemm_algos(&self, _g: Gemm) -> Vec<AlgoInfo> {
        (0..3)
            .map(|index| AlgoInfo {
                index,
                workspace_bytes: 0,
                waves: 1.0,
            })
            .collect()
    }
    fn gemm_select(&mut self, _g: Gemm, _a: usize) {}
    fn gemm(&mut self, g: Gemm, s: Stream, _o: u32) -> Result<()> {
        let ns = self.gemms[g.0].flops() / 50e12 * 1e9; // 50 TFLOP/s
        self.work(s, ns);
        Ok(())
    }
    fn begin_capture(&mut self, s: Stream) -> Result<()> {
        self.capture_start = Some(self.stream_end[s.0].max(self.now()));
        Ok(())
    }
    fn end_capture(&mut self, s: Stream) -> Result<Graph> {
        let d = self.stream_end[s.0] - self.capture_start.take().expect("capturing");
        self.graphs.push(d);
        Ok(Graph(self.graphs.len() - 1))
    }
    fn launch_graph(&mut self, g: Graph, s: Stream) -> Result<()> {
        let d = self.graphs[g.0];
        self.work(s, d);
        Ok(())
    }
    fn spin_blocks_per_sm(&self, _b: u32) -> Result<u32> {
        Ok(2)
    }
    fn use_clock64(&mut self, _on: bool) -> Result<Option<f64>> {
        Ok(Some(1.98))
    }
}
