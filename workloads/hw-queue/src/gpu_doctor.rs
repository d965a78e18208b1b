//! `aorta-workload-gpu_doctor`: the active checks of `aorta doctor --level medium` (src/doctor.rs).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(aorta_hw_queue::doctor::main(&args[1..]));
}
