//! `aorta-trace --out TRACE_FILE -- PROGRAM [ARGS...]`: see the library's `cli` module.

fn main() {
    aorta_trace::main_with(std::env::args_os().skip(1).collect())
}
