fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(aorta_torch_workloads::protocol::main(
        aorta_torch_workloads::determinism::NAME,
        &args,
        aorta_torch_workloads::determinism::run,
    ));
}
