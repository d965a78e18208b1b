#!/bin/bash
# On the GPU machine: AORTA's own env probes (0.3.0 and 0.2.1) and aorta's, side by side, plus
# the driver facts `gpu.driver_identity` reads, for tests/fixtures/aorta/ and the CUDA fixture.
# AORTA is pure Python: carry each release's `aorta` package directory (from the venvs
# tests/run-all makes, .cache/aorta-*/lib/python3.*/site-packages/aorta) and an `aorta` binary;
# the machine's python3 has torch, click and PyYAML.
# Usage: aorta-env.sh OUTDIR AORTA_BIN AORTA030_SITE AORTA021_SITE
O=${1:?outdir}; A=${2:?aorta binary}; S030=${3:?dir holding 0.3.0 aorta/}; S021=${4:?dir holding 0.2.1 aorta/}
mkdir -p "$O"; cd "$(mktemp -d)" || exit 2   # AORTA's build_system reads the working directory
for v in 030:$S030 021:$S021; do
  PYTHONPATH=${v#*:} python3 -c 'import sys; from aorta.cli import main; main(args=["env","probe","-o",sys.argv[1]])' \
    "$O/aorta-${v%%:*}-gpu.json" >"$O/aorta-${v%%:*}.log" 2>&1
done
"$A" env probe -o "$O/aorta-gpu.json" >"$O/aorta.log" 2>&1
"$A" env diff "$O/aorta-030-gpu.json" "$O/aorta-gpu.json" >"$O/diff.txt" 2>&1
{
  echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version
  echo "== /sys/module/nvidia"; cat /sys/module/nvidia/version /sys/module/nvidia/srcversion
  echo "== ldconfig -p (driver)"; ldconfig -p | grep -E 'libcuda|libnvidia-ml'
  for f in $(ldconfig -p | grep -E 'libcuda.so|libnvidia-ml.so' | sed 's/.*=> //'); do ls -la "$f"; readlink -f "$f"; done
  echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ls -la /usr/local/cuda/compat 2>&1
  echo "== readelf -d (search paths)"
  T=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
  for f in "$T"/lib/libtorch_cuda.so "$(dirname "$T")"/nvidia/*/lib/*.so*; do
    echo "-- $f"; readelf -d "$f" | grep -E 'RPATH|RUNPATH'
  done
} >"$O/driver-facts.txt" 2>&1
