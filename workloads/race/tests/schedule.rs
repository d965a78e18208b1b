//! The fixed schedule (issue 8): race-free by construction, as fast as the planted bug in the
//! timing model, and its checks as strict as the single-buffered ones. CPU only.

use aorta_race::config::RaceConfig;
use aorta_race::hazard::{hazards, Order};
use aorta_race::plan::{ev_written, BufId, Layout, Op, Plan, StreamId};
use aorta_race::runner::{self, SimExecutor};
use aorta_race::sim::{Rng, Sim};
use aorta_race::timing::{makespan, Costs};
use serde_json::{json, Value};

fn cfg(extra: Value) -> RaceConfig {
    let mut base = json!({"h2d_tensor_size": 64, "alltoall_tensor_size": 48, "allreduce_tensor_size": 32,
        "fsdp_shard_size": 16, "num_layers": 3, "gemm_layers": 1, "warmup_iterations": 2, "verify_iterations": 6});
    base.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    RaceConfig::from_map(base.as_object().unwrap()).unwrap().0
}

fn with(m: &Value, k: &str, v: Value) -> Value {
    let mut m = m.clone();
    m[k] = v;
    m
}

/// Every mode and the knobs that change its plan.
fn modes() -> Vec<Value> {
    vec![
        json!({"mode": "default"}),
        json!({"mode": "ddp"}),
        json!({"mode": "ddp", "ddp_bucketed": true}),
        json!({"mode": "ddp", "ddp_bucketed": true, "h2d_prefetch": true, "num_layers": 4}),
        json!({"mode": "fsdp"}),
        json!({"mode": "fsdp", "num_layers": 4, "shared_layer_weights": true}),
        json!({"mode": "fsdp", "num_layers": 7}),
        json!({"mode": "fsdp", "num_layers": 1}),
        json!({"mode": "fsdp", "shared_layer_weights": true, "reuse_buffers": false}),
        json!({"mode": "default", "same_stream_mode": true}),
    ]
}

/// Depths the fixed schedule accepts for `m` at world size 1 (3 repeats the gradient pattern).
fn depths(m: &Value) -> Vec<u32> {
    let grads = m["mode"] != "default";
    (1..=5).filter(|d| !(grads && d % 3 == 0)).collect()
}

/// Iterations 0..n as the runner issues them.
fn plans(l: &Layout, n: u64) -> Vec<Plan> {
    (0..n).map(|t| l.plan(t, t == 0)).collect()
}

fn layout(c: &RaceConfig, world: u32) -> Layout {
    Layout::new(c, 0, world).unwrap()
}

#[test]
fn the_fixed_schedule_orders_every_conflicting_access() {
    for m in modes() {
        for d in depths(&m) {
            for world in [1, 2, 4] {
                let c = cfg(with(&m, "buffer_depth", json!(d)));
                let l = layout(&c, world);
                assert_eq!(l.buffer_depth(), d as usize);
                let p = plans(&l, 7);
                let h = hazards(&p, &l.bufs, true);
                assert!(h.is_empty(), "{m} depth {d} world {world}: {}", h[0]);
                if d >= 2 {
                    // Without the per-iteration synchronisation too: events alone order the
                    // device's accesses, so step t's communication may overlap step t+1's compute.
                    let h = hazards(&p, &l.bufs, false);
                    assert!(
                        h.is_empty(),
                        "{m} depth {d} world {world}, back to back: {}",
                        h[0]
                    );
                }
            }
        }
    }
}

