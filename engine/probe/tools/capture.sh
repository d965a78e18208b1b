#!/bin/bash
# Captures raw tool outputs on a GPU machine so the probe's parsers and the CUDA fixture can be
# checked against reality (timings of each tool go to OUTDIR/timings.txt).
# Usage: capture.sh OUTDIR [PYTHON]
O=${1:?outdir}; PY=${2:-/opt/torch/.venv/bin/python3}
mkdir -p "$O"
t() { local name=$1; shift; local s=$(date +%s%N); "$@" >"$O/$name.out" 2>"$O/$name.err"; echo "$name rc=$? $(( ($(date +%s%N) - s) / 1000000 ))ms" >>"$O/timings.txt"; }
F=index,name,uuid,pci.bus_id,compute_cap,memory.total,driver_version,vbios_version,ecc.mode.current,mig.mode.current,power.limit,power.default_limit,clocks.applications.graphics,clocks.applications.memory,clocks.max.sm,clocks.max.memory,persistence_mode,compute_mode,serial,clocks.sm,temperature.gpu,memory.used
t smi_plain nvidia-smi
t smi_plain2 nvidia-smi
t smi_query nvidia-smi --query-gpu=$F --format=csv,noheader,nounits
t smi_query_hdr nvidia-smi --query-gpu=$F --format=csv
t smi_q nvidia-smi -q
t smi_qx nvidia-smi -q -x
t smi_topo nvidia-smi topo -m
t smi_L nvidia-smi -L
t smi_help nvidia-smi --help-query-gpu
t smi_version nvidia-smi --version
cat /proc/driver/nvidia/version >"$O/proc_driver_version.out" 2>&1
t nvcc nvcc --version
which nvcc >"$O/which_nvcc.out" 2>&1
ls -la /usr/local/ >"$O/usr_local.out" 2>&1
ls -la /usr/local/cuda*/lib64/ >"$O/cuda_lib64.out" 2>&1
cat /usr/local/cuda/version.json >"$O/cuda_version_json.out" 2>&1
t ldconfig ldconfig -p
t getconf getconf GNU_LIBC_VERSION
t ldd ldd --version
cat /etc/os-release >"$O/os_release.out"
head -40 /proc/cpuinfo >"$O/cpuinfo_head.out"; grep -c ^processor /proc/cpuinfo >"$O/cpuinfo_count.out"
grep -E '^(physical id|cpu cores|siblings)' /proc/cpuinfo | sort | uniq -c >"$O/cpuinfo_topo.out"
head -5 /proc/meminfo >"$O/meminfo.out"
ls /sys/devices/system/node/ >"$O/numa.out" 2>&1
cat /proc/1/cgroup >"$O/cgroup1.out" 2>&1; cat /proc/self/cgroup >"$O/cgroup_self.out" 2>&1
ls -la /.dockerenv /run/.containerenv >"$O/containerenv.out" 2>&1
grep -E 'docker|containers|overlay' /proc/self/mountinfo | head -5 >"$O/mountinfo.out" 2>&1
cat /proc/sys/kernel/osrelease /proc/sys/kernel/version /proc/sys/kernel/hostname >"$O/kernel.out"
ls -la /dev/nvidia* /dev/kfd >"$O/dev.out" 2>&1
env | cut -d= -f1 | sort >"$O/env_names.out"
env | grep -E '^(CUDA|NCCL|TORCH|PYTORCH|NVIDIA|CUBLAS|LD_LIBRARY|PATH=|VIRTUAL|CONDA)' >"$O/env_interesting.out"
ls -la "$PY" "$(dirname "$PY")" >"$O/python_ls.out" 2>&1
cat "$(dirname "$PY")/../pyvenv.cfg" >"$O/pyvenv_cfg.out" 2>&1
SP=$("$PY" -c 'import site;print(site.getsitepackages()[0])')
echo "$SP" >"$O/site.out"
find "$SP/nvidia" -maxdepth 3 >"$O/site_nvidia.out" 2>&1
ls -la "$SP"/nvidia/*/lib/ >"$O/site_nvidia_libs.out" 2>&1
ls "$SP" | grep -iE 'nvidia|torch|triton|cuda' >"$O/site_dists.out"
ls -la "$SP/torch/lib" >"$O/torch_lib.out" 2>&1
ls -la --time-style=full-iso -d "$SP/torch" "$SP/torch/version.py" "$SP" >"$O/torch_stat.out" 2>&1
cat "$SP/torch/version.py" >"$O/torch_version_py.out" 2>&1
find "$SP/nvidia" -name 'cudnn_version*.h' -o -name 'nccl.h' -o -name 'cublas_api.h' >"$O/headers.out" 2>&1
t pyprobe "$PY" engine/probe/src/torch_probe.py
t pyprobe2 "$PY" engine/probe/src/torch_probe.py
t pyprobe_deep "$PY" engine/probe/src/torch_probe.py deep
t pyprobe_deep2 "$PY" engine/probe/src/torch_probe.py deep
cat "$SP"/torch-*.dist-info/RECORD | head -50 >"$O/torch_record_head.out" 2>&1
wc -l "$SP"/torch-*.dist-info/RECORD >"$O/torch_record_lines.out" 2>&1
t pyimport "$PY" -c 'import torch'
t pystart "$PY" -c 'pass'
t pyimport_cuda "$PY" -c 'import torch;torch.cuda.init();print(torch.cuda.get_device_name(0), torch.cuda.get_arch_list())'
s=$(date +%s%N); cat $(readlink -f "$SP"/nvidia/*/lib/*.so*) | wc -c >"$O/lib_total_bytes.out"; echo "cat_libs $(( ($(date +%s%N) - s) / 1000000 ))ms" >>"$O/timings.txt"
du -sh "$SP"/nvidia/*/lib >"$O/lib_du.out" 2>&1
which amd-smi rocm_agent_enumerator rocm-sdk >"$O/which_amd.out" 2>&1
