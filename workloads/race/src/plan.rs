//! What one iteration does, as data: which stream runs which operation on which buffer, the
//! events between streams, and what each buffer must hold afterwards. The GPU executes a plan;
//! the CPU simulator (sim.rs) executes the same plan, so the orchestration and its checks are
//! tested without a GPU. The planted bug is here: `missing_sync` drops the waits marked
//! `planted`, the ones between a producing and a consuming stream.

use crate::config::{Mode, RaceConfig};
use crate::pattern::{value, Region};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamId {
    Compute = 0,
    Comm = 1,
    Copy = 2,
}

pub const STREAMS: usize = 3;

/// Index into the plan's buffer table.
pub type BufId = usize;
/// Index of an event; each is recorded once per iteration.
pub type EventId = usize;

#[derive(Clone, Debug, PartialEq)]
pub struct BufSpec {
    pub name: &'static str,
    pub elems: usize,
    /// Page-locked (or pageable, `pin_memory: false`) host memory: the source of H2D copies.
    pub host: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The host writes `value` into a host buffer before any GPU work of the iteration.
    HostFill { buf: BufId, value: f32 },
    /// Asynchronous copy (host→device or device→device), `min(len)` elements.
    Copy { stream: StreamId, dst: BufId, src: BufId },
    /// A kernel that writes `value` everywhere; `slow`: each block first holds its SM for the
    /// race window, so the data lands late (a long producer).
    Fill { stream: StreamId, buf: BufId, value: f32, slow: bool },
    /// A kernel that copies `src` into `dst` (what compute saw), then holds for the race window
    /// when `slow` (a long consumer that read early).
    Consume { stream: StreamId, dst: BufId, src: BufId, slow: bool },
    /// `count` GEMMs of the configured size (compute load).
    Gemm { stream: StreamId, count: u32 },
    /// A one-block spin kernel of `us` (wire time a one-rank collective does not have).
    Delay { stream: StreamId, us: f64 },
    AllReduce { stream: StreamId, send: BufId, recv: BufId },
    AllToAll { stream: StreamId, send: BufId, recv: BufId },
    AllGather { stream: StreamId, send: BufId, recv: BufId },
    ReduceScatter { stream: StreamId, send: BufId, recv: BufId },
    Record { stream: StreamId, event: EventId },
    Wait { stream: StreamId, event: EventId },
}

impl Op {
    pub fn stream(&self) -> Option<StreamId> {
        use Op::*;
        match self {
            HostFill { .. } => None,
            Copy { stream, .. } | Fill { stream, .. } | Consume { stream, .. } | Gemm { stream, .. } | Delay { stream, .. } => Some(*stream),
            AllReduce { stream, .. } | AllToAll { stream, .. } | AllGather { stream, .. } | ReduceScatter { stream, .. } => Some(*stream),
            Record { stream, .. } | Wait { stream, .. } => Some(*stream),
        }
    }
}

/// A buffer's expected content after the iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub kind: String,
    pub buf: BufId,
    pub regions: Vec<Region>,
    pub layer: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub ops: Vec<Op>,
    pub checks: Vec<Check>,
    /// Buffers whose integer checksums must all be equal (fsdp, shared layer weights).
    pub checksum_group: Vec<(u32, BufId)>,
    pub events: usize,
    /// Waits dropped by `missing_sync`.
    pub dropped_waits: usize,
}

/// The buffers of a mode (the same every iteration) and the plan builder.
pub struct Layout {
    pub bufs: Vec<BufSpec>,
    cfg: RaceConfig,
    rank: u32,
    world: u32,
}

struct Builder<'a> {
    l: &'a Layout,
    ops: Vec<Op>,
    checks: Vec<Check>,
    events: usize,
    dropped: usize,
}