#[test]
fn the_planted_bug_and_the_single_buffered_fix_need_what_the_pipeline_does_not() {
    for m in modes() {
        if m["same_stream_mode"] == true {
            continue;
        }
        // The bug: races inside one iteration, whatever buffer_depth says.
        let c = cfg(with(
            &with(&m, "missing_sync", json!(true)),
            "buffer_depth",
            json!(4),
        ));
        let l = layout(&c, 1);
        assert_eq!(l.buffer_depth(), 1);
        let p = plans(&l, 3);
        assert!(
            !hazards(&p, &l.bufs, true).is_empty(),
            "{m}: the planted bug races"
        );
        assert_eq!(
            p[1],
            layout(&cfg(with(&m, "missing_sync", json!(true))), 1).plan(1, false),
            "{m}: buffer_depth does not touch the bug"
        );
        // The single-buffered fix is only correct because the runner synchronises every iteration.
        let c = cfg(with(&m, "buffer_depth", json!(1)));
        let l = layout(&c, 1);
        assert!(
            !hazards(&plans(&l, 3), &l.bufs, false).is_empty(),
            "{m}: single-buffered relies on the synchronisation"
        );
    }
}

/// Whether op `i` of plan `p` is a wait whose record was issued earlier in the same plan.
fn in_iteration(p: &Plan, i: usize) -> bool {
    let Op::Wait { event, .. } = p.ops[i] else {
        return false;
    };
    p.ops[..i]
        .iter()
        .any(|o| matches!(o, Op::Record { event: e, .. } if *e == event))
}

fn waits_between(p: &Plan, i: usize) -> (StreamId, StreamId) {
    let Op::Wait { stream, event } = p.ops[i] else {
        unreachable!()
    };
    let rec = p.ops[..i].iter().rev().find_map(|o| match o {
        Op::Record { stream, event: e } if *e == event => Some(*stream),
        _ => None,
    });
    (stream, rec.unwrap())
}

/// The buffers collectives write (read on the device by nobody: the host checks them).
fn collective_outputs(p: &Plan) -> Vec<BufId> {
    p.ops
        .iter()
        .filter_map(|o| match *o {
            Op::AllReduce { recv, .. }
            | Op::AllToAll { recv, .. }
            | Op::AllGather { recv, .. }
            | Op::ReduceScatter { recv, .. } => Some(recv),
            _ => None,
        })
        .collect()
}

#[test]
fn every_wait_inside_a_fixed_step_is_required_or_the_bug_has_it_too() {
    for m in modes() {
        if m["same_stream_mode"] == true {
            continue;
        }
        for d in depths(&m).into_iter().filter(|&d| d >= 2) {
            let c = cfg(with(&m, "buffer_depth", json!(d)));
            let l = layout(&c, 1);
            let p = plans(&l, 6);
            let t = 4; // a steady-state iteration
            let mut optional = Vec::new();
            for i in (0..p[t].ops.len()).filter(|&i| in_iteration(&p[t], i)) {
                let (waiter, recorder) = waits_between(&p[t], i);
                if waiter == recorder {
                    continue;
                }
                let mut cut = p.clone();
                cut[t].ops.remove(i);
                if !hazards(&cut, &l.bufs, true).is_empty() {
                    continue; // orders a conflicting access: required
                }
                // Not a data dependency: compute waiting for a collective's output (one NCCL
                // communicator's order; the optimizer step), as in the single-buffered schedule.
                let Op::Wait { event, .. } = p[t].ops[i] else {
                    unreachable!()
                };
                assert_eq!(waiter, StreamId::Compute, "{m} depth {d}: op {i}");
                assert!(
                    collective_outputs(&p[t])
                        .iter()
                        .any(|&b| ev_written(b) == event),
                    "{m} depth {d}: op {i} {:?}",
                    p[t].ops[i]
                );
                optional.push((waiter, recorder));
            }
            let bug = layout(&cfg(with(&m, "missing_sync", json!(true))), 1).plan(t as u64, false);
            let kept: Vec<_> = (0..bug.ops.len())
                .filter(|&i| in_iteration(&bug, i))
                .map(|i| waits_between(&bug, i))
                .filter(|(a, b)| a != b)
                .collect();
            for pair in &optional {
                let (n, k) = (
                    optional.iter().filter(|x| *x == pair).count(),
                    kept.iter().filter(|x| *x == pair).count(),
                );
                assert!(
                    n <= k,
                    "{m} depth {d}: {n} waits {pair:?} where the bug keeps {k}"
                );
            }
        }
    }
}

