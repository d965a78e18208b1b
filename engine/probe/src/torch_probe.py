# aorta env probe: the interpreter part. Prints one line "AORTA_PROBE_JSON:<json>" on stdout.
#
# Default ("files") mode imports nothing but the standard library: it reports where this
# interpreter finds packages (sys.path after its normal startup: venv, user site, PYTHONPATH,
# .pth files) and where `import torch` would load torch from (importlib.util.find_spec, which
# locates the package without executing it). Everything else (torch/version.py, dist-info
# metadata, library headers) is read by aorta from those paths.
#
# "deep" mode (sys.argv[1] == "deep", `aorta env probe --deep`) also imports torch for what only
# a live torch can say: torch.__config__.show(), SDPA / TF32 / determinism flags, the allocator
# backend, the libraries it mapped. Rules there: never touch a CUDA/HIP context (no torch.cuda.*
# call that initialises the runtime); every lookup is guarded, a failure becomes an "errors" entry.
import json, os, sys

out = {"schema": 2, "errors": {}}
err = out["errors"]
deep = sys.argv[1:2] == ["deep"]
out["mode"] = "deep" if deep else "files"

# `python -c` puts the current directory first on sys.path; a workload run as `python train.py`
# has its script's directory there instead. Neither belongs to the environment: drop it, so a
# `torch/` directory in aorta's working directory (a PyTorch checkout) is not mistaken for the
# installed torch.
if sys.path and sys.path[0] == "":
    del sys.path[0]


def guard(name, fn, default=None):
    try:
        return fn()
    except BaseException as e:  # noqa: BLE001 - a probe must never die
        err[name] = "%s: %s" % (type(e).__name__, str(e)[:300])
        return default


out["python"] = {
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "implementation": sys.implementation.name,
    "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
}


def site_dirs():
    # The site-packages directories this interpreter uses: the user site only when it is enabled
    # (a venv without system site packages, -s or PYTHONNOUSERSITE turn it off).
    import site
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    if getattr(site, "ENABLE_USER_SITE", False):
        user = getattr(site, "getusersitepackages", lambda: None)()
        if isinstance(user, str):
            dirs.append(user)
    return [d for d in dirs if os.path.isdir(d)]


out["site_packages"] = guard("site_packages", site_dirs, [])
out["sys_path"] = [p for p in sys.path if isinstance(p, str) and os.path.isdir(p)]


def find(name):
    import importlib.util
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    return {"origin": spec.origin, "locations": list(spec.submodule_search_locations or [])}


out["torch_spec"] = guard("torch_spec", lambda: find("torch"))


def deep_probe(d):
    import time
    t0 = time.time()
    try:
        import warnings
        warnings.simplefilter("ignore")
        import torch
    except BaseException as e:  # noqa: BLE001
        torch = None
        d["torch_import_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    d["torch_import_seconds"] = round(time.time() - t0, 3)

    if torch is not None:
        tv = getattr(torch, "version", None)
        d["torch"] = guard("torch", lambda: {
            "version": str(torch.__version__),
            "file": os.path.dirname(torch.__file__),
            "git_commit": getattr(tv, "git_version", None),
            "cuda": getattr(tv, "cuda", None),
            "hip": getattr(tv, "hip", None),
            "debug": getattr(tv, "debug", None),
        })
        if d["torch"] is None:
            return
        d["config_show"] = guard("config_show", lambda: torch.__config__.show())
        d["arch_flags"] = guard("arch_flags", lambda: torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None)
        cudnn = torch.backends.cudnn
        d["cudnn"] = {
            "compiled": guard("cudnn.compiled", lambda: torch._C._cudnn.getCompileVersion() if getattr(torch._C, "_cudnn", None) else None),
            # cudnnGetVersion of the library torch loaded. Not cudnn.version(): on torch 2.11 that
            # initialises CUDA (measured on the H200: +0.24 s and a context).
            "runtime": guard("cudnn.runtime", lambda: torch._C._cudnn.getVersionInt() if getattr(torch._C, "_cudnn", None) and cudnn.is_available() else None),
            "enabled": guard("cudnn.enabled", lambda: cudnn.enabled),
            "benchmark": guard("cudnn.benchmark", lambda: cudnn.benchmark),
            "deterministic": guard("cudnn.deterministic", lambda: cudnn.deterministic),
            "allow_tf32": guard("cudnn.allow_tf32", lambda: cudnn.allow_tf32),
        }
        d["nccl"] = guard("nccl", lambda: torch.cuda.nccl.version() if torch.distributed.is_nccl_available() else None)
        b = torch.backends.cuda

        def getter(name):
            fn = getattr(b, name, None)
            return guard("sdpa." + name, fn) if fn is not None else None

        d["sdpa"] = {n: getter(n + "_sdp_enabled") for n in ("flash", "mem_efficient", "math", "cudnn")}
        d["numerics"] = {
            "matmul_allow_tf32": guard("matmul_allow_tf32", lambda: b.matmul.allow_tf32),
            "matmul_fp16_reduced_precision": guard("fp16_reduction", lambda: b.matmul.allow_fp16_reduced_precision_reduction),
            "matmul_bf16_reduced_precision": guard("bf16_reduction", lambda: b.matmul.allow_bf16_reduced_precision_reduction),
            "float32_matmul_precision": guard("float32_matmul_precision", torch.get_float32_matmul_precision),
            "deterministic_algorithms": guard("deterministic", torch.are_deterministic_algorithms_enabled),
            "deterministic_warn_only": guard("warn_only", torch.is_deterministic_algorithms_warn_only_enabled),
            "preferred_blas_library": guard("blas", lambda: str(torch.backends.cuda.preferred_blas_library()) if torch.version.cuda or torch.version.hip else None),
        }

        def allocator():
            f = getattr(torch._C, "_cuda_getAllocatorBackend", None)
            return f() if f is not None and (tv.cuda or tv.hip) else None

        d["allocator_backend"] = guard("allocator_backend", allocator)
        d["cuda_initialized"] = guard("cuda_initialized", lambda: torch.cuda.is_initialized())

    def loaded():
        # What torch really loaded: the mapped shared objects of this very process.
        libs = set()
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split(None, 5)
                if len(p) == 6 and ".so" in p[5]:
                    libs.add(p[5].strip())
        return sorted(libs)

    d["loaded_libraries"] = guard("loaded_libraries", loaded, [])


if deep:
    out["deep"] = {}
    err = out["deep"]["errors"] = {}  # guard() reports into the deep part from here on
    guard("deep", lambda: deep_probe(out["deep"]))

sys.stdout.write("\nAORTA_PROBE_JSON:" + json.dumps(out, sort_keys=True, default=str) + "\n")