impl Builder<'_> {
    fn s(&self, s: StreamId) -> StreamId {
        if self.l.cfg.same_stream_mode {
            StreamId::Compute
        } else {
            s
        }
    }
    fn op(&mut self, op: Op) {
        self.ops.push(op);
    }
    fn record(&mut self, stream: StreamId) -> EventId {
        let event = self.events;
        self.events += 1;
        let stream = self.s(stream);
        self.ops.push(Op::Record { stream, event });
        event
    }
    /// A wait that the planted bug drops.
    fn planted_wait(&mut self, stream: StreamId, event: EventId) {
        if self.l.cfg.missing_sync {
            self.dropped += 1;
        } else {
            let stream = self.s(stream);
            self.ops.push(Op::Wait { stream, event });
        }
    }
    fn wait(&mut self, stream: StreamId, event: EventId) {
        let stream = self.s(stream);
        self.ops.push(Op::Wait { stream, event });
    }
    fn gemm(&mut self) {
        if self.l.cfg.simulate_compute {
            let stream = self.s(StreamId::Compute);
            self.ops.push(Op::Gemm { stream, count: self.l.cfg.gemm_layers });
        }
    }
    fn delay(&mut self) {
        if self.l.cfg.comm_delay_us > 0.0 {
            let stream = self.s(StreamId::Comm);
            self.ops.push(Op::Delay { stream, us: self.l.cfg.comm_delay_us });
        }
    }
    fn fill(&mut self, stream: StreamId, buf: BufId, value: f32, slow: bool) {
        let stream = self.s(stream);
        self.ops.push(Op::Fill { stream, buf, value, slow });
    }
    fn consume(&mut self, dst: BufId, src: BufId) {
        let stream = self.s(StreamId::Compute);
        self.ops.push(Op::Consume { stream, dst, src, slow: true });
    }
    fn check(&mut self, kind: &str, buf: BufId, regions: Vec<Region>, layer: Option<u32>) {
        self.checks.push(Check { kind: kind.into(), buf, regions, layer });
    }
    fn whole(&self, buf: BufId, expected: f32) -> Vec<Region> {
        vec![Region { offset: 0, len: self.l.bufs[buf].elems, expected, src_rank: None }]
    }
    /// Chunk j of `buf` came from rank j.
    fn by_source(&self, buf: BufId, f: impl Fn(u32) -> f32) -> Vec<Region> {
        let chunk = self.l.bufs[buf].elems / self.l.world as usize;
        (0..self.l.world)
            .map(|j| Region { offset: j as usize * chunk, len: chunk, expected: f(j), src_rank: Some(j) })
            .collect()
    }
}

fn buf(bufs: &mut Vec<BufSpec>, name: &'static str, elems: usize, host: bool) -> BufId {
    bufs.push(BufSpec { name, elems, host });
    bufs.len() - 1
}

// Buffer ids by mode, in allocation order (see `Layout::new`).
const H2D_HOST: BufId = 0;
const H2D_DEV: BufId = 1;
const H2D_SEEN: BufId = 2;
const H2D_HOST_NEXT: BufId = 3;
const H2D_DEV_NEXT: BufId = 4;
const FIRST_MODE_BUF: BufId = 5;

impl Layout {
    /// Sizes are checked against the world size here (a chunk per rank must not be empty).
    pub fn new(cfg: &RaceConfig, rank: u32, world: u32) -> Result<Layout, String> {
        let w = world as usize;
        let mut b = Vec::new();
        buf(&mut b, "h2d_host", cfg.h2d_tensor_size, true);
        buf(&mut b, "h2d", cfg.h2d_tensor_size, false);
        buf(&mut b, "h2d_seen", cfg.h2d_tensor_size, false);
        let prefetch = cfg.mode == Mode::Ddp && cfg.h2d_prefetch;
        let n = if prefetch { cfg.h2d_tensor_size } else { 0 };
        buf(&mut b, "h2d_host_next", n, true);
        buf(&mut b, "h2d_next", n, false);
        match cfg.mode {
            Mode::Default => {
                if cfg.alltoall_tensor_size < w {
                    return Err(format!("alltoall_tensor_size {} is smaller than the world size {world}", cfg.alltoall_tensor_size));
                }
                let a2a = cfg.alltoall_tensor_size / w * w;
                buf(&mut b, "a2a_send", a2a, false);
                buf(&mut b, "a2a_recv", a2a, false);
                buf(&mut b, "ar_send", cfg.allreduce_tensor_size, false);
                buf(&mut b, "ar_recv", cfg.allreduce_tensor_size, false);
            }
            Mode::Ddp => {
                let (buckets, size) = ddp_buckets(cfg);
                for _ in 0..buckets {
                    buf(&mut b, "grad", size, false);
                    buf(&mut b, "grad_reduced", size, false);
                }
            }
            Mode::Fsdp => {
                let s = cfg.fsdp_shard_size;
                let slots = if cfg.reuse_buffers { 2.min(cfg.num_layers as usize) } else { cfg.num_layers as usize };
                for _ in 0..slots {
                    buf(&mut b, "full_param", s * w, false);
                }
                for _ in 0..cfg.num_layers {
                    buf(&mut b, "shard", s, false);
                    buf(&mut b, "param_seen", s * w, false);
                    buf(&mut b, "full_grad", s * w, false);
                    buf(&mut b, "grad_shard", s, false);
                }
            }
        }
        Ok(Layout { bufs: b, cfg: cfg.clone(), rank, world })
    }

