# aorta's torch_profiler collector (docs/diagnostics.md): put first on PYTHONPATH of a trial
# whose recipe says `collect: [torch_profiler]`. Profiles the whole process with torch.profiler
# (CPU and, where available, CUDA activity) and writes the per-kernel device time to
# $AORTA_TORCH_PROFILE_OUT at exit. Then loads the sitecustomize it shadows, if any. aorta's
# libtorch workloads run no Python: they answer the variable themselves
# (workloads/torch/src/profile.rs).
import os
import sys


def _aorta_profile():
    out = os.environ.get("AORTA_TORCH_PROFILE_OUT")
    if not out:
        return
    os.environ.pop("AORTA_TORCH_PROFILE_OUT", None)  # child processes write no second profile
    import atexit
    import json

    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except Exception as e:  # no torch here: say so in the profile
        with open(out, "w") as f:
            json.dump({"tool": "torch_profiler", "kernels": [], "note": "torch not importable: %s" % e}, f)
        return
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    prof = profile(activities=acts)
    prof.__enter__()

    def done():
        try:
            prof.__exit__(None, None, None)
            kernels = []
            for e in prof.key_averages():
                dev = getattr(e, "self_device_time_total", None)
                if dev is None:
                    dev = getattr(e, "self_cuda_time_total", 0)
                if "CUDA" in str(getattr(e, "device_type", "")) and dev > 0:
                    kernels.append({"name": e.key, "calls": int(e.count), "total_us": float(dev)})
            note = None if torch.cuda.is_available() else "CUDA not available: no kernels recorded"
            with open(out, "w") as f:
                json.dump({"tool": "torch_profiler", "kernels": kernels, "note": note}, f)
        except Exception as e:
            with open(out, "w") as f:
                json.dump({"tool": "torch_profiler", "kernels": [], "note": "profiler failed: %s" % e}, f)

    atexit.register(done)


_aorta_profile()
# Load the sitecustomize this one shadows.
_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
if _rest != sys.path:
    import importlib.util

    for _p in _rest:
        _f = os.path.join(_p or ".", "sitecustomize.py")
        if os.path.isfile(_f):
            _spec = importlib.util.spec_from_file_location("_aorta_shadowed_sitecustomize", _f)
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
            break
