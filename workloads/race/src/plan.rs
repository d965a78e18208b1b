//! What one iteration does, as data: which stream runs which operation on which buffer, the
//! events between streams, and what each buffer must hold afterwards. The GPU executes a plan;
//! the CPU simulator (sim.rs) executes the same plan, so the orchestration and its checks are
//! tested without a GPU. The planted bug is here: `missing_sync` drops the waits marked
//! `planted`, the ones between a producing and a consuming stream.
//!
//! Two schedules. The single-buffered one (the planted bug, and `buffer_depth: 1`) produces and
//! communicates each buffer within one iteration, so its waits serialise communication with
//! compute. The pipelined one (the fix, `buffer_depth` ≥ 2) keeps `buffer_depth` copies of every
//! buffer that crosses streams: compute writes what iteration t+1 communicates while iteration t's
//! collective reads the copy written one iteration earlier. Every access waits on the event of
//! exactly the access it depends on: a read on its buffer's last write, an overwrite on its
//! buffer's last read (events `written(b)` and `read(b)`, see [`ev_written`]). hazard.rs checks
//! that this orders every conflicting pair; timing.rs compares the schedules' critical paths.

use crate::config::{Mode, RaceConfig, MAX_BUFFER_DEPTH};
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
    HostFill {
        buf: BufId,
        value: f32,
    },
    /// Asynchronous copy (host→device or device→device), `min(len)` elements.
    Copy {
        stream: StreamId,
        dst: BufId,
        src: BufId,
    },
    /// A kernel that writes `value` everywhere; `slow`: each block first holds its SM for the
    /// race window, so the data lands late (a long producer).
    Fill {
        stream: StreamId,
        buf: BufId,
        value: f32,
        slow: bool,
    },
    /// A kernel that copies `src` into `dst` (what compute saw), then holds for the race window
    /// when `slow` (a long consumer that read early).
    Consume {
        stream: StreamId,
        dst: BufId,
        src: BufId,
        slow: bool,
    },
    /// `count` GEMMs of the configured size (compute load).
    Gemm {
        stream: StreamId,
        count: u32,
    },
    /// A one-block spin kernel of `us` (wire time a one-rank collective does not have).
    Delay {
        stream: StreamId,
        us: f64,
    },
    AllReduce {
        stream: StreamId,
        send: BufId,
        recv: BufId,
    },
    AllToAll {
        stream: StreamId,
        send: BufId,
        recv: BufId,
    },
    AllGather {
        stream: StreamId,
        send: BufId,
        recv: BufId,
    },
    ReduceScatter {
        stream: StreamId,
        send: BufId,
        recv: BufId,
    },
    Record {
        stream: StreamId,
        event: EventId,
    },
    Wait {
        stream: StreamId,
        event: EventId,
    },
}