    /// The plan of iteration `iter`; `first` is the first iteration this process runs (a
    /// prefetching mode must load the current batch itself).
    pub fn plan(&self, iter: u64, first: bool) -> Plan {
        let mut b = Builder { l: self, ops: Vec::new(), checks: Vec::new(), events: 0, dropped: 0 };
        let mut group = Vec::new();
        match self.cfg.mode {
            Mode::Default => self.default_mode(&mut b, iter),
            Mode::Ddp => self.ddp(&mut b, iter, first),
            Mode::Fsdp => self.fsdp(&mut b, iter, &mut group),
        }
        Plan { ops: b.ops, checks: b.checks, checksum_group: group, events: b.events, dropped_waits: b.dropped }
    }

    /// H2D of the batch on the copy stream; compute reads it (planted wait).
    fn h2d(&self, b: &mut Builder, iter: u64) {
        let v = value::h2d(self.rank, iter);
        b.op(Op::HostFill { buf: H2D_HOST, value: v });
        let s = b.s(StreamId::Copy);
        b.op(Op::Copy { stream: s, dst: H2D_DEV, src: H2D_HOST });
        let e = b.record(StreamId::Copy);
        b.planted_wait(StreamId::Compute, e);
        b.consume(H2D_SEEN, H2D_DEV);
        b.check("h2d", H2D_DEV, b.whole(H2D_DEV, v), None);
        b.check("h2d_consumed", H2D_SEEN, b.whole(H2D_SEEN, v), None);
    }

    /// TorchRec-like: H2D on the copy stream, all_to_all on the comm stream overlapping
    /// backward GEMMs, all_reduce on the compute stream.
    fn default_mode(&self, b: &mut Builder, iter: u64) {
        let (r, w) = (self.rank, self.world);
        let (a2a_send, a2a_recv, ar_send, ar_recv) = (FIRST_MODE_BUF, FIRST_MODE_BUF + 1, FIRST_MODE_BUF + 2, FIRST_MODE_BUF + 3);
        self.h2d(b, iter);
        b.gemm();
        b.fill(StreamId::Compute, a2a_send, value::from_src(r, w, iter, 0), true);
        let produced = b.record(StreamId::Compute);
        b.planted_wait(StreamId::Comm, produced);
        let s = b.s(StreamId::Comm);
        b.op(Op::AllToAll { stream: s, send: a2a_send, recv: a2a_recv });
        b.delay();
        let exchanged = b.record(StreamId::Comm);
        b.gemm();
        b.wait(StreamId::Compute, exchanged);
        b.fill(StreamId::Compute, ar_send, value::reduce_in(r, iter, 0), false);
        let s = b.s(StreamId::Compute);
        b.op(Op::AllReduce { stream: s, send: ar_send, recv: ar_recv });
        b.check("all_to_all", a2a_recv, b.by_source(a2a_recv, |j| value::from_src(j, w, iter, 0)), None);
        b.check("all_reduce", ar_recv, b.whole(ar_recv, value::reduce_out(w, iter, 0)), None);
    }

