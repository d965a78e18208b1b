// libtorch's global switches that tch does not wrap: deterministic algorithms and TF32.
// C linkage and no exceptions across the boundary; each returns 0 on success, -1 on error.
#include <ATen/Context.h>
#include <dlfcn.h>

#include <cstdio>
#include <string>

extern "C" {

// As AORTA's enable_deterministic: warn_only (ops without a deterministic kernel warn, not
// fail), cuDNN deterministic, no cuDNN autotuning.
int aorta_set_deterministic(int on) {
  try {
    at::globalContext().setDeterministicAlgorithms(on != 0, /*warn_only=*/true);
    at::globalContext().setDeterministicCuDNN(on != 0);
    at::globalContext().setBenchmarkCuDNN(false);
    return 0;
  } catch (...) {
    return -1;
  }
}

int aorta_deterministic() { return at::globalContext().deterministicAlgorithms() ? 1 : 0; }

int aorta_set_tf32(int on) {
  try {
    at::globalContext().setAllowTF32CuBLAS(on != 0);
    at::globalContext().setAllowTF32CuDNN(on != 0);
    return 0;
  } catch (...) {
    return -1;
  }
}

// Loads libtorch_cuda.so from the folder of the libtorch_cpu.so in use (else by name, through
// the rpath and LD_LIBRARY_PATH). On failure writes dlerror's text into err.
int aorta_load_cuda(char* err, int errlen) {
  std::string path = "libtorch_cuda.so";
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&at::globalContext), &info) && info.dli_fname) {
    std::string f = info.dli_fname;
    auto slash = f.rfind('/');
    if (slash != std::string::npos && f.find("libtorch_cpu") != std::string::npos) {
      path = f.substr(0, slash + 1) + "libtorch_cuda.so";
    }
  }
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return 0;
  const char* e = dlerror();
  std::snprintf(err, errlen, "%s: %s", path.c_str(), e ? e : "unknown error");
  return -1;
}

int aorta_tf32() { return at::globalContext().allowTF32CuBLAS() ? 1 : 0; }

}
