//! A CPU model of the streams: executes plans for one or several ranks, either in program order
//! (what a correct schedule computes) or, for one rank, in any interleaving of the three
//! streams that respects stream order and event waits (what a GPU may do). Used by the tests and
//! by `--backend sim`, so the orchestration, patterns and checks run without a GPU.

use crate::pattern::Dtype;
use crate::plan::{BufSpec, Op, Plan, STREAMS};

pub struct Sim {
    pub dtype: Dtype,
    /// ranks × buffers × bytes.
    pub mem: Vec<Vec<Vec<u8>>>,
}

impl Sim {
    pub fn new(bufs: &[BufSpec], dtype: Dtype, world: u32) -> Sim {
        let one: Vec<Vec<u8>> = bufs
            .iter()
            .map(|b| vec![0u8; b.elems * dtype.bytes()])
            .collect();
        Sim {
            dtype,
            mem: vec![one; world as usize],
        }
    }

    fn elems(&self, r: usize, b: usize) -> usize {
        self.mem[r][b].len() / self.dtype.bytes()
    }

    fn local(&mut self, r: usize, op: &Op) {
        let d = self.dtype;
        match *op {
            Op::HostFill { buf, value } | Op::Fill { buf, value, .. } => {
                let n = self.elems(r, buf);
                self.mem[r][buf] = d.fill(n, value);
            }
            Op::Copy { dst, src, .. } | Op::Consume { dst, src, .. } => {
                let n = self.mem[r][dst].len().min(self.mem[r][src].len());
                let s = self.mem[r][src][..n].to_vec();
                self.mem[r][dst][..n].copy_from_slice(&s);
            }
            _ => {}
        }
    }

    /// A collective over all ranks (all of them are at the same op).
    fn collective(&mut self, op: &Op) {
        let d = self.dtype;
        let w = self.mem.len();
        let get = |m: &Vec<u8>, i: usize| d.get(m, i);
        match *op {
            Op::AllReduce { send, recv, .. } => {
                let n = self.elems(0, recv);
                let sum: Vec<f32> = (0..n)
                    .map(|i| (0..w).map(|r| get(&self.mem[r][send], i)).sum())
                    .collect();
                for r in 0..w {
                    self.mem[r][recv] = sum.iter().flat_map(|x| bytes(d, *x)).collect();
                }
            }
            Op::AllToAll { send, recv, .. } => {
                let c = self.elems(0, send) / w * d.bytes();
                let old: Vec<Vec<u8>> = (0..w).map(|r| self.mem[r][send].clone()).collect();
                for r in 0..w {
                    for (j, o) in old.iter().enumerate() {
                        self.mem[r][recv][j * c..(j + 1) * c]
                            .copy_from_slice(&o[r * c..(r + 1) * c]);
                    }
                }
            }
            Op::AllGather { send, recv, .. } => {
                let c = self.mem[0][send].len();
                let old: Vec<Vec<u8>> = (0..w).map(|r| self.mem[r][send].clone()).collect();
                for r in 0..w {
                    for (j, o) in old.iter().enumerate() {
                        self.mem[r][recv][j * c..(j + 1) * c].copy_from_slice(o);
                    }
                }
            }
            Op::ReduceScatter { send, recv, .. } => {
                let n = self.elems(0, recv);
                for r in 0..w {
                    let part: Vec<u8> = (0..n)
                        .flat_map(|i| {
                            bytes(d, (0..w).map(|q| get(&self.mem[q][send], r * n + i)).sum())
                        })
                        .collect();
                    self.mem[r][recv] = part;
                }
            }
            _ => {}
        }
    }

    fn exec(&mut self, op: &Op) {
        match op {
            Op::AllReduce { .. }
            | Op::AllToAll { .. }
            | Op::AllGather { .. }
            | Op::ReduceScatter { .. } => self.collective(op),
            _ => (0..self.mem.len()).for_each(|r| self.local(r, op)),
        }
    }

    /// Every rank's plan in program order (plans share one structure; rank r runs `plans[r]`).
    pub fn run_ordered(&mut self, plans: &[Plan]) {
        for k in 0..plans[0].ops.len() {
            let op = &plans[0].ops[k];
            if op.stream().is_some()
                && matches!(
                    op,
                    Op::AllReduce { .. }
                        | Op::AllToAll { .. }
                        | Op::AllGather { .. }
                        | Op::ReduceScatter { .. }
                )
            {
                self.collective(op);
            } else {
                for (r, p) in plans.iter().enumerate() {
                    self.local(r, &p.ops[k]);
                }
            }
        }
    }

    /// One rank, the streams interleaved by `pick` (given the ready streams, returns an index
    /// into them); host fills happen at issue, before any GPU work, as on the GPU. A wait is on
    /// the event's latest record issued before it, as in CUDA; with none in this plan it refers
    /// to an earlier iteration's (complete: the runner synchronises after every iteration) or
    /// to none (a no-op).
    pub fn run_scheduled(&mut self, plan: &Plan, mut pick: impl FnMut(&[usize]) -> usize) {
        let mut queues: Vec<Vec<usize>> = vec![Vec::new(); STREAMS];
        let mut latest: Vec<Option<usize>> = vec![None; plan.events];
        let mut bound: Vec<Option<usize>> = vec![None; plan.ops.len()];
        for (i, op) in plan.ops.iter().enumerate() {
            match op {
                Op::Record { event, .. } => latest[*event] = Some(i),
                Op::Wait { event, .. } => bound[i] = latest[*event],
                _ => {}
            }
            match op.stream() {
                None => self.exec(op),
                Some(s) => queues[s as usize].push(i),
            }
        }
        let mut head = [0usize; STREAMS];
        let mut done = vec![false; plan.ops.len()];
        loop {
            let ready: Vec<usize> = (0..STREAMS)
                .filter(|&s| match queues[s].get(head[s]) {
                    Some(&i) => bound[i].is_none_or(|r| done[r]),
                    None => false,
                })
                .collect();
            if ready.is_empty() {
                break;
            }
            let s = ready[pick(&ready) % ready.len()];
            let i = queues[s][head[s]];
            head[s] += 1;
            done[i] = true;
            self.exec(&plan.ops[i]);
        }
        debug_assert!(
            (0..STREAMS).all(|s| head[s] == queues[s].len()),
            "a wait on an event recorded later on a stream that waits for it"
        );
    }
}

fn bytes(d: Dtype, x: f32) -> Vec<u8> {
    let b = d.encode(x);
    if d.bytes() == 4 {
        b.to_le_bytes().to_vec()
    } else {
        (b as u16).to_le_bytes().to_vec()
    }
}

/// A small deterministic generator for schedules (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
