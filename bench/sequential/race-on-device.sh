#!/usr/bin/env bash
# Issue 35 on the GPU machine: recipes/race-single-gpu.yaml (the race workload's planted missing
# stream sync, 5 cells) with `trials: 10` and with `trials: auto`, each from an empty store:
# trials executed, wall time and the answer of each.
# Run from the repository root of the carried tree:   bash bench/sequential/race-on-device.sh
# Needs, stripped, in .carry/: `aorta` and `aorta-workload-race` (cargo build --release
# -p aorta-cli -p aorta-race). No Rust, no network. Everything lands under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/race-auto-out}
B=$PWD/.carry
PY=${PY:-/opt/torch/.venv/bin/python3}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/race-on-device.log") 2>&1

. "$(dirname "$0")/../cuda-libs.sh"
export AORTA_NCCL_LIB=${AORTA_NCCL_LIB:-$(ls "$SITE"/nvidia/nccl/lib/libnccl.so.2 2>/dev/null | head -1)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset CUDA_DEVICE_MAX_CONNECTIONS CUDA_LAUNCH_BLOCKING
mkdir -p /tmp/race-wl && ln -sf "$B/aorta-workload-race" /tmp/race-wl/aorta-workload-race
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

sed 's/^trials: 10$/trials: auto\nmax_trials_per_cell: 64/' recipes/race-single-gpu.yaml \
  > "$OUT/race-single-gpu-auto.yaml"
grep -q '^trials: auto' "$OUT/race-single-gpu-auto.yaml" || { echo "no trials: auto"; exit 1; }

for run in fixed auto; do
  recipe=recipes/race-single-gpu.yaml
  [ "$run" = auto ] && recipe="$OUT/race-single-gpu-auto.yaml"
  export AORTA_STORE=/tmp/aorta-store-race-$run
  rm -rf "$AORTA_STORE" "$OUT/$run"
  t0=$(date +%s.%N)
  AORTA_WORKLOAD_PATH=/tmp/race-wl "$B/aorta" sweep run --recipe "$recipe" --output "$OUT/$run" \
    > "$OUT/$run.stdout" 2> "$OUT/$run.stderr"
  rc=$?
  t1=$(date +%s.%N)
  echo "== $run: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s"
  grep -E '^(Trials|Answer|Next):' "$OUT/$run.stdout"
  sed -n '/^## Answer/,/^## Reproduction/p' "$OUT/$run"/*/*/*/matrix.md | grep '^|'
  find "$OUT/$run" -name stdout.log -size +1M -delete 2>/dev/null
done