    /// Gradient all_reduce (one bucket or one per layer) on the comm stream overlapping the
    /// next layer's backward GEMMs; optionally the next batch prefetched into a second buffer.
    fn ddp(&self, b: &mut Builder, iter: u64, first: bool) {
        let (r, w) = (self.rank, self.world);
        if self.cfg.h2d_prefetch {
            let (cur, next) = if iter % 2 == 0 { (H2D_DEV, H2D_DEV_NEXT) } else { (H2D_DEV_NEXT, H2D_DEV) };
            let (hcur, hnext) = if iter % 2 == 0 { (H2D_HOST, H2D_HOST_NEXT) } else { (H2D_HOST_NEXT, H2D_HOST) };
            let cs = b.s(StreamId::Copy);
            let v = value::h2d(r, iter);
            if first {
                b.op(Op::HostFill { buf: hcur, value: v });
                b.op(Op::Copy { stream: cs, dst: cur, src: hcur });
            }
            let vn = value::h2d(r, iter + 1);
            b.op(Op::HostFill { buf: hnext, value: vn });
            let loaded = b.record(StreamId::Copy);
            b.op(Op::Copy { stream: cs, dst: next, src: hnext });
            // This batch was loaded by the previous iteration (synchronised) or just above.
            b.planted_wait(StreamId::Compute, loaded);
            b.consume(H2D_SEEN, cur);
            b.check("h2d_consumed", H2D_SEEN, b.whole(H2D_SEEN, v), None);
            b.check("h2d_prefetch", next, b.whole(next, vn), None);
        } else {
            self.h2d(b, iter);
        }
        b.gemm();
        let (buckets, _) = ddp_buckets(&self.cfg);
        let mut reduced = Vec::new();
        for k in 0..buckets {
            let (grad, red) = (FIRST_MODE_BUF + 2 * k, FIRST_MODE_BUF + 2 * k + 1);
            let layers = if self.cfg.ddp_bucketed { 1 } else { self.cfg.num_layers };
            for _ in 0..layers {
                b.gemm();
            }
            let salt = k as u64;
            b.fill(StreamId::Compute, grad, value::reduce_in(r, iter, salt), true);
            let produced = b.record(StreamId::Compute);
            b.planted_wait(StreamId::Comm, produced);
            let s = b.s(StreamId::Comm);
            b.op(Op::AllReduce { stream: s, send: grad, recv: red });
            b.delay();
            reduced.push(b.record(StreamId::Comm));
            b.check("all_reduce", red, b.whole(red, value::reduce_out(w, iter, salt)), Some(k as u32));
        }
        // The optimizer step needs every reduced gradient.
        for e in reduced {
            b.wait(StreamId::Compute, e);
        }
        b.gemm();
    }

    /// Per layer: all_gather of the shards on the comm stream, compute reads the gathered
    /// parameters (planted wait); backward: reduce_scatter of each layer's gradient.
    fn fsdp(&self, b: &mut Builder, iter: u64, group: &mut Vec<(u32, BufId)>) {
        let (r, w) = (self.rank, self.world);
        let layers = self.cfg.num_layers as usize;
        let slots = if self.cfg.reuse_buffers { 2.min(layers) } else { layers };
        let lbase = FIRST_MODE_BUF + slots;
        let (shard, seen, fgrad, gshard) = (|l: usize| lbase + 4 * l, |l: usize| lbase + 4 * l + 1, |l: usize| lbase + 4 * l + 2, |l: usize| lbase + 4 * l + 3);
        let param_salt = |l: usize| if self.cfg.shared_layer_weights { 0 } else { l as u64 };
        self.h2d(b, iter);
        let mut consumed: Vec<EventId> = Vec::new();
        for l in 0..layers {
            let full = FIRST_MODE_BUF + l % slots;
            if l >= slots {
                // The slot is reused: compute must be done reading layer l - slots.
                b.planted_wait(StreamId::Comm, consumed[l - slots]);
            }
            b.fill(StreamId::Comm, shard(l), value::from_src(r, w, iter, param_salt(l)), true);
            let s = b.s(StreamId::Comm);
            b.op(Op::AllGather { stream: s, send: shard(l), recv: full });
            b.delay();
            let gathered = b.record(StreamId::Comm);
            b.planted_wait(StreamId::Compute, gathered);
            b.consume(seen(l), full);
            consumed.push(b.record(StreamId::Compute));
            b.gemm();
            let salt = param_salt(l);
            b.check("all_gather", seen(l), b.by_source(seen(l), |j| value::from_src(j, w, iter, salt)), Some(l as u32));
            if self.cfg.shared_layer_weights {
                group.push((l as u32, seen(l)));
            }
        }
        for l in (0..layers).rev() {
            b.gemm();
            b.fill(StreamId::Compute, fgrad(l), value::reduce_in(r, iter, l as u64), true);
            let produced = b.record(StreamId::Compute);
            b.planted_wait(StreamId::Comm, produced);
            let s = b.s(StreamId::Comm);
            b.op(Op::ReduceScatter { stream: s, send: fgrad(l), recv: gshard(l) });
            b.delay();
            let done = b.record(StreamId::Comm);
            b.wait(StreamId::Compute, done);
            b.check("reduce_scatter", gshard(l), b.whole(gshard(l), value::reduce_out(w, iter, l as u64)), Some(l as u32));
        }
    }
}

/// (bucket count, elements per bucket) of ddp mode.
fn ddp_buckets(cfg: &RaceConfig) -> (usize, usize) {
    if cfg.ddp_bucketed {
        (cfg.num_layers as usize, cfg.allreduce_tensor_size)
    } else {
        (1, cfg.allreduce_tensor_size * cfg.num_layers as usize)
    }
}
