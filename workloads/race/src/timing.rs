//! A timing model of one iteration, for comparing schedules: every op takes a given duration,
//! each stream runs its ops in order, streams overlap without limit, a wait holds its stream
//! until the record it is bound to has run, and the previous iteration is complete (the runner
//! synchronises after each). The makespan is the iteration's critical path. It is a model, not
//! a measurement: no SM sharing, launch latency or copy-engine contention.

use crate::plan::{Op, Plan, STREAMS};

/// The modelled duration of one iteration (same unit as `cost`).
pub fn makespan(plan: &Plan, cost: impl Fn(&Op) -> f64) -> f64 {
    let mut free = [0.0f64; STREAMS];
    let mut recorded: Vec<Option<f64>> = vec![None; plan.events];
    for op in &plan.ops {
        let Some(s) = op.stream() else { continue };
        let s = s as usize;
        match *op {
            // A record from an earlier iteration is complete at the start.
            Op::Wait { event, .. } => free[s] = free[s].max(recorded[event].unwrap_or(0.0)),
            Op::Record { event, .. } => recorded[event] = Some(free[s]),
            _ => free[s] += cost(op),
        }
    }
    free.into_iter().fold(0.0, f64::max)
}

/// Durations by kind of op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// One GEMM.
    pub gemm: f64,
    /// The race window a slow fill holds before writing and a slow consume holds after reading.
    pub window: f64,
    /// A fill or consume kernel's own work.
    pub kernel: f64,
    /// One collective (`Delay` ops add the wire time a one-rank collective lacks).
    pub collective: f64,
    /// One host-to-device copy.
    pub copy: f64,
}

impl Costs {
    pub fn of(&self, op: &Op) -> f64 {
        match *op {
            Op::Gemm { count, .. } => self.gemm * count as f64,
            Op::Fill { slow, .. } | Op::Consume { slow, .. } => {
                self.kernel + if slow { self.window } else { 0.0 }
            }
            Op::Delay { us, .. } => us,
            Op::Copy { .. } => self.copy,
            Op::AllReduce { .. }
            | Op::AllToAll { .. }
            | Op::AllGather { .. }
            | Op::ReduceScatter { .. } => self.collective,
            Op::HostFill { .. } | Op::Record { .. } | Op::Wait { .. } => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::StreamId::{Comm, Compute};

    fn plan(ops: Vec<Op>) -> Plan {
        Plan {
            ops,
            checks: Vec::new(),
            checksum_group: Vec::new(),
            events: 2,
            dropped_waits: 0,
        }
    }

    const K: Costs = Costs {
        gemm: 10.0,
        window: 0.0,
        kernel: 0.0,
        collective: 1.0,
        copy: 0.0,
    };

    #[test]
    fn streams_overlap_and_waits_serialise() {
        let gemm = Op::Gemm {
            stream: Compute,
            count: 3,
        };
        let delay = Op::Delay {
            stream: Comm,
            us: 20.0,
        };
        assert_eq!(
            makespan(&plan(vec![gemm.clone(), delay.clone()]), |o| K.of(o)),
            30.0
        );
        let serial = plan(vec![
            gemm.clone(),
            Op::Record {
                stream: Compute,
                event: 0,
            },
            Op::Wait {
                stream: Comm,
                event: 0,
            },
            delay.clone(),
        ]);
        assert_eq!(makespan(&serial, |o| K.of(o)), 50.0);
        // A wait on an earlier iteration's record (none in this plan) costs nothing.
        let earlier = plan(vec![
            Op::Wait {
                stream: Comm,
                event: 1,
            },
            delay,
            gemm,
        ]);
        assert_eq!(makespan(&earlier, |o| K.of(o)), 30.0);
    }
}
