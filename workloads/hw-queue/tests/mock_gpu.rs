//! Every workload end to end on a simulated GPU: C hardware queues fed round-robin by streams
//! (a queue's entry starts at max(the previous entry's start, its stream predecessor's end)),
//! unlimited SMs, kernels of known length. Exercises the workloads' bookkeeping on CPU and
//! checks that spin_streams measures the model's concurrency from its stamps.

use aorta_hw_queue::analysis::{model_concurrency, model_schedule};
use aorta_hw_queue::backend::sim::SimGpu;
use aorta_hw_queue::config::Order;
use aorta_hw_queue::workloads::{self, config_for, WORKLOADS};
use serde_json::json;

fn small(name: &str) -> aorta_hw_queue::config::Config {
    let mut c = config_for(name);
    let o = json!({"iterations": 2, "warmup": 1, "samples": 3, "launches": 512, "delay_ms": 0.1,
                   "gemm": [256, 256, 256], "hidden": 256, "batch": 16, "copy_mib": 1,
                   "kernel_ms": 1, "streams": [1, 4, 8], "waves": 4, "block_ms": 0.5});
    c.apply(o.as_object().unwrap()).unwrap();
    c
}

#[test]
fn every_workload_runs_on_the_mock() {
    for w in WORKLOADS {
        let mut gpu = SimGpu::new(8);
        let mut log = |_m: String| {};
        let points = workloads::run(w.name, &small(w.name), &mut gpu, &mut log)
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        assert!(!points.is_empty(), "{} produced no points", w.name);
    }
}

#[test]
fn spin_streams_measures_the_queue_model() {
    for (conns, order) in [
        (1, Order::Depth),
        (8, Order::Depth),
        (32, Order::Depth),
        (1, Order::Breadth),
    ] {
        let mut gpu = SimGpu::new(conns);
        let mut cfg = small("spin_streams");
        cfg.streams = vec![4, 16, 32];
        cfg.orders = vec![order];
        cfg.kernel_ms = 5.0;
        let mut log = |_m: String| {};
        let points = workloads::run("spin_streams", &cfg, &mut gpu, &mut log).unwrap();
        for p in points {
            let want = model_concurrency(p.streams, 2, conns as u32, order);
            let got = p.metrics.concurrency.unwrap();
            assert!(
                (got - want).abs() / want < 0.01,
                "c={conns} {order:?} n={}: {got} vs model {want}",
                p.streams
            );
            assert_eq!(p.metrics.busy_ms.len(), p.streams as usize);
            assert!(
                p.metrics.busy_ms.iter().all(|b| (b - 10.0).abs() < 0.05),
                "each stream is busy 2 × 5 ms: {:?}",
                p.metrics.busy_ms
            );
            // The probe (stream n+1) waits for its queue: model start × 5 ms (+ its own ~2 µs),
            // measured from its host-side launch through the clock sync and its stamp.
            let (_, probe_start) = model_schedule(p.streams, 2, conns as u32, order);
            let probe_us = p.metrics.tiny_latency_us.as_ref().unwrap().p50;
            let want_us = probe_start * 5000.0;
            assert!(
                (probe_us - want_us).abs() < 1000.0 + 0.05 * want_us,
                "c={conns} {order:?} n={}: probe {probe_us} µs vs model {want_us} µs",
                p.streams
            );
        }
    }
}
