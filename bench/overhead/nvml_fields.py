#!/usr/bin/env python3
"""Cost of reading the thermal-violation counter through NVML: nvmlDeviceGetViolationStatus
against nvmlDeviceGetFieldValues (field 75, and the cumulative counters 251/252 where the driver
has them), medians of 300 calls on device 0. Usage: nvml_fields.py"""
import ctypes, statistics, time
nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0
dev = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0
class FV(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]
class Violation(ctypes.Structure):
    _fields_ = [("referenceTime", ctypes.c_ulonglong), ("violationTime", ctypes.c_ulonglong)]
vio = Violation()
def fields(ids):
    arr = (FV * len(ids))()
    for i, f in enumerate(ids): arr[i].fieldId = f
    rc = nvml.nvmlDeviceGetFieldValues(dev, len(ids), arr)
    return rc, [(a.fieldId, a.nvmlReturn, a.valueType, a.value) for a in arr]
print("violation thermal:", nvml.nvmlDeviceGetViolationStatus(dev, 1, ctypes.byref(vio)), vio.violationTime, vio.referenceTime)
for ids in ([75], [251], [252], [75, 251, 252]):
    print(ids, fields(ids))
calls = {
  "GetViolationStatus(thermal)": lambda: nvml.nvmlDeviceGetViolationStatus(dev, 1, ctypes.byref(vio)),
  "GetFieldValues([75])": lambda: fields([75]),
  "GetFieldValues([251,252])": lambda: fields([251, 252]),
  "GetFieldValues([75,251,252])": lambda: fields([75, 251, 252]),
}
for name, f in calls.items():
    ts = []
    for _ in range(300):
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e6)
    print(f"{name}: median {statistics.median(ts):.1f} us, min {min(ts):.1f}")
