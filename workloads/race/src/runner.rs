//! The reproducer loop (spec §8.5): warmup iterations without verification, then verify
//! iterations, each checked against the known patterns; corruptions recorded; optionally stop
//! at the first. Generic over the executor, so the loop runs on the CPU simulator in tests.

use std::time::Instant;

use serde_json::{json, Value};

use crate::config::RaceConfig;
use crate::pattern::{checksum, verify, Corruption, Dtype};
use crate::plan::{Layout, Plan};
use crate::sim::{Rng, Sim};

/// What runs a plan: the GPU (gpu::Runtime) or the simulator.
pub trait Executor {
    /// Issue every op of the plan and wait for the device; host wall time in ms.
    fn execute(&mut self, plan: &Plan) -> Result<f64, String>;
    /// A buffer's bytes (after `execute`).
    fn read(&mut self, buf: usize) -> Result<Vec<u8>, String>;
    /// Whether any rank wants to stop (ranks must leave the loop together or the others hang
    /// in their next collective).
    fn any_rank(&mut self, local: bool) -> Result<bool, String>;
    /// Join the NCCL communicator (GPU only), with the id rank 0 handed out.
    fn init_comm(&mut self, _id: &[u8; 128], _rank: u32) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub corruptions: Vec<Corruption>,
    pub corrupt_iterations: u64,
    pub first_failure_iteration: Option<u64>,
    pub executed: u64,
    pub step_times_ms: Vec<f64>,
    pub warmup_ms: Vec<f64>,
    pub layers_verified: u64,
    pub layer_checksum_mismatches: u64,
    pub elapsed_sec: f64,
    /// Set when the executor failed mid-run (main work had started).
    pub error: Option<String>,
}

/// Records beyond this many are counted, not kept (a racy run can corrupt every iteration).
pub const MAX_RECORDS: usize = 100;

/// Verify one iteration's buffers.
pub fn check_iteration(
    ex: &mut dyn Executor,
    plan: &Plan,
    dtype: Dtype,
    rank: u32,
    iter: u64,
    layout: &Layout,
    out: &mut Outcome,
) -> Result<usize, String> {
    let mut found = Vec::new();
    for c in &plan.checks {
        let bytes = ex.read(c.buf)?;
        let mut v = verify(
            &bytes,
            dtype,
            &c.regions,
            &c.kind,
            layout.bufs[c.buf].name,
            rank,
            iter,
        );
        v.iter_mut().for_each(|x| x.layer = c.layer);
        found.extend(v);
    }
    if let Some(&(_, first)) = plan.checksum_group.first() {
        let reference = checksum(&ex.read(first)?, dtype);
        for &(layer, b) in &plan.checksum_group {
            let sum = checksum(&ex.read(b)?, dtype);
            out.layers_verified += 1;
            if sum != reference {
                out.layer_checksum_mismatches += 1;
                found.push(Corruption {
                    kind: "layer_checksum_mismatch_weights".into(),
                    rank,
                    iteration: iter,
                    src_rank: None,
                    expected: reference as f64,
                    actual: sum as f64,
                    buffer: layout.bufs[b].name.into(),
                    first_index: 0,
                    mismatches: 1,
                    elements: layout.bufs[b].elems,
                    layer: Some(layer),
                });
            }
        }
    }
    let n = found.len();
    let room = MAX_RECORDS.saturating_sub(out.corruptions.len());
    out.corruptions.extend(found.into_iter().take(room));
    Ok(n)
}

pub fn run(
    ex: &mut dyn Executor,
    cfg: &RaceConfig,
    layout: &Layout,
    rank: u32,
    log: &mut dyn FnMut(String),
) -> Outcome {
    let t0 = Instant::now();
    let mut out = Outcome::default();
    if let Err(e) = run_inner(ex, cfg, layout, rank, log, &mut out) {
        out.error = Some(e);
    }
    out.elapsed_sec = t0.elapsed().as_secs_f64();
    out
}

fn run_inner(
    ex: &mut dyn Executor,
    cfg: &RaceConfig,
    layout: &Layout,
    rank: u32,
    log: &mut dyn FnMut(String),
    out: &mut Outcome,
) -> Result<(), String> {
    for it in 0..cfg.warmup_iterations {
        let ms = ex.execute(&layout.plan(it, it == 0))?;
        out.warmup_ms.push(ms);
        out.executed += 1;
    }
    for i in 0..cfg.verify_iterations {
        let it = cfg.warmup_iterations + i;
        let plan = layout.plan(it, it == 0);
        let ms = ex.execute(&plan)?;
        out.executed += 1;
        out.step_times_ms.push(ms);
        let bad = check_iteration(ex, &plan, cfg.dtype, rank, it, layout, out)?;
        if bad > 0 {
            out.corrupt_iterations += 1;
            out.first_failure_iteration.get_or_insert(it);
            if rank == 0 || out.corrupt_iterations == 1 {
                log(format!(
                    "race: rank {rank} iteration {it}: {bad} corrupted region(s)"
                ));
            }
        }
        if (i + 1) % cfg.log_interval == 0 {
            log(format!("race: rank {rank} verified {} of {} iterations, {} corrupted, last step {ms:.3} ms", i + 1, cfg.verify_iterations, out.corrupt_iterations));
        }
        let stop = cfg.stop_on_first_corruption && bad > 0;
        if ex.any_rank(stop)? && cfg.stop_on_first_corruption {
            break;
        }
    }
    Ok(())
}

/// The per-rank result part that rank 0 merges (and the single-rank result's body).
pub fn rank_summary(out: &Outcome, rank: u32) -> Value {
    json!({
        "rank": rank, "executed": out.executed, "corrupt_iterations": out.corrupt_iterations,
        "first_failure_iteration": out.first_failure_iteration,
        "corruptions": out.corruptions.iter().map(Corruption::to_json).collect::<Vec<_>>(),
        "step_times_ms": out.step_times_ms, "warmup_ms": out.warmup_ms,
        "layers_verified": out.layers_verified, "layer_checksum_mismatches": out.layer_checksum_mismatches,
        "elapsed_sec": out.elapsed_sec, "error": out.error,
    })
}

/// The simulator as an executor (one rank); `seed: Some` interleaves the streams at random.
pub struct SimExecutor {
    pub sim: Sim,
    pub rng: Option<Rng>,
}

impl Executor for SimExecutor {
    fn execute(&mut self, plan: &Plan) -> Result<f64, String> {
        let t = Instant::now();
        match &mut self.rng {
            None => self.sim.run_ordered(std::slice::from_ref(plan)),
            Some(rng) => self
                .sim
                .run_scheduled(plan, |ready| rng.next_u64() as usize % ready.len()),
        }
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }
    fn read(&mut self, buf: usize) -> Result<Vec<u8>, String> {
        Ok(self.sim.mem[0][buf].clone())
    }
    fn any_rank(&mut self, local: bool) -> Result<bool, String> {
        Ok(local)
    }
}