#[test]
fn step_t_collectives_overlap_the_compute_that_writes_step_t_plus_1() {
    for m in modes() {
        if m["same_stream_mode"] == true {
            continue;
        }
        for d in depths(&m).into_iter().filter(|&d| d >= 2) {
            let c = cfg(with(&m, "buffer_depth", json!(d)));
            let l = layout(&c, 1);
            let p = plans(&l, 7);
            let order = Order::new(&p, false);
            for t in 2..5 {
                // The collectives that read what compute wrote (all_to_all, all_reduce of
                // gradients, reduce_scatter), and compute's writes of next step's inputs.
                let colls: Vec<(usize, BufId)> = p[t]
                    .ops
                    .iter()
                    .enumerate()
                    .filter_map(|(i, o)| match *o {
                        Op::AllToAll {
                            stream: StreamId::Comm,
                            send,
                            ..
                        }
                        | Op::AllReduce {
                            stream: StreamId::Comm,
                            send,
                            ..
                        }
                        | Op::ReduceScatter { send, .. } => Some((i, send)),
                        _ => None,
                    })
                    .collect();
                let next: Vec<BufId> = p[t + 1]
                    .ops
                    .iter()
                    .filter_map(|o| match *o {
                        Op::AllToAll {
                            stream: StreamId::Comm,
                            send,
                            ..
                        }
                        | Op::AllReduce {
                            stream: StreamId::Comm,
                            send,
                            ..
                        }
                        | Op::ReduceScatter { send, .. } => Some(send),
                        _ => None,
                    })
                    .collect();
                let fills: Vec<usize> = p[t]
                    .ops
                    .iter()
                    .enumerate()
                    .filter_map(|(i, o)| match *o {
                        Op::Fill {
                            stream: StreamId::Compute,
                            buf,
                            ..
                        } if next.contains(&buf) => Some(i),
                        _ => None,
                    })
                    .collect();
                assert!(
                    !colls.is_empty() && fills.len() == colls.len(),
                    "{m} depth {d}"
                );
                for &(c, send) in &colls {
                    assert!(
                        !next.contains(&send) || d == 1,
                        "{m}: step t+1 reads another copy"
                    );
                    for &f in &fills {
                        assert!(!order.op_before((t, c), (t, f)) && !order.op_before((t, f), (t, c)), "{m} depth {d} iteration {t}: collective op {c} and fill op {f} are ordered");
                    }
                }
            }
        }
    }
}

/// A cost draw from `rng`, in µs.
fn draw(rng: &mut Rng) -> Costs {
    let mut u = |hi: f64| (rng.next_u64() % 1000) as f64 / 1000.0 * hi;
    Costs {
        gemm: u(500.0),
        window: u(400.0),
        kernel: u(50.0),
        collective: u(100.0),
        copy: u(200.0),
    }
}

fn steady(c: &RaceConfig) -> Plan {
    layout(c, 1).plan(5, false)
}

#[test]
fn in_the_timing_model_fixed_is_never_slower_than_the_bug() {
    let mut rng = Rng(7);
    for m in modes() {
        // fsdp holding fewer gathered-parameter buffers than layers (reuse_buffers, more than
        // 2 × buffer_depth layers) must gather the later layers within the step, after compute
        // has read the buffer's previous layer: the memory bound reuse_buffers asks for. Enough
        // copies (buffer_depth ≥ layers / 2) lift it.
        let m = if m["num_layers"] == 7 {
            with(&m, "buffer_depth", json!(4))
        } else {
            m
        };
        for delay in [0.0, 100.0, 1000.0, 3000.0] {
            let m = with(
                &with(&m, "comm_delay_us", json!(delay)),
                "gemm_layers",
                json!(4),
            );
            let fixed = steady(&cfg(m.clone()));
            let bug = steady(&cfg(with(&m, "missing_sync", json!(true))));
            for _ in 0..200 {
                let k = draw(&mut rng);
                let (f, b) = (makespan(&fixed, |o| k.of(o)), makespan(&bug, |o| k.of(o)));
                assert!(
                    f <= b * (1.0 + 1e-12),
                    "{m} {k:?}: fixed {f} µs, bug {b} µs"
                );
            }
        }
    }
}