impl Op {
    pub fn stream(&self) -> Option<StreamId> {
        use Op::*;
        match self {
            HostFill { .. } => None,
            Copy { stream, .. }
            | Fill { stream, .. }
            | Consume { stream, .. }
            | Gemm { stream, .. }
            | Delay { stream, .. } => Some(*stream),
            AllReduce { stream, .. }
            | AllToAll { stream, .. }
            | AllGather { stream, .. }
            | ReduceScatter { stream, .. } => Some(*stream),
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
    /// The pipelined schedule's buffer copies; `None`: single-buffered.
    pipe: Option<Pipe>,
}

/// Buffer ids of the pipelined schedule. `x[t % depth]` is the copy that iteration t's
/// consumer reads (written during iteration t-1, or by the first iteration's prologue).
#[derive(Clone, Debug)]
struct Pipe {
    depth: usize,
    h2d_host: Vec<BufId>,
    h2d_dev: Vec<BufId>,
    /// What compute writes and the comm stream reads: the all_to_all input (default), each
    /// bucket's gradient (ddp), each layer's full gradient (fsdp).
    send: Vec<Vec<BufId>>,
    /// fsdp: the ring of gathered-parameter buffers ([`fsdp_ring`]); use u (layer l of
    /// iteration t is use t·layers + l) lands in `ring[u % len]`.
    ring: Vec<BufId>,
}

/// Event recorded after the last write of buffer `b` (pipelined schedule).
pub fn ev_written(b: BufId) -> EventId {
    2 * b
}

/// Event recorded after the last read of buffer `b` (pipelined schedule).
pub fn ev_read(b: BufId) -> EventId {
    2 * b + 1
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
            self.ops.push(Op::Gemm {
                stream,
                count: self.l.cfg.gemm_layers,
            });
        }
    }
    fn delay(&mut self) {
        if self.l.cfg.comm_delay_us > 0.0 {
            let stream = self.s(StreamId::Comm);
            self.ops.push(Op::Delay {
                stream,
                us: self.l.cfg.comm_delay_us,
            });
        }
    }
    fn fill(&mut self, stream: StreamId, buf: BufId, value: f32, slow: bool) {
        let stream = self.s(stream);
        self.ops.push(Op::Fill {
            stream,
            buf,
            value,
            slow,
        });
    }
    fn consume(&mut self, dst: BufId, src: BufId) {
        let stream = self.s(StreamId::Compute);
        self.ops.push(Op::Consume {
            stream,
            dst,
            src,
            slow: true,
        });
    }
    fn record_ev(&mut self, stream: StreamId, event: EventId) {
        let stream = self.s(stream);
        self.ops.push(Op::Record { stream, event });
    }
    /// `stream` has finished writing `buf`.
    fn wrote(&mut self, stream: StreamId, buf: BufId) {
        self.record_ev(stream, ev_written(buf));
    }
    /// `stream` has finished reading `buf`.
    fn read_done(&mut self, stream: StreamId, buf: BufId) {
        self.record_ev(stream, ev_read(buf));
    }
    /// Before `stream` reads `buf`: wait for its last writer (read after write).
    fn after_write(&mut self, stream: StreamId, buf: BufId) {
        self.wait(stream, ev_written(buf));
    }
    /// Before `stream` overwrites `buf`: wait for the last reader of its previous contents
    /// (write after read). Waiting on an event never recorded is a no-op, as in CUDA.
    fn after_read(&mut self, stream: StreamId, buf: BufId) {
        self.wait(stream, ev_read(buf));
    }
    fn check(&mut self, kind: &str, buf: BufId, regions: Vec<Region>, layer: Option<u32>) {
        self.checks.push(Check {
            kind: kind.into(),
            buf,
            regions,
            layer,
        });
    }
    fn whole(&self, buf: BufId, expected: f32) -> Vec<Region> {
        vec![Region {
            offset: 0,
            len: self.l.bufs[buf].elems,
            expected,
            src_rank: None,
        }]
    }
    /// Chunk j of `buf` came from rank j.
    fn by_source(&self, buf: BufId, f: impl Fn(u32) -> f32) -> Vec<Region> {
        let chunk = self.l.bufs[buf].elems / self.l.world as usize;
        (0..self.l.world)
            .map(|j| Region {
                offset: j as usize * chunk,
                len: chunk,
                expected: f(j),
                src_rank: Some(j),
            })
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
    /// Sizes are checked against the world size here (a chunk per rank must not be empty), and
    /// the pipelined schedule's depth against the patterns ([`stale_collision`]).
    pub fn new(cfg: &RaceConfig, rank: u32, world: u32) -> Result<Layout, String> {
        if cfg.pipelined() {
            if let Some(why) = stale_collision(cfg, world) {
                return Err(why);
            }
        }
        Layout::unchecked(cfg, rank, world)
    }

    /// `new` without the depth check: for tests that show what the check refuses.
    pub fn unchecked(cfg: &RaceConfig, rank: u32, world: u32) -> Result<Layout, String> {
        let w = world as usize;
        let mut b = Vec::new();
        buf(&mut b, "h2d_host", cfg.h2d_tensor_size, true);
        buf(&mut b, "h2d", cfg.h2d_tensor_size, false);
        buf(&mut b, "h2d_seen", cfg.h2d_tensor_size, false);
        let prefetch = cfg.mode == Mode::Ddp && cfg.h2d_prefetch;
        let n = if prefetch || cfg.pipelined() {
            cfg.h2d_tensor_size
        } else {
            0
        };
        // Pipelined, the two batch buffers are copies 0 and 1 of one rotation.
        let (host1, dev1) = if cfg.pipelined() {
            ("h2d_host", "h2d")
        } else {
            ("h2d_host_next", "h2d_next")
        };
        buf(&mut b, host1, n, true);
        buf(&mut b, dev1, n, false);
        match cfg.mode {
            Mode::Default => {
                if cfg.alltoall_tensor_size < w {
                    return Err(format!(
                        "alltoall_tensor_size {} is smaller than the world size {world}",
                        cfg.alltoall_tensor_size
                    ));
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
                for _ in 0..fsdp_slots(cfg) {
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
        let pipe = cfg.pipelined().then(|| Pipe::new(cfg, &mut b));
        Ok(Layout {
            bufs: b,
            cfg: cfg.clone(),
            rank,
            world,
            pipe,
        })
    }

    /// Copies of each buffer that crosses streams (1: single-buffered).
    pub fn buffer_depth(&self) -> usize {
        self.pipe.as_ref().map_or(1, |p| p.depth)
    }

    /// The plan of iteration `iter`; `first` is the first iteration this process runs (a
    /// prefetching mode must load the current batch itself).
    pub fn plan(&self, iter: u64, first: bool) -> Plan {
        let mut b = Builder {
            l: self,
            ops: Vec::new(),
            checks: Vec::new(),
            events: 0,
            dropped: 0,
        };
        let mut group = Vec::new();
        if let Some(p) = &self.pipe {
            match self.cfg.mode {
                Mode::Default => self.default_pipelined(&mut b, p, iter, first),
                Mode::Ddp => self.ddp_pipelined(&mut b, p, iter, first),
                Mode::Fsdp => self.fsdp_pipelined(&mut b, p, iter, first, &mut group),
            }
            // Events are per buffer and live across iterations.
            b.events = 2 * self.bufs.len();
        } else {
            match self.cfg.mode {
                Mode::Default => self.default_mode(&mut b, iter),
                Mode::Ddp => self.ddp(&mut b, iter, first),
                Mode::Fsdp => self.fsdp(&mut b, iter, &mut group),
            }
        }
        Plan {
            ops: b.ops,
            checks: b.checks,
            checksum_group: group,
            events: b.events,
            dropped_waits: b.dropped,
        }
    }

    /// H2D of the batch on the copy stream; compute reads it (planted wait).
    fn h2d(&self, b: &mut Builder, iter: u64) {
        let v = value::h2d(self.rank, iter);
        b.op(Op::HostFill {
            buf: H2D_HOST,
            value: v,
        });
        let s = b.s(StreamId::Copy);
        b.op(Op::Copy {
            stream: s,
            dst: H2D_DEV,
            src: H2D_HOST,
        });
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
        let (a2a_send, a2a_recv, ar_send, ar_recv) = (
            FIRST_MODE_BUF,
            FIRST_MODE_BUF + 1,
            FIRST_MODE_BUF + 2,
            FIRST_MODE_BUF + 3,
        );
        self.h2d(b, iter);
        b.gemm();
        b.fill(
            StreamId::Compute,
            a2a_send,
            value::from_src(r, w, iter, 0),
            true,
        );
        let produced = b.record(StreamId::Compute);
        b.planted_wait(StreamId::Comm, produced);
        let s = b.s(StreamId::Comm);
        b.op(Op::AllToAll {
            stream: s,
            send: a2a_send,
            recv: a2a_recv,
        });
        b.delay();
        let exchanged = b.record(StreamId::Comm);
        b.gemm();
        b.wait(StreamId::Compute, exchanged);
        b.fill(
            StreamId::Compute,
            ar_send,
            value::reduce_in(r, iter, 0),
            false,
        );
        let s = b.s(StreamId::Compute);
        b.op(Op::AllReduce {
            stream: s,
            send: ar_send,
            recv: ar_recv,
        });
        b.check(
            "all_to_all",
            a2a_recv,
            b.by_source(a2a_recv, |j| value::from_src(j, w, iter, 0)),
            None,
        );
        b.check(
            "all_reduce",
            ar_recv,
            b.whole(ar_recv, value::reduce_out(w, iter, 0)),
            None,
        );
    }

    /// Gradient all_reduce (one bucket or one per layer) on the comm stream overlapping the
    /// next layer's backward GEMMs; optionally the next batch prefetched into a second buffer.
    fn ddp(&self, b: &mut Builder, iter: u64, first: bool) {
        let (r, w) = (self.rank, self.world);
        if self.cfg.h2d_prefetch {
            let (cur, next) = if iter % 2 == 0 {
                (H2D_DEV, H2D_DEV_NEXT)
            } else {
                (H2D_DEV_NEXT, H2D_DEV)
            };
            let (hcur, hnext) = if iter % 2 == 0 {
                (H2D_HOST, H2D_HOST_NEXT)
            } else {
                (H2D_HOST_NEXT, H2D_HOST)
            };
            let cs = b.s(StreamId::Copy);
            let v = value::h2d(r, iter);
            if first {
                b.op(Op::HostFill {
                    buf: hcur,
                    value: v,
                });
                b.op(Op::Copy {
                    stream: cs,
                    dst: cur,
                    src: hcur,
                });
            }
            let vn = value::h2d(r, iter + 1);
            b.op(Op::HostFill {
                buf: hnext,
                value: vn,
            });
            let loaded = b.record(StreamId::Copy);
            b.op(Op::Copy {
                stream: cs,
                dst: next,
                src: hnext,
            });
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
            let layers = if self.cfg.ddp_bucketed {
                1
            } else {
                self.cfg.num_layers
            };
            for _ in 0..layers {
                b.gemm();
            }
            let salt = k as u64;
            b.fill(
                StreamId::Compute,
                grad,
                value::reduce_in(r, iter, salt),
                true,
            );
            let produced = b.record(StreamId::Compute);
            b.planted_wait(StreamId::Comm, produced);
            let s = b.s(StreamId::Comm);
            b.op(Op::AllReduce {
                stream: s,
                send: grad,
                recv: red,
            });
            b.delay();
            reduced.push(b.record(StreamId::Comm));
            b.check(
                "all_reduce",
                red,
                b.whole(red, value::reduce_out(w, iter, salt)),
                Some(k as u32),
            );
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
        let slots = fsdp_slots(&self.cfg);
        let lbase = FIRST_MODE_BUF + slots;
        let (shard, seen, fgrad, gshard) = (
            |l: usize| lbase + 4 * l,
            |l: usize| lbase + 4 * l + 1,
            |l: usize| lbase + 4 * l + 2,
            |l: usize| lbase + 4 * l + 3,
        );
        let param_salt = |l: usize| {
            if self.cfg.shared_layer_weights {
                0
            } else {
                l as u64
            }
        };
        self.h2d(b, iter);
        let mut consumed: Vec<EventId> = Vec::new();
        for l in 0..layers {
            let full = FIRST_MODE_BUF + l % slots;
            if l >= slots {
                // The slot is reused: compute must be done reading layer l - slots.
                b.planted_wait(StreamId::Comm, consumed[l - slots]);
            }
            b.fill(
                StreamId::Comm,
                shard(l),
                value::from_src(r, w, iter, param_salt(l)),
                true,
            );
            let s = b.s(StreamId::Comm);
            b.op(Op::AllGather {
                stream: s,
                send: shard(l),
                recv: full,
            });
            b.delay();
            let gathered = b.record(StreamId::Comm);
            b.planted_wait(StreamId::Compute, gathered);
            b.consume(seen(l), full);
            consumed.push(b.record(StreamId::Compute));
            b.gemm();
            let salt = param_salt(l);
            b.check(
                "all_gather",
                seen(l),
                b.by_source(seen(l), |j| value::from_src(j, w, iter, salt)),
                Some(l as u32),
            );
            if self.cfg.shared_layer_weights {
                group.push((l as u32, seen(l)));
            }
        }
        for l in (0..layers).rev() {
            b.gemm();
            b.fill(
                StreamId::Compute,
                fgrad(l),
                value::reduce_in(r, iter, l as u64),
                true,
            );
            let produced = b.record(StreamId::Compute);
            b.planted_wait(StreamId::Comm, produced);
            let s = b.s(StreamId::Comm);
            b.op(Op::ReduceScatter {
                stream: s,
                send: fgrad(l),
                recv: gshard(l),
            });
            b.delay();
            let done = b.record(StreamId::Comm);
            b.wait(StreamId::Compute, done);
            b.check(
                "reduce_scatter",
                gshard(l),
                b.whole(gshard(l), value::reduce_out(w, iter, l as u64)),
                Some(l as u32),
            );
        }
    }

    // ---- The pipelined schedule (the fix with `buffer_depth` ≥ 2) ----
    //
    // Same compute and communication work per iteration as the single-buffered schedule, in the
    // same order on each stream (fsdp: the comm stream's order changes, see `fsdp_pipelined`).
    // Iteration t's collective reads the copy of its input written during iteration t-1, while
    // compute writes iteration t+1's input into the next copy; the first iteration this process
    // runs also writes its own input first (the pipeline's prologue). Every expected value is
    // the one the single-buffered schedule checks at iteration t.

    /// The batch: iteration t+1's is copied in while iteration t computes (prefetch).
    fn h2d_pipelined(&self, b: &mut Builder, p: &Pipe, iter: u64, first: bool) {
        let r = self.rank;
        let load = |b: &mut Builder, t: u64| {
            let (host, dev) = (p.h2d_host[p.slot(t)], p.h2d_dev[p.slot(t)]);
            b.op(Op::HostFill {
                buf: host,
                value: value::h2d(r, t),
            });
            b.after_read(StreamId::Copy, dev);
            let s = b.s(StreamId::Copy);
            b.op(Op::Copy {
                stream: s,
                dst: dev,
                src: host,
            });
            b.wrote(StreamId::Copy, dev);
        };
        if first {
            load(b, iter);
        }
        let cur = p.h2d_dev[p.slot(iter)];
        b.after_write(StreamId::Compute, cur);
        b.consume(H2D_SEEN, cur);
        b.read_done(StreamId::Compute, cur);
        load(b, iter + 1);
        let (v, vn, next) = (
            value::h2d(r, iter),
            value::h2d(r, iter + 1),
            p.h2d_dev[p.slot(iter + 1)],
        );
        b.check("h2d", cur, b.whole(cur, v), None);
        b.check("h2d_consumed", H2D_SEEN, b.whole(H2D_SEEN, v), None);
        b.check("h2d_prefetch", next, b.whole(next, vn), None);
    }

    fn default_pipelined(&self, b: &mut Builder, p: &Pipe, iter: u64, first: bool) {
        let (r, w) = (self.rank, self.world);
        let (a2a_recv, ar_send, ar_recv) =
            (FIRST_MODE_BUF + 1, FIRST_MODE_BUF + 2, FIRST_MODE_BUF + 3);
        let sends = &p.send[0];
        // Compute writes iteration t's all_to_all input (slow producer), into copy t.
        let produce = |b: &mut Builder, t: u64| {
            let buf = sends[p.slot(t)];
            b.after_read(StreamId::Compute, buf);
            b.fill(StreamId::Compute, buf, value::from_src(r, w, t, 0), true);
            b.wrote(StreamId::Compute, buf);
        };
        self.h2d_pipelined(b, p, iter, first);
        if first {
            produce(b, iter);
        }
        // This iteration's all_to_all reads the copy written one iteration ago: nothing of this
        // iteration's compute is in its way.
        let cur = sends[p.slot(iter)];
        b.after_write(StreamId::Comm, cur);
        let s = b.s(StreamId::Comm);
        b.op(Op::AllToAll {
            stream: s,
            send: cur,
            recv: a2a_recv,
        });
        b.delay();
        b.read_done(StreamId::Comm, cur);
        b.wrote(StreamId::Comm, a2a_recv);
        b.gemm();
        produce(b, iter + 1);
        b.gemm();
        // One communicator: this all_reduce follows the all_to_all (as single-buffered).
        b.after_write(StreamId::Compute, a2a_recv);
        b.fill(
            StreamId::Compute,
            ar_send,
            value::reduce_in(r, iter, 0),
            false,
        );
        let s = b.s(StreamId::Compute);
        b.op(Op::AllReduce {
            stream: s,
            send: ar_send,
            recv: ar_recv,
        });
        b.check(
            "all_to_all",
            a2a_recv,
            b.by_source(a2a_recv, |j| value::from_src(j, w, iter, 0)),
            None,
        );
        b.check(
            "all_reduce",
            ar_recv,
            b.whole(ar_recv, value::reduce_out(w, iter, 0)),
            None,
        );
    }

    fn ddp_pipelined(&self, b: &mut Builder, p: &Pipe, iter: u64, first: bool) {
        let (r, w) = (self.rank, self.world);
        let (buckets, _) = ddp_buckets(&self.cfg);
        let reduced = |k: usize| FIRST_MODE_BUF + 2 * k + 1;
        // Compute writes bucket k's gradient for iteration t (slow producer), into copy t.
        let produce = |b: &mut Builder, t: u64, k: usize| {
            let buf = p.send[k][p.slot(t)];
            b.after_read(StreamId::Compute, buf);
            b.fill(
                StreamId::Compute,
                buf,
                value::reduce_in(r, t, k as u64),
                true,
            );
            b.wrote(StreamId::Compute, buf);
        };
        self.h2d_pipelined(b, p, iter, first);
        if first {
            (0..buckets).for_each(|k| produce(b, iter, k));
        }
        // This iteration's all_reduces read gradients written during the previous iteration, so
        // they overlap all of this iteration's forward and backward compute.
        for k in 0..buckets {
            let cur = p.send[k][p.slot(iter)];
            b.after_write(StreamId::Comm, cur);
            let s = b.s(StreamId::Comm);
            b.op(Op::AllReduce {
                stream: s,
                send: cur,
                recv: reduced(k),
            });
            b.delay();
            b.read_done(StreamId::Comm, cur);
            b.wrote(StreamId::Comm, reduced(k));
            b.check(
                "all_reduce",
                reduced(k),
                b.whole(reduced(k), value::reduce_out(w, iter, k as u64)),
                Some(k as u32),
            );
        }
        b.gemm();
        let layers = if self.cfg.ddp_bucketed {
            1
        } else {
            self.cfg.num_layers
        };
        for k in 0..buckets {
            for _ in 0..layers {
                b.gemm();
            }
            produce(b, iter + 1, k);
        }
        // The optimizer step needs every reduced gradient (as single-buffered).
        for k in 0..buckets {
            b.after_write(StreamId::Compute, reduced(k));
        }
        b.gemm();
    }

    /// Forward: layer l's parameters are gathered into the ring (`Pipe::ring`); the layers that
    /// fit are gathered for the next iteration while this one computes, the others (only when
    /// `reuse_buffers` holds fewer copies than layers) within the iteration once compute has
    /// read the ring buffer's previous use. Backward: each layer's gradient is written for the
    /// next iteration; this iteration's reduce_scatters read the previous iteration's. On the
    /// comm stream: in-iteration gathers, then the reduce_scatters (they need nothing from this
    /// iteration), then the next iteration's gathers (they wait for this forward's reads).
    fn fsdp_pipelined(
        &self,
        b: &mut Builder,
        p: &Pipe,
        iter: u64,
        first: bool,
        group: &mut Vec<(u32, BufId)>,
    ) {
        let (r, w) = (self.rank, self.world);
        let layers = self.cfg.num_layers as usize;
        let lbase = FIRST_MODE_BUF + fsdp_slots(&self.cfg);
        let (shard, seen, gshard) = (
            |l: usize| lbase + 4 * l,
            |l: usize| lbase + 4 * l + 1,
            |l: usize| lbase + 4 * l + 3,
        );
        let salt = |l: usize| {
            if self.cfg.shared_layer_weights {
                0
            } else {
                l as u64
            }
        };
        let ring = p.ring.len();
        let ring_buf =
            |t: u64, l: usize| p.ring[((t * layers as u64 + l as u64) % ring as u64) as usize];
        let gather = |b: &mut Builder, t: u64, l: usize| {
            let buf = ring_buf(t, l);
            b.fill(
                StreamId::Comm,
                shard(l),
                value::from_src(r, w, t, salt(l)),
                true,
            );
            b.after_read(StreamId::Comm, buf);
            let s = b.s(StreamId::Comm);
            b.op(Op::AllGather {
                stream: s,
                send: shard(l),
                recv: buf,
            });
            b.delay();
            b.wrote(StreamId::Comm, buf);
        };
        let produce = |b: &mut Builder, t: u64, l: usize| {
            let buf = p.send[l][p.slot(t)];
            b.after_read(StreamId::Compute, buf);
            b.fill(
                StreamId::Compute,
                buf,
                value::reduce_in(r, t, l as u64),
                true,
            );
            b.wrote(StreamId::Compute, buf);
        };
        let reduce_all = |b: &mut Builder| {
            for l in (0..layers).rev() {
                let cur = p.send[l][p.slot(iter)];
                b.after_write(StreamId::Comm, cur);
                let s = b.s(StreamId::Comm);
                b.op(Op::ReduceScatter {
                    stream: s,
                    send: cur,
                    recv: gshard(l),
                });
                b.delay();
                b.read_done(StreamId::Comm, cur);
            }
        };
        // Layers of the next iteration gathered during this one.
        let ahead = ring.min(layers);
        self.h2d_pipelined(b, p, iter, first);
        if first {
            (0..ahead).for_each(|l| gather(b, iter, l));
            (0..layers).rev().for_each(|l| produce(b, iter, l));
        }
        if ring >= layers {
            reduce_all(b);
        }
        for l in 0..layers {
            let full = ring_buf(iter, l);
            b.after_write(StreamId::Compute, full);
            b.consume(seen(l), full);
            b.read_done(StreamId::Compute, full);
            b.gemm();
            let sl = salt(l);
            b.check(
                "all_gather",
                seen(l),
                b.by_source(seen(l), |j| value::from_src(j, w, iter, sl)),
                Some(l as u32),
            );
            if self.cfg.shared_layer_weights {
                group.push((l as u32, seen(l)));
            }
            // Layer l + ring reuses layer l's buffer, which compute has just read.
            if l + ring < layers {
                gather(b, iter, l + ring);
                if l + ring == layers - 1 {
                    reduce_all(b);
                }
            }
        }
        (0..ahead).for_each(|l| gather(b, iter + 1, l));
        for l in (0..layers).rev() {
            b.gemm();
            produce(b, iter + 1, l);
            b.check(
                "reduce_scatter",
                gshard(l),
                b.whole(gshard(l), value::reduce_out(w, iter, l as u64)),
                Some(l as u32),
            );
        }
    }
}

impl Pipe {
    fn new(cfg: &RaceConfig, b: &mut Vec<BufSpec>) -> Pipe {
        let n = cfg.buffer_depth as usize;
        let h2d_host = copies(b, vec![H2D_HOST, H2D_HOST_NEXT], n);
        let h2d_dev = copies(b, vec![H2D_DEV, H2D_DEV_NEXT], n);
        let (send, ring) = match cfg.mode {
            Mode::Default => (vec![copies(b, vec![FIRST_MODE_BUF], n)], Vec::new()),
            Mode::Ddp => {
                let (buckets, _) = ddp_buckets(cfg);
                (
                    (0..buckets)
                        .map(|k| copies(b, vec![FIRST_MODE_BUF + 2 * k], n))
                        .collect(),
                    Vec::new(),
                )
            }
            Mode::Fsdp => {
                let slots = fsdp_slots(cfg);
                let lbase = FIRST_MODE_BUF + slots;
                let send = (0..cfg.num_layers as usize)
                    .map(|l| copies(b, vec![lbase + 4 * l + 2], n))
                    .collect();
                (
                    send,
                    copies(
                        b,
                        (FIRST_MODE_BUF..FIRST_MODE_BUF + slots).collect(),
                        fsdp_ring(cfg, n),
                    ),
                )
            }
        };
        Pipe {
            depth: n,
            h2d_host,
            h2d_dev,
            send,
            ring,
        }
    }

    /// The copy that holds iteration t's data.
    fn slot(&self, t: u64) -> usize {
        (t % self.depth as u64) as usize
    }
}

/// `have`, extended to `want` buffers by copies of `have[0]`'s spec (`want` ≥ 1).
fn copies(b: &mut Vec<BufSpec>, mut have: Vec<BufId>, want: usize) -> Vec<BufId> {
    have.truncate(want);
    while have.len() < want {
        let spec = b[have[0]].clone();
        b.push(spec);
        have.push(b.len() - 1);
    }
    have
}

/// Gathered-parameter buffers of the pipelined fsdp schedule: `depth` copies of each reused
/// slot, but no more than one per layer (then layer l's previous contents are its own of the
/// previous iteration, and every layer of the next iteration can be gathered ahead).
fn fsdp_ring(cfg: &RaceConfig, depth: usize) -> usize {
    (fsdp_slots(cfg) * depth).min(cfg.num_layers as usize)
}

/// Gathered-parameter buffers of the single-buffered fsdp schedule.
fn fsdp_slots(cfg: &RaceConfig) -> usize {
    let layers = cfg.num_layers as usize;
    if cfg.reuse_buffers {
        2.min(layers)
    } else {
        layers
    }
}

/// Why the pipelined schedule's checks would be weaker than the single-buffered one's, or
/// `None`. A buffer copy's previous contents are its role's of `buffer_depth` iterations earlier
/// (a ring buffer's: an earlier layer-use's, see [`fsdp_ring`]). A consumer that read too early,
/// or a producer that overwrote too early, leaves those contents behind, so they must differ from
/// what the check expects; the patterns repeat (pattern.rs), so some depths cannot be told apart
/// at some world sizes. The message names a depth that works.
pub fn stale_collision(cfg: &RaceConfig, world: u32) -> Option<String> {
    let why = collision(cfg, world, cfg.buffer_depth as u64)?;
    let hint = match (2..=MAX_BUFFER_DEPTH).find(|&d| collision(cfg, world, d as u64).is_none()) {
        Some(d) => format!("buffer_depth: {d}"),
        None => "buffer_depth: 1 (single-buffered)".into(),
    };
    Some(format!(
        "buffer_depth {} at world size {world}: {why}, so a stale copy could not be told from a fresh one; use {hint}",
        cfg.buffer_depth
    ))
}

fn collision(cfg: &RaceConfig, world: u32, depth: u64) -> Option<String> {
    let k = value::src_period(world);
    if depth % value::H2D_PERIOD == 0 {
        return Some(format!(
            "batches {depth} iterations apart carry the same pattern"
        ));
    }
    let grads = |what: &str| {
        (depth % value::REDUCE_PERIOD == 0)
            .then(|| format!("{what} {depth} iterations apart carry the same pattern"))
    };
    match cfg.mode {
        Mode::Default => (depth % k == 0)
            .then(|| format!("all_to_all inputs {depth} iterations apart carry the same pattern")),
        Mode::Ddp => grads("gradients"),
        Mode::Fsdp => {
            if let Some(why) = grads("gradients") {
                return Some(why);
            }
            let (layers, ring) = (cfg.num_layers as u64, fsdp_ring(cfg, depth as usize) as u64);
            let salt = |l: u64| if cfg.shared_layer_weights { 0 } else { l };
            // Use u = t·layers + l follows use u - ring in the same buffer; the difference of
            // their patterns does not depend on t.
            let t = ring;
            (0..layers).find_map(|l| {
                let prev = t * layers + l - ring;
                let (t0, l0) = (prev / layers, prev % layers);
                // Shared weights: every layer of one iteration carries the same pattern by design
                // (the single-buffered schedule's reused slots are the same).
                let by_design = t0 == t && cfg.shared_layer_weights;
                let same = (t + salt(l)) % k == (t0 + salt(l0)) % k;
                (same && !by_design).then(|| format!("layer {l}'s gathered parameters and the ring buffer's previous contents (layer {l0}, {} iteration(s) earlier) carry the same pattern", t - t0))
            })
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
