fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(aorta_hw_queue::main_with_args(args));
}
