//! tch's link arguments reach only tch's own binaries, so this package adds the rpath to
//! libtorch itself: the binaries then start without LD_LIBRARY_PATH on the build machine.
//! libtorch_cuda is deliberately not linked (`--as-needed` drops it anyway): it needs cuBLAS,
//! cuSPARSE... which a CPU machine lacks, so one binary could not start on both. Instead
//! src/shim.cpp dlopens it at start-up when CUDA is wanted (its static initialisers register
//! the CUDA backend); the shim also wraps the two libtorch switches tch does not.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!(
            "cargo:warning=DEP_TCH_LIBTORCH_LIB unset: torch-sys did not report libtorch's lib dir"
        );
        return;
    };
    // The shim needs only ATen's headers, next to the lib folder.
    let include = Path::new(&lib)
        .parent()
        .map(|p| p.join("include"))
        .unwrap_or_default();
    println!("cargo:rerun-if-changed=src/shim.cpp");
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .file("src/shim.cpp")
        .compile("aorta_torch_shim");
    // Every binary of the package (workloads, unit and integration tests) gets the rpath.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    // For the engine-level test, which must tell aorta where libtorch is.
    println!("cargo:rustc-env=AORTA_TORCH_LIB_DIR={lib}");
}
