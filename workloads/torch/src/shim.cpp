// libtorch's global switches that tch does not wrap (deterministic algorithms, TF32, SDPA
// backends), its fused AdamW, and its Kineto profiler (collect: [torch_profiler]).
// C linkage and no exceptions across the boundary; each returns 0 on success, -1 on error.
#include <ATen/Context.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adamw.h>
#include <dlfcn.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

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

// Only one SDPA backend enabled: 0 math, 1 flash, 2 memory-efficient, 3 cuDNN. For triage:
// which fused attention kernel moves the bits. A backend that cannot take a call makes
// libtorch raise, which the workload reports.
int aorta_sdpa_only(int which) {
  try {
    auto& c = at::globalContext();
    c.setSDPUseMath(which == 0);
    c.setSDPUseFlash(which == 1);
    c.setSDPUseFA3(false);
    c.setSDPUseMemEfficient(which == 2);
    c.setSDPUseCuDNN(which == 3);
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

// One AdamW step over every parameter with a gradient, in one fused kernel per device and
// dtype: what PyTorch's AdamW(fused=True) calls. libtorch's C++ AdamW (which tch wraps) loops
// over parameters with several kernels each, so a small model's step was launch-bound.
// `steps` are 0-dim float views into one tensor the caller increments once per step.
int aorta_fused_adamw(at::Tensor** params, at::Tensor** grads, at::Tensor** exp_avgs, at::Tensor** exp_avg_sqs, at::Tensor** steps, int n,
                      double lr, double beta1, double beta2, double weight_decay, double eps, char* err, int errlen) {
  try {
    std::vector<at::Tensor> p, g, m, v, s;
    for (int i = 0; i < n; ++i) {
      p.push_back(*params[i]);
      g.push_back(*grads[i]);
      m.push_back(*exp_avgs[i]);
      v.push_back(*exp_avg_sqs[i]);
      s.push_back(*steps[i]);
    }
    at::_fused_adamw_(p, g, m, v, {}, s, lr, beta1, beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "%s", e.what());
    return -1;
  }
}

// Drops the parameters' gradients (PyTorch's zero_grad(set_to_none=True)): no kernel at all,
// and backward then writes fresh gradients instead of accumulating into zeros.
void aorta_clear_grads(at::Tensor** params, int n) {
  for (int i = 0; i < n; ++i) {
    params[i]->mutable_grad().reset();
  }
}

int aorta_tf32() { return at::globalContext().allowTF32CuBLAS() ? 1 : 0; }

// Starts libtorch's Kineto profiler as torch.profiler.profile does (prepare, then enable):
// CPU activity, and CUDA's (CUPTI) when `cuda` is set. On failure writes the reason into err.
int aorta_profiler_start(int cuda, char* err, int errlen) {
  try {
    using namespace torch::profiler::impl;
    ProfilerConfig config(ProfilerState::KINETO);
    std::set<ActivityType> activities{ActivityType::CPU};
    if (cuda) activities.insert(ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "%s", e.what());
  } catch (...) {
    std::snprintf(err, errlen, "unknown C++ exception");
  }
  return -1;
}

// Called once per device event: its name (valid for the call only) and duration.
typedef void (*aorta_device_event)(void* ctx, const char* name, uint64_t duration_ns);

// Stops the profiler and hands each CUDA kernel, memcpy and memset with a duration to `each`.
// GPU annotations and sync waits, also CUDA device events, are left out: they span kernels
// and would count their time twice.
int aorta_profiler_stop(aorta_device_event each, void* ctx, char* err, int errlen) {
  try {
    auto result = torch::autograd::profiler::disableProfiler();
    if (!result) {
      std::snprintf(err, errlen, "disableProfiler returned no result (was the profiler running?)");
      return -1;
    }
    for (const auto& e : result->events()) {
      auto kind = static_cast<libkineto::ActivityType>(e.activityType());
      bool device_work = kind == libkineto::ActivityType::CONCURRENT_KERNEL ||
                         kind == libkineto::ActivityType::GPU_MEMCPY ||
                         kind == libkineto::ActivityType::GPU_MEMSET;
      if (e.deviceType() != c10::DeviceType::CUDA || !device_work || e.durationNs() == 0) continue;
      each(ctx, e.name().c_str(), e.durationNs());
    }
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "%s", e.what());
  } catch (...) {
    std::snprintf(err, errlen, "unknown C++ exception");
  }
  return -1;
}

}
