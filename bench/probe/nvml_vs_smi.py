"""How long the probe's GPU facts take: the three nvidia-smi processes it runs (query, --version,
topo -m) against the same facts through NVML in one process (ctypes). Run on a GPU machine:
  python3 bench/probe/nvml_vs_smi.py
"""
import ctypes, subprocess, time, statistics
Q = "index,name,uuid,pci.bus_id,compute_cap,memory.total,driver_version,vbios_version,ecc.mode.current,mig.mode.current,power.limit,power.default_limit,clocks.applications.graphics,clocks.applications.memory,clocks.max.sm,clocks.max.memory,persistence_mode,compute_mode,serial,clocks.sm,temperature.gpu,memory.used"
def t(cmd):
    s = time.perf_counter(); subprocess.run(cmd, capture_output=True); return (time.perf_counter() - s) * 1000
for name, cmd in [("query", ["nvidia-smi", f"--query-gpu={Q}", "--format=csv,noheader,nounits"]), ("--version", ["nvidia-smi", "--version"]), ("topo -m", ["nvidia-smi", "topo", "-m"])]:
    v = [t(cmd) for _ in range(7)]
    print(f"nvidia-smi {name}: median {statistics.median(v):.1f} ms (min {min(v):.1f}, max {max(v):.1f})")
code = r'''
import ctypes, time, sys
s = time.perf_counter()
n = ctypes.CDLL("libnvidia-ml.so.1")
t_load = time.perf_counter()
assert n.nvmlInit_v2() == 0
t_init = time.perf_counter()
c = ctypes.c_uint(); n.nvmlDeviceGetCount_v2(ctypes.byref(c))
buf = ctypes.create_string_buffer(96)
for i in range(c.value):
    h = ctypes.c_void_p(); n.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
    n.nvmlDeviceGetName(h, buf, 96); n.nvmlDeviceGetUUID(h, buf, 96); n.nvmlDeviceGetVbiosVersion(h, buf, 96)
    a = ctypes.c_int(); b = ctypes.c_int(); n.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(a), ctypes.byref(b))
    mem = (ctypes.c_ulonglong * 3)(); n.nvmlDeviceGetMemoryInfo(h, mem)
    cur = ctypes.c_int(); pend = ctypes.c_int(); n.nvmlDeviceGetEccMode(h, ctypes.byref(cur), ctypes.byref(pend)); n.nvmlDeviceGetMigMode(h, ctypes.byref(cur), ctypes.byref(pend))
    u = ctypes.c_uint()
    for f in ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetTemperature"):
        getattr(n, f)(h, *( [0] if f.endswith("Temperature") else [] ), ctypes.byref(u))
    for clk in range(3):
        n.nvmlDeviceGetApplicationsClock(h, clk, ctypes.byref(u)); n.nvmlDeviceGetMaxClockInfo(h, clk, ctypes.byref(u)); n.nvmlDeviceGetClockInfo(h, clk, ctypes.byref(u))
    n.nvmlDeviceGetPersistenceMode(h, ctypes.byref(u)); n.nvmlDeviceGetComputeMode(h, ctypes.byref(u)); n.nvmlDeviceGetSerial(h, buf, 96)
    for j in range(c.value):
        h2 = ctypes.c_void_p(); n.nvmlDeviceGetHandleByIndex_v2(j, ctypes.byref(h2)); n.nvmlDeviceGetTopologyCommonAncestor(h, h2, ctypes.byref(u))
n.nvmlSystemGetDriverVersion(buf, 96); n.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(u))
t_q = time.perf_counter()
print(f"{(t_load-s)*1000:.1f} {(t_init-t_load)*1000:.1f} {(t_q-t_init)*1000:.1f} {c.value}")
'''
rows = []
for _ in range(7):
    out = subprocess.run(["python3", "-c", code], capture_output=True, text=True)
    if out.returncode: print(out.stderr[-500:]); break
    rows.append([float(x) for x in out.stdout.split()])
if rows:
    for k, name in enumerate(["dlopen", "nvmlInit_v2", "all queried fields + topology + driver"]):
        v = [r[k] for r in rows]
        print(f"NVML in-process {name}: median {statistics.median(v):.2f} ms (min {min(v):.2f}, max {max(v):.2f}), {int(rows[0][3])} device(s)")
