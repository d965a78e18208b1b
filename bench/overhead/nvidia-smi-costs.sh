#!/usr/bin/env bash
# On the GPU machine: what the environment snapshot's three nvidia-smi runs cost, alone and in
# parallel, with NVML held open by another process, and a one-trial build's phases (AORTA_TIMING).
#   bench/overhead/nvidia-smi-costs.sh   (expects target/dev-carry/aorta-new: a stripped release aorta)
nvidia-smi --query-gpu=persistence_mode,driver_version --format=csv,noheader
Q="index,name,uuid,pci.bus_id,compute_cap,memory.total,driver_version,vbios_version,ecc.mode.current,mig.mode.current,power.limit,power.default_limit,clocks.applications.graphics,clocks.applications.memory,clocks.max.sm,clocks.max.memory,persistence_mode,compute_mode,serial,clocks.sm,temperature.gpu,memory.used"
t() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; echo "$(( ($(date +%s%N)-s)/1000 )) us: $*" | cut -c1-80; }
for i in 1 2 3; do
  t nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits
  t nvidia-smi --version
  t nvidia-smi topo -m
done
echo "--- three in parallel"
for i in 1 2 3; do
  s=$(date +%s%N)
  nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits >/dev/null & nvidia-smi --version >/dev/null & nvidia-smi topo -m >/dev/null & wait
  echo "$(( ($(date +%s%N)-s)/1000 )) us parallel"
done
echo "--- while a python process holds NVML open"
python3 -c "
import ctypes,time
n=ctypes.CDLL('libnvidia-ml.so.1'); t=time.perf_counter(); n.nvmlInit_v2(); print('nvmlInit in python: %.1f ms'%((time.perf_counter()-t)*1e3), flush=True); time.sleep(6)" &
sleep 1.5
for i in 1 2 3; do
  s=$(date +%s%N)
  nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits >/dev/null & nvidia-smi --version >/dev/null & nvidia-smi topo -m >/dev/null & wait %2 %3 %4 2>/dev/null; wait $(jobs -p | tail -3) 2>/dev/null
  echo "$(( ($(date +%s%N)-s)/1000 )) us parallel (NVML held)"
done
wait
d=target/dev-carry
cd /tmp && printf 'schema_version: 1\nmode: probe\nticket: T\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n' > one.yaml
for i in 1 2 3; do rm -rf s o; AORTA_TIMING=1 AORTA_STORE=s $OLDPWD/$d/aorta-new sweep run --recipe one.yaml --output o -- true 2>&1 >/dev/null | grep "env snapshot\|compile\|schedule\|cells"| tr '\n' ' '; echo; done
