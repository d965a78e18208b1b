//! `aorta-workload-gpu_smoke`: AORTA 0.3.0's smoke workload (src/smoke.rs).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(aorta_hw_queue::smoke::main(&args[1..]));
}
