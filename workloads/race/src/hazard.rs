//! The ordering proof for plans: which accesses to a buffer are ordered by stream order and
//! events, and which conflicting pairs (read after write, write after read, write after write)
//! are not. A plan sequence without such a pair computes, under every legal interleaving, what
//! it computes in program order, which is what the checks expect (tests/orchestration.rs runs
//! program order); a pair that is not ordered is a race.
//!
//! The model is CUDA's: ops on one stream run in issue order; a wait orders its stream after
//! the event's latest record issued before the wait (possibly in an earlier iteration; with
//! none, the wait is a no-op); host fills happen at issue, so they precede every later device
//! op. With `barrier`, the host synchronises the device after each iteration (as the runner
//! does). Without it, iterations are issued back to back and only events order them; host
//! buffers, which only the host's synchronisation can protect, are then left out.

use crate::plan::{BufId, BufSpec, Op, Plan, STREAMS};

/// Vector-clock component of the host.
const HOST: usize = STREAMS;
const CLOCKS: usize = STREAMS + 1;

type Clock = [u64; CLOCKS];

fn join(a: &mut Clock, b: &Clock) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// One access to a buffer by op `op` of plan `iter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub iter: usize,
    pub op: usize,
    pub write: bool,
    /// Clock component of the accessing stream (or the host).
    unit: usize,
    tick: u64,
}

/// Two accesses to `buf`, at least one a write, that nothing orders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hazard {
    pub buf: BufId,
    pub first: Access,
    pub second: Access,
}

impl Hazard {
    /// `RAW`, `WAR` or `WAW`.
    pub fn kind(&self) -> &'static str {
        match (self.first.write, self.second.write) {
            (true, false) => "RAW",
            (false, true) => "WAR",
            _ => "WAW",
        }
    }
}

impl std::fmt::Display for Hazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on buffer {}: iteration {} op {} vs iteration {} op {}",
            self.kind(),
            self.buf,
            self.first.iter,
            self.first.op,
            self.second.iter,
            self.second.op
        )
    }
}

/// The buffers an op reads and writes (`true`: write).
pub fn accesses(op: &Op) -> Vec<(BufId, bool)> {
    match *op {
        Op::HostFill { buf, .. } | Op::Fill { buf, .. } => vec![(buf, true)],
        Op::Copy { dst, src, .. } | Op::Consume { dst, src, .. } => vec![(src, false), (dst, true)],
        Op::AllReduce { send, recv, .. }
        | Op::AllToAll { send, recv, .. }
        | Op::AllGather { send, recv, .. }
        | Op::ReduceScatter { send, recv, .. } => {
            vec![(send, false), (recv, true)]
        }
        Op::Gemm { .. } | Op::Delay { .. } | Op::Record { .. } | Op::Wait { .. } => Vec::new(),
    }
}

/// Happens-before over consecutive iterations' plans, as issued.
pub struct Order {
    /// Per plan, per op: the op's clock.
    pub clocks: Vec<Vec<Clock>>,
    units: Vec<Vec<usize>>,
}

impl Order {
    pub fn new(plans: &[Plan], barrier: bool) -> Order {
        let mut now: [Clock; CLOCKS] = [[0; CLOCKS]; CLOCKS];
        let events = plans.iter().map(|p| p.events).max().unwrap_or(0);
        let mut recorded: Vec<Option<Clock>> = vec![None; events];
        let (mut clocks, mut units) = (Vec::new(), Vec::new());
        for plan in plans {
            let (mut c, mut u) = (Vec::new(), Vec::new());
            for op in &plan.ops {
                let unit = op.stream().map_or(HOST, |s| s as usize);
                if unit != HOST {
                    // Issued after every host op so far.
                    let host = now[HOST];
                    join(&mut now[unit], &host);
                }
                if let Op::Wait { event, .. } = op {
                    if let Some(e) = recorded[*event] {
                        join(&mut now[unit], &e);
                    }
                }
                now[unit][unit] += 1;
                if let Op::Record { event, .. } = op {
                    recorded[*event] = Some(now[unit]);
                }
                c.push(now[unit]);
                u.push(unit);
            }
            if barrier {
                let mut all = [0; CLOCKS];
                now.iter().for_each(|x| join(&mut all, x));
                now = [all; CLOCKS];
            }
            clocks.push(c);
            units.push(u);
        }
        Order { clocks, units }
    }

    fn access(&self, iter: usize, op: usize, write: bool) -> Access {
        let unit = self.units[iter][op];
        Access {
            iter,
            op,
            write,
            unit,
            tick: self.clocks[iter][op][unit],
        }
    }

    /// Whether `a` (issued first) happens before `b`.
    pub fn before(&self, a: &Access, b: &Access) -> bool {
        self.clocks[b.iter][b.op][a.unit] >= a.tick
    }

    /// Whether op `a` happens before op `b`, both given as (iteration, op index).
    pub fn op_before(&self, a: (usize, usize), b: (usize, usize)) -> bool {
        let unit = self.units[a.0][a.1];
        self.clocks[b.0][b.1][unit] >= self.clocks[a.0][a.1][unit]
    }
}

