#!/usr/bin/env bash
# hw-queue on the GPU machine (issue 6). Run from the repository root of the carried tree:
#     bash bench/hw-queue/run-on-device.sh
# Needs: target/release/aorta-hw-queue (built here: cargo build --release -p aorta-hw-queue),
# bench/hw-queue/amd_aorta-0.2.1-py3-none-any.whl, the machine's driver, CUDA 13.0 toolkit
# libraries (NVRTC, cuBLASLt) and /opt/torch/.venv (torch, numpy, pandas, click, pyyaml, tabulate).
# No Rust, no network. Everything lands under $OUT (the device tool's output folder; default
# ./hw-queue-out). Expected GPU time: about 2.5 minutes in all (ours ~1.5, AORTA ~1).
# STEPS="spin sweep ..." runs a subset; names below.
set -uo pipefail
OUT=${OUT:-$PWD/hw-queue-out}
BIN=${BIN:-$PWD/target/release/aorta-hw-queue}
PY=${PY:-/opt/torch/.venv/bin/python3}
WHEEL=${WHEEL:-$PWD/bench/hw-queue/amd_aorta-0.2.1-py3-none-any.whl}
STEPS=${STEPS:-"env launch spin sweep convoy gemm hetero tiny copy graph decode protocol aorta report"}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run-on-device.log") 2>&1

. "$(dirname "$0")/../cuda-libs.sh"
unset CUDA_DEVICE_MAX_CONNECTIONS   # the driver's default (8) unless a step sets it

want() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
step() { # step NAME TIMEOUT_S CMD...
  local name=$1 limit=$2; shift 2
  echo; echo "=== [$name] $*"
  local t0=$SECONDS; timeout "$limit" "$@"; local rc=$?
  echo "=== [$name] exit $rc after $((SECONDS - t0)) s"
  echo "$name rc=$rc seconds=$((SECONDS - t0))" >> "$OUT/steps.txt"
}

if want env; then
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/nvidia-smi.csv" 2>&1
  cat "$OUT/nvidia-smi.csv"
  "$BIN" --version
  "$BIN" list --verbose > "$OUT/list.txt"
fi
# Host cost of one launch (empty, 2-arg, 5-arg kernels), of an event record, of a graph's kernel.
want launch && step launch 60 "$BIN" run launch_overhead --out "$OUT/launch_overhead"
# 8 and 32 streams of one-block spin kernels at the default 8 connections, concurrency from the
# kernels' own stamps and, in a second pass, from per-stream events.
want spin && step spin 90 "$BIN" run spin_streams --streams 8,32 --order breadth,depth --timing both \
  --out "$OUT/spin_events"
# The sweep: streams 1..64 x CUDA_DEVICE_MAX_CONNECTIONS 1..32 x breadth/depth, one child each.
want sweep && step sweep 240 "$BIN" sweep spin_streams --connections 1,2,4,8,16,32 --out "$OUT/sweep_spin"
# Tiny kernel vs a 40-wave kernel of 1 ms blocks, normal and high priority, at 1, 8, 32 connections.
want convoy && step convoy 120 "$BIN" sweep priority_convoy --connections 1,8,32 --out "$OUT/convoy"
# AORTA P0 and the framework-free patterns, at the default connection count.
want gemm && step gemm 120 "$BIN" run large_gemm_only --out "$OUT/large_gemm_only"
want hetero && step hetero 150 "$BIN" sweep hetero_kernels --connections 1,8,32 --streams 2,4,8,16,32 \
  --iterations 20 --out "$OUT/hetero"
want tiny && step tiny 90 "$BIN" run tiny_kernel_stress --out "$OUT/tiny_kernel_stress"
want copy && step copy 90 "$BIN" run copy_overlap --out "$OUT/copy_overlap"
want graph && step graph 90 "$BIN" run graph_subgraphs --out "$OUT/graph_subgraphs"
want decode && step decode 120 "$BIN" run prefill_decode --out "$OUT/prefill_decode"

# The same binary as an aorta workload (docs/workload-protocol.md).
if want protocol; then
  mkdir -p "$OUT/protocol"
  ln -sf "$BIN" /tmp/aorta-workload-hw_queue
  /tmp/aorta-workload-hw_queue describe | tee "$OUT/protocol/describe.json"
  cat > "$OUT/protocol/config.json" <<JSON
{"protocol": 1, "workload": "hw_queue", "cell": "connections_8", "trial_index": 0, "steps": 1,
 "config": {"workload": "spin_streams", "streams": [8], "orders": ["breadth"], "iterations": 2,
            "min_concurrency": 7.85},
 "trial_dir": "$OUT/protocol"}
JSON
  step protocol 60 /tmp/aorta-workload-hw_queue run --config "$OUT/protocol/config.json" \
    --result "$OUT/protocol/result.json"
  cat "$OUT/protocol/result.json"
fi

# AORTA 0.2.1 side by side: its wheel into a venv (no deps, no index) that sees the torch venv.
if want aorta; then
  V=/tmp/aorta-venv
  rm -rf "$V"
  if "$PY" -m venv "$V" >/dev/null 2>&1 && [ -x "$V/bin/python" ]; then
    NEW_SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$SITE" > "$NEW_SITE/_torch_venv.pth"
    "$V/bin/python" -m pip install --quiet --no-deps --no-index "$WHEEL" || echo "pip install failed"
  fi
  if [ -x "$V/bin/aorta" ]; then
    AORTA=("$V/bin/aorta")
  else # no venv/pip on this python: unpack the pure-Python wheel and call its entry point
    rm -rf /tmp/aorta-site && "$PY" -m zipfile -e "$WHEEL" /tmp/aorta-site
    AORTA=(env PYTHONPATH=/tmp/aorta-site "$PY" -c 'import sys; from aorta.cli import main; sys.argv[0] = "aorta"; main()')
  fi
  mkdir -p "$OUT/aorta"
  for c in 1 8 32; do
    step "aorta_c$c" 150 env CUDA_DEVICE_MAX_CONNECTIONS=$c "${AORTA[@]}" bench hw_queue_eval sweep hetero_kernels \
      -s 2,4,8,16,32 -i 50 -w 10 -o "$OUT/aorta/hetero_c$c.json"
  done
fi

if want report; then
  "$PY" bench/hw-queue/report.py "$OUT" > "$OUT/report.md"
  cat "$OUT/report.md"
fi
echo; echo "=== steps"; cat "$OUT/steps.txt" 2>/dev/null
