//! The plans on the CPU simulator: correct schedules verify clean for every mode and world size;
//! with the planted bug some legal interleaving corrupts, and the records say where.

use aorta_race::config::{Mode, RaceConfig};
use aorta_race::plan::{Layout, Op};
use aorta_race::runner::{self, SimExecutor};
use aorta_race::sim::{Rng, Sim};
use serde_json::json;

fn cfg(extra: serde_json::Value) -> RaceConfig {
    let mut base = json!({"h2d_tensor_size": 64, "alltoall_tensor_size": 48, "allreduce_tensor_size": 32,
        "fsdp_shard_size": 16, "num_layers": 3, "gemm_layers": 1, "warmup_iterations": 2, "verify_iterations": 6});
    base.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    RaceConfig::from_map(base.as_object().unwrap()).unwrap().0
}

fn modes() -> Vec<serde_json::Value> {
    vec![
        json!({"mode": "default"}),
        json!({"mode": "ddp"}),
        json!({"mode": "ddp", "ddp_bucketed": true, "h2d_prefetch": true}),
        json!({"mode": "fsdp"}),
        json!({"mode": "fsdp", "shared_layer_weights": true, "reuse_buffers": false}),
        json!({"mode": "default", "dtype": "fp32"}),
        json!({"mode": "fsdp", "dtype": "fp16"}),
    ]
}