/// Every conflicting pair of accesses that stream order, events (and with `barrier`, the
/// per-iteration synchronisation) leave unordered.
pub fn hazards(plans: &[Plan], bufs: &[BufSpec], barrier: bool) -> Vec<Hazard> {
    let order = Order::new(plans, barrier);
    let mut seen: Vec<Vec<Access>> = vec![Vec::new(); bufs.len()];
    let mut out = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        for (k, op) in plan.ops.iter().enumerate() {
            for (buf, write) in accesses(op) {
                if !barrier && bufs[buf].host {
                    continue;
                }
                let a = order.access(i, k, write);
                for p in &seen[buf] {
                    if (p.write || write) && !order.before(p, &a) {
                        out.push(Hazard {
                            buf,
                            first: *p,
                            second: a,
                        });
                    }
                }
                seen[buf].push(a);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::StreamId::{self, Comm, Compute};

    fn plan(ops: Vec<Op>) -> Plan {
        Plan {
            ops,
            checks: Vec::new(),
            checksum_group: Vec::new(),
            events: 4,
            dropped_waits: 0,
        }
    }

    fn bufs() -> Vec<BufSpec> {
        (0..3)
            .map(|_| BufSpec {
                name: "b",
                elems: 1,
                host: false,
            })
            .collect()
    }

    fn fill(stream: StreamId, buf: BufId) -> Op {
        Op::Fill {
            stream,
            buf,
            value: 1.0,
            slow: false,
        }
    }

    fn gather(send: BufId, recv: BufId) -> Op {
        Op::AllGather {
            stream: Comm,
            send,
            recv,
        }
    }

    #[test]
    fn an_event_orders_a_read_after_its_write_and_its_absence_is_a_race() {
        let ordered = plan(vec![
            fill(Compute, 0),
            Op::Record {
                stream: Compute,
                event: 0,
            },
            Op::Wait {
                stream: Comm,
                event: 0,
            },
            gather(0, 1),
        ]);
        assert!(hazards(&[ordered], &bufs(), true).is_empty());
        let racy = plan(vec![fill(Compute, 0), gather(0, 1)]);
        let h = hazards(&[racy], &bufs(), true);
        assert_eq!((h.len(), h[0].kind(), h[0].buf), (1, "RAW", 0));
    }

    #[test]
    fn a_wait_is_on_the_latest_record_issued_before_it() {
        // The wait is issued before the record: it does not order the fill.
        let early = plan(vec![
            Op::Wait {
                stream: Comm,
                event: 0,
            },
            fill(Compute, 0),
            Op::Record {
                stream: Compute,
                event: 0,
            },
            gather(0, 1),
        ]);
        assert_eq!(hazards(&[early], &bufs(), true).len(), 1);
        // Re-recorded before the fill: the wait sees the first record only.
        let stale = plan(vec![
            Op::Record {
                stream: Compute,
                event: 0,
            },
            Op::Wait {
                stream: Comm,
                event: 0,
            },
            fill(Compute, 0),
            gather(0, 1),
        ]);
        assert_eq!(hazards(&[stale], &bufs(), true).len(), 1);
    }

    #[test]
    fn overwriting_before_the_last_read_is_a_race_across_iterations_without_the_barrier() {
        // Compute writes buffer 0, comm reads it; the next iteration's write races with the
        // read unless the host synchronises or compute waits for the read.
        let it = |war: bool| {
            let mut ops = Vec::new();
            if war {
                ops.push(Op::Wait {
                    stream: Compute,
                    event: 1,
                });
            }
            ops.extend([
                fill(Compute, 0),
                Op::Record {
                    stream: Compute,
                    event: 0,
                },
                Op::Wait {
                    stream: Comm,
                    event: 0,
                },
                gather(0, 1),
                Op::Record {
                    stream: Comm,
                    event: 1,
                },
            ]);
            plan(ops)
        };
        let bare = [it(false), it(false)];
        assert!(hazards(&bare, &bufs(), true).is_empty());
        let h = hazards(&bare, &bufs(), false);
        assert!(
            h.iter().any(|h| h.kind() == "WAR"
                && h.buf == 0
                && (h.first.iter, h.second.iter) == (0, 1)),
            "{h:?}"
        );
        assert!(hazards(&[it(true), it(true), it(true)], &bufs(), false).is_empty());
    }

    #[test]
    fn host_writes_precede_later_device_work_and_need_the_barrier_after_it() {
        let mut b = bufs();
        b[2].host = true;
        let it = || {
            plan(vec![
                Op::HostFill { buf: 2, value: 1.0 },
                Op::Copy {
                    stream: StreamId::Copy,
                    dst: 0,
                    src: 2,
                },
            ])
        };
        assert!(hazards(&[it(), it()], &b, true).is_empty());
        // Back to back, the host buffer is left out (only the host's synchronisation orders it)
        // and the device copies are ordered by their stream.
        assert!(hazards(&[it(), it()], &b, false).is_empty());
        b[2].host = false;
        assert!(!hazards(&[it(), it()], &b, false).is_empty());
    }
}
