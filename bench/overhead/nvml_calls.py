#!/usr/bin/env python3
"""Cost of the NVML calls a probe-mode trial makes (ctypes on libnvidia-ml.so.1), medians of
N calls each on device 0: what `aorta`'s GPU readings cost per trial.

Usage: nvml_calls.py [N]
"""
import ctypes
import statistics
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0
dev = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Violation(ctypes.Structure):
    _fields_ = [("referenceTime", ctypes.c_ulonglong), ("violationTime", ctypes.c_ulonglong)]


class Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


mem, vio, util, reasons, count = Memory(), Violation(), Util(), ctypes.c_ulonglong(), ctypes.c_uint()
calls = {
    "nvmlDeviceGetMemoryInfo": lambda: nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(mem)),
    "nvmlDeviceGetViolationStatus(thermal)": lambda: nvml.nvmlDeviceGetViolationStatus(dev, 1, ctypes.byref(vio)),
    "nvmlDeviceGetUtilizationRates": lambda: nvml.nvmlDeviceGetUtilizationRates(dev, ctypes.byref(util)),
    "nvmlDeviceGetCurrentClocksEventReasons": lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(dev, ctypes.byref(reasons)),
    "nvmlDeviceGetCount_v2": lambda: nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)),
}
import os
import shutil

true = shutil.which("true")


# The same calls timed right after a posix_spawn + wait of `true` (not timed), as a trial's
# after-exit reading is.
for name in list(calls):
    if "Memory" in name or "Violation" in name:
        calls[name + ", right after a spawn of true"] = calls[name]
print(f"| NVML call (device 0) | median µs | min µs | n={N} |")
print("|---|---|---|---|")
for name, f in calls.items():
    ts = []
    for _ in range(N):
        if "after a spawn" in name:
            pid = os.posix_spawn(true, [true], os.environ)
            os.waitpid(pid, 0)
        t0 = time.perf_counter()
        rc = f()
        ts.append((time.perf_counter() - t0) * 1e6)
    print(f"| {name} (rc {rc}) | {statistics.median(ts):.1f} | {min(ts):.1f} | |")
