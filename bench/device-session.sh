#!/usr/bin/env bash
# One device call for issues 4 and 6: the env probe on the GPU machine (bench/probe/run-on-device.sh:
# cold, warm, --deep, bare import torch; then a changed CUDA_DEVICE_MAX_CONNECTIONS), the hw-queue
# recipe through the engine twice (the second run must execute nothing), and the convoy plot.
# Binaries come stripped in .carry/.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
B=$PWD/.carry/aorta; PY=/opt/torch/.venv/bin/python3
export AORTA_STORE=/tmp/aorta-store
# Probe timings (cold with the page cache evicted and warm, warm, --deep, bare import torch).
BIN=$B PY=$PY OUT=$OUT/probe N=${N:-5} bash bench/probe/run-on-device.sh 2>&1 | tee "$OUT/env-probe-bench.txt"
{
  "$B" env probe --python "$PY" -o "$OUT/env-cold.json" > /dev/null
  "$B" env probe --python "$PY" -o "$OUT/env-warm.json" > /dev/null
  CUDA_DEVICE_MAX_CONNECTIONS=1 "$B" env probe --python "$PY" -o "$OUT/env-cdmc1.json" > /dev/null
  "$B" env probe --python "$PY" --summary
  "$B" env diff "$OUT/env-cold.json" "$OUT/env-warm.json"; echo "diff cold/warm exit $?"
  "$B" env diff "$OUT/env-cold.json" "$OUT/env-cdmc1.json" --key-only; echo "diff cdmc exit $?"
} 2>&1 | tee "$OUT/env-probe.txt"
# The hw-queue sweep as an aorta recipe (workload protocol), twice.
mkdir -p /tmp/wl && ln -sf "$PWD/.carry/aorta-hw-queue" /tmp/wl/aorta-workload-hw_queue
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for lib in libnvrtc.so libcublasLt.so; do
  f=$(ls /usr/local/cuda/lib64/$lib.1[0-9]* "$SITE"/nvidia/cu13/lib/$lib.1[0-9]* "$SITE"/nvidia/*/lib/$lib.1[0-9]* 2>/dev/null | head -1)
  [ -n "$f" ] && export LD_LIBRARY_PATH="$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
{
  for run in 1 2; do
    t0=$(date +%s.%N)
    AORTA_WORKLOAD_PATH=/tmp/wl "$B" sweep run --recipe recipes/hw-queue-sweep.yaml --output /tmp/hwq
    echo "engine run $run exit $? in $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
  done
} 2>&1 | tee "$OUT/hw-queue-recipe.txt"
cp /tmp/hwq/HW-QUEUE-SWEEP/hw_queue/*/matrix.md "$OUT/hw-queue-matrix.md" 2>/dev/null
STEPS="convoy" BIN=$PWD/.carry/aorta-hw-queue OUT=/tmp/hwq-out bash bench/hw-queue/run-on-device.sh > /dev/null 2>&1
cp /tmp/hwq-out/convoy/latency-vs-connections.svg "$OUT/convoy-latency-vs-connections.svg" 2>/dev/null
ls -la "$OUT"