#[test]
fn the_recipe_shape_single_buffered_fix_is_slower_the_pipelined_one_is_not() {
    // Durations in the shape of recipes/race-single-gpu.yaml and bench/race/run-on-device.sh:
    // 4 GEMMs per block, a 200 µs race window, 1000 µs of wire time per collective. A model,
    // not a GPU figure.
    let k = Costs {
        gemm: 200.0,
        window: 200.0,
        kernel: 5.0,
        collective: 20.0,
        copy: 40.0,
    };
    let common =
        json!({"gemm_layers": 4, "race_window_us": 200, "comm_delay_us": 1000, "num_layers": 4});
    for extra in [
        json!({"mode": "default"}),
        json!({"mode": "ddp", "ddp_bucketed": true}),
        json!({"mode": "fsdp", "shared_layer_weights": true}),
    ] {
        let mut m = common.clone();
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let time = |v: Value| makespan(&steady(&cfg(v)), |o| k.of(o));
        let bug = time(with(&m, "missing_sync", json!(true)));
        let single = time(with(&m, "buffer_depth", json!(1)));
        let fixed = time(m.clone());
        assert!(
            single > bug * 1.05,
            "{m}: single-buffered {single} vs bug {bug}"
        );
        assert!(fixed <= bug, "{m}: pipelined {fixed} vs bug {bug}");
    }
}

#[test]
fn every_interleaving_of_every_depth_is_clean() {
    for m in modes() {
        for d in depths(&m) {
            let c = cfg(with(&m, "buffer_depth", json!(d)));
            let l = layout(&c, 1);
            for seed in 0..15 {
                let mut ex = SimExecutor {
                    sim: Sim::new(&l.bufs, c.dtype, 1),
                    rng: Some(Rng(seed)),
                };
                let out = runner::run(&mut ex, &c, &l, 0, &mut |_| {});
                assert_eq!(
                    (out.corrupt_iterations, out.step_times_ms.len()),
                    (0, 6),
                    "{m} depth {d} seed {seed}: {:?}",
                    out.corruptions.first()
                );
            }
        }
    }
}

#[test]
fn the_pipelined_checks_are_the_single_buffered_checks_plus_the_prefetched_batch() {
    for m in modes() {
        let single = layout(&cfg(with(&m, "buffer_depth", json!(1))), 2);
        let piped = layout(&cfg(m.clone()), 2);
        for t in [0u64, 1, 7] {
            let (a, b) = (single.plan(t, t == 0), piped.plan(t, t == 0));
            // Single-buffered prefetch (ddp) checks the batch buffers under other kinds.
            let batch = ["h2d", "h2d_prefetch"];
            let key = |p: &Plan, l: &Layout| {
                let mut v: Vec<String> = p
                    .checks
                    .iter()
                    .filter(|c| !batch.contains(&c.kind.as_str()))
                    .map(|c| {
                        format!(
                            "{} {} {:?} {:?}",
                            c.kind, l.bufs[c.buf].name, c.regions, c.layer
                        )
                    })
                    .collect();
                v.sort();
                v
            };
            assert_eq!(
                key(&a, &single),
                key(&b, &piped),
                "{m} iteration {t}: same expectations on the same buffers"
            );
            for kind in batch {
                assert_eq!(b.checks.iter().filter(|c| c.kind == kind).count(), 1, "{m}");
            }
            if m["h2d_prefetch"] != true {
                let h2d = |p: &Plan| {
                    p.checks
                        .iter()
                        .find(|c| c.kind == "h2d")
                        .map(|c| c.regions.clone())
                };
                assert_eq!(h2d(&a), h2d(&b), "{m}");
            }
            assert_eq!(a.checksum_group.len(), b.checksum_group.len());
        }
    }
}