#[test]
fn program_order_verifies_clean_for_every_mode_and_world_size() {
    for m in modes() {
        for world in [1u32, 2, 3, 4] {
            let c = cfg(m.clone());
            let layouts: Vec<Layout> = (0..world)
                .map(|r| Layout::new(&c, r, world).unwrap())
                .collect();
            let mut sim = Sim::new(&layouts[0].bufs, c.dtype, world);
            for it in 0..4u64 {
                let plans: Vec<_> = layouts.iter().map(|l| l.plan(it, it == 0)).collect();
                sim.run_ordered(&plans);
                for (r, p) in plans.iter().enumerate() {
                    for ch in &p.checks {
                        let bad = aorta_race::pattern::verify(
                            &sim.mem[r][ch.buf],
                            c.dtype,
                            &ch.regions,
                            &ch.kind,
                            "b",
                            r as u32,
                            it,
                        );
                        assert!(
                            bad.is_empty(),
                            "{m} world {world} rank {r} iter {it}: {bad:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_interleaving_with_the_waits_is_clean() {
    for m in modes() {
        let c = cfg(m.clone());
        let layout = Layout::new(&c, 0, 1).unwrap();
        for seed in 0..40 {
            let mut ex = SimExecutor {
                sim: Sim::new(&layout.bufs, c.dtype, 1),
                rng: Some(Rng(seed)),
            };
            let out = runner::run(&mut ex, &c, &layout, 0, &mut |_| {});
            assert_eq!(
                out.corrupt_iterations,
                0,
                "{m} seed {seed}: {:?}",
                out.corruptions.first()
            );
            assert_eq!(out.step_times_ms.len(), 6);
        }
    }
}

#[test]
fn the_planted_bug_is_caught_in_some_interleaving_of_every_mode() {
    for m in modes() {
        let mut m2 = m.clone();
        m2["missing_sync"] = json!(true);
        m2["stop_on_first_corruption"] = json!(false);
        let c = cfg(m2);
        let layout = Layout::new(&c, 0, 1).unwrap();
        assert!(layout.plan(0, true).dropped_waits > 0);
        let mut corrupt = 0;
        for seed in 0..40 {
            let mut ex = SimExecutor {
                sim: Sim::new(&layout.bufs, c.dtype, 1),
                rng: Some(Rng(seed)),
            };
            let out = runner::run(&mut ex, &c, &layout, 0, &mut |_| {});
            corrupt += out.corrupt_iterations;
            for rec in &out.corruptions {
                assert_eq!(rec.rank, 0);
                assert!(rec.iteration >= 2, "warmup iterations are not verified");
                assert_ne!(rec.expected, rec.actual);
            }
        }
        assert!(corrupt > 0, "{m}: the race never showed in 40 schedules");
    }
}

#[test]
fn missing_sync_drops_only_the_planted_waits() {
    for m in modes() {
        // The planted bug is the single-buffered schedule without its waits; the pipelined fix
        // (the default buffer_depth 2) is compared with it in tests/schedule.rs.
        let mut single = m.clone();
        single["buffer_depth"] = json!(1);
        let fixed = Layout::new(&cfg(single), 0, 1).unwrap().plan(5, false);
        let mut m2 = m.clone();
        m2["missing_sync"] = json!(true);
        let buggy = Layout::new(&cfg(m2), 0, 1).unwrap().plan(5, false);
        let waits = |p: &aorta_race::plan::Plan| {
            p.ops
                .iter()
                .filter(|o| matches!(o, Op::Wait { .. }))
                .count()
        };
        assert_eq!(waits(&fixed), waits(&buggy) + buggy.dropped_waits, "{m}");
        assert_eq!(fixed.dropped_waits, 0);
        let strip = |p: &aorta_race::plan::Plan| {
            p.ops
                .iter()
                .filter(|o| !matches!(o, Op::Wait { .. }))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            strip(&fixed),
            strip(&buggy),
            "{m}: the bug changes nothing but waits"
        );
        assert_eq!(fixed.checks, buggy.checks);
    }
}

#[test]
fn stop_on_first_corruption_stops_and_counts() {
    let c = cfg(json!({"missing_sync": true, "verify_iterations": 50}));
    let layout = Layout::new(&c, 0, 1).unwrap();
    let mut ex = SimExecutor {
        sim: Sim::new(&layout.bufs, c.dtype, 1),
        rng: Some(Rng(3)),
    };
    let out = runner::run(&mut ex, &c, &layout, 0, &mut |_| {});
    assert_eq!(out.corrupt_iterations, 1);
    let first = out.first_failure_iteration.unwrap();
    assert_eq!(
        out.executed,
        first + 1,
        "stopped right after the first corrupted iteration"
    );
    assert_eq!(
        out.step_times_ms.len() as u64,
        first + 1 - c.warmup_iterations
    );
}

#[test]
fn same_stream_mode_cannot_race() {
    let c = cfg(
        json!({"missing_sync": true, "same_stream_mode": true, "stop_on_first_corruption": false}),
    );
    let layout = Layout::new(&c, 0, 1).unwrap();
    assert!(layout
        .plan(0, true)
        .ops
        .iter()
        .all(|o| o.stream().is_none_or(|s| s as usize == 0)));
    for seed in 0..20 {
        let mut ex = SimExecutor {
            sim: Sim::new(&layout.bufs, c.dtype, 1),
            rng: Some(Rng(seed)),
        };
        assert_eq!(
            runner::run(&mut ex, &c, &layout, 0, &mut |_| {}).corrupt_iterations,
            0
        );
    }
}

#[test]
fn shared_weights_give_equal_layer_checksums_and_a_mismatch_is_recorded() {
    let c = cfg(json!({"mode": "fsdp", "shared_layer_weights": true, "reuse_buffers": false}));
    assert_eq!(c.mode, Mode::Fsdp);
    let layout = Layout::new(&c, 0, 1).unwrap();
    let mut ex = SimExecutor {
        sim: Sim::new(&layout.bufs, c.dtype, 1),
        rng: None,
    };
    let plan = layout.plan(9, true);
    use aorta_race::runner::Executor;
    ex.execute(&plan).unwrap();
    let mut out = runner::Outcome::default();
    assert_eq!(
        runner::check_iteration(&mut ex, &plan, c.dtype, 0, 9, &layout, &mut out).unwrap(),
        0
    );
    assert_eq!(out.layers_verified, 3);
    let (_, last) = *plan.checksum_group.last().unwrap();
    ex.sim.mem[0][last][0] ^= 1;
    let n = runner::check_iteration(&mut ex, &plan, c.dtype, 0, 9, &layout, &mut out).unwrap();
    assert_eq!(out.layer_checksum_mismatches, 1);
    assert!(n >= 2, "the pattern check and the checksum both fire");
    assert!(out
        .corruptions
        .iter()
        .any(|x| x.kind == "layer_checksum_mismatch_weights" && x.layer == Some(2)));
}

#[test]
fn sizes_smaller_than_the_world_are_rejected() {
    let c = cfg(json!({"alltoall_tensor_size": 2}));
    assert!(Layout::new(&c, 0, 4).err().unwrap().contains("world size"));
}
