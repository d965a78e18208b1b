//! aorta-hw-queue: how a GPU schedules work from many streams — hardware queues, false
//! dependencies, convoys (docs/hw-queue.md). The binary is `aorta-hw-queue list|run|sweep|compare`
//! and, when invoked as `aorta-workload-hw_queue`, an aorta workload (src/protocol.rs); as
//! `aorta-workload-gpu_smoke` (a binary of its own), AORTA 0.3.0's smoke test (src/smoke.rs); as
//! `aorta-workload-gpu_doctor`, `aorta doctor`'s active checks (src/doctor.rs).

pub mod allreduce;
pub mod analysis;
pub mod backend;
pub mod cli;
pub mod compare;
pub mod config;
pub mod doctor;
pub mod measured;
pub mod metrics;
pub mod nccl;
pub mod plot;
pub mod protocol;
pub mod results;
pub mod runner;
pub mod smoke;
pub mod sweep;
pub mod table;
pub mod workloads;

/// Dispatch on the invocation name: `aorta-workload-*` speaks the workload protocol.
pub fn main_with_args(args: Vec<String>) -> i32 {
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "aorta-workload-gpu_smoke" {
        smoke::main(&args[1..])
    } else if name == "aorta-workload-gpu_doctor" {
        doctor::main(&args[1..])
    } else if name.starts_with("aorta-workload-") {
        protocol::main(&args[1..])
    } else {
        cli::main()
    }
}