/// Writes in program order that leave a buffer's contents unchanged: a stale copy there would
/// pass the check. Same-iteration rewrites of shared layer weights are equal by design.
fn unchanged_writes(c: &RaceConfig, world: u32, iterations: u64) -> Vec<String> {
    let layouts: Vec<Layout> = (0..world)
        .map(|r| Layout::unchecked(c, r, world).unwrap())
        .collect();
    let mut sim = Sim::new(&layouts[0].bufs, c.dtype, world);
    let mut written_in: Vec<Option<u64>> = vec![None; layouts[0].bufs.len()];
    let mut out = Vec::new();
    for t in 0..iterations {
        let plans: Vec<Plan> = layouts.iter().map(|l| l.plan(t, t == 0)).collect();
        for k in 0..plans[0].ops.len() {
            let op = &plans[0].ops[k];
            let Some((b, _)) = aorta_race::hazard::accesses(op).into_iter().find(|a| a.1) else {
                continue;
            };
            let old = sim.mem[0][b].clone();
            let one: Vec<Plan> = plans
                .iter()
                .map(|p| Plan {
                    ops: vec![p.ops[k].clone()],
                    checks: Vec::new(),
                    checksum_group: Vec::new(),
                    events: p.events,
                    dropped_waits: 0,
                })
                .collect();
            sim.run_ordered(&one);
            let by_design = c.shared_layer_weights
                && written_in[b] == Some(t)
                && matches!(op, Op::AllGather { .. });
            if written_in[b].is_some() && old == sim.mem[0][b] && !by_design {
                out.push(format!(
                    "iteration {t} op {k} {op:?} rewrote {} with what it held",
                    layouts[0].bufs[b].name
                ));
            }
            written_in[b] = Some(t);
        }
    }
    out
}

#[test]
fn double_buffering_never_blinds_a_check_and_exactly_the_depths_that_would_are_refused() {
    for m in modes() {
        if m["same_stream_mode"] == true {
            continue;
        }
        // The all_to_all / all_gather patterns repeat every 255 iterations at world size 1, every
        // 3 at 64, every 2 from 86 on.
        for world in [1u32, 64, 86] {
            if world > 8 && m["num_layers"] == 7 {
                continue; // slow in the simulator, nothing new
            }
            for d in 2..=6u32 {
                let mut v = with(&m, "buffer_depth", json!(d));
                v["alltoall_tensor_size"] = json!(world.max(48));
                let c = cfg(v);
                let refused = Layout::new(&c, 0, world).err();
                let bad = unchanged_writes(&c, world, d as u64 + 4);
                match refused {
                    None => assert!(bad.is_empty(), "{m} depth {d} world {world}: {}", bad[0]),
                    Some(e) => {
                        assert!(e.contains("use buffer_depth"), "{e}");
                        assert!(
                            !bad.is_empty(),
                            "{m} depth {d} world {world}: refused for nothing: {e}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn refusals_name_a_depth_that_works() {
    // ddp and fsdp gradients repeat every 3 iterations.
    let e = Layout::new(&cfg(json!({"mode": "ddp", "buffer_depth": 3})), 0, 1)
        .err()
        .unwrap();
    assert!(
        e.contains("gradients") && e.contains("use buffer_depth: 2"),
        "{e}"
    );
    // From world size 86 on, all_to_all inputs repeat every 2 iterations.
    let c = cfg(json!({"mode": "default", "alltoall_tensor_size": 128}));
    assert!(Layout::new(&c, 0, 85).is_ok());
    let e = Layout::new(&c, 0, 86).err().unwrap();
    assert!(
        e.contains("all_to_all") && e.contains("use buffer_depth: 3"),
        "{e}"
    );
    let ok = cfg(json!({"mode": "default", "alltoall_tensor_size": 128, "buffer_depth": 3}));
    assert!(Layout::new(&ok, 0, 86).is_ok());
    // The bug and the single-buffered fix are never refused.
    for other in [json!({"missing_sync": true}), json!({"buffer_depth": 1})] {
        let mut v = json!({"mode": "default", "alltoall_tensor_size": 128});
        v.as_object_mut()
            .unwrap()
            .extend(other.as_object().unwrap().clone());
        assert!(Layout::new(&cfg(v), 0, 86).is_ok());
    }
}
