#!/usr/bin/env bash
# Issue 8 on the GPU machine: the race workload at world size 1, every mode with and without the
# planted bug (iteration time per mode), then the single-GPU recipe through the engine.
# Per mode: `missing_sync_true` (the bug), `missing_sync_false` (the fix: pipelined, the default
# buffer_depth 2) and `single_buffered` (the fix with buffer_depth 1: the planted waits restored
# on single buffers). "vs bug" is the step mean over the bug's; the fix should be ~1.0.
# Run from the repository root of the carried tree:   bash bench/race/run-on-device.sh
# Needs, stripped, in .carry/: `aorta` and `aorta-workload-race` (cargo build --release -p aorta-cli
# -p aorta-race). No Rust, no network. Everything lands under $OUT. Expected GPU time ~7 minutes.
# STEPS="standalone sweep" runs a subset.
set -uo pipefail
OUT=${OUT:-$PWD/race-out}
B=$PWD/.carry
PY=${PY:-/opt/torch/.venv/bin/python3}
STEPS=${STEPS:-"standalone sweep"}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run-on-device.log") 2>&1

. "$(dirname "$0")/../cuda-libs.sh"
export AORTA_NCCL_LIB=${AORTA_NCCL_LIB:-$(ls "$SITE"/nvidia/nccl/lib/libnccl.so.2 2>/dev/null | head -1)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset CUDA_DEVICE_MAX_CONNECTIONS CUDA_LAUNCH_BLOCKING
mkdir -p /tmp/race-wl && ln -sf "$B/aorta-workload-race" /tmp/race-wl/aorta-workload-race
WL=/tmp/race-wl/aorta-workload-race
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH AORTA_NCCL_LIB=$AORTA_NCCL_LIB"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > "$OUT/nvidia-smi.csv" 2>&1
"$WL" describe | tee "$OUT/describe.json"

want() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }

# One trial of the workload as the engine runs it, config from the recipe's shape.
trial() { # trial NAME JSON_CONFIG
  local dir="$OUT/standalone/$1"; mkdir -p "$dir"
  cat > "$dir/config.json" <<JSON
{"protocol": 1, "workload": "race", "cell": "$1", "trial_index": 0, "steps": 1, "config": $2, "trial_dir": "$dir"}
JSON
  local t0=$SECONDS
  (cd "$dir" && timeout 300 "$WL" run --config config.json --result result.json > stdout.log 2> stderr.log)
  echo "$1 rc=$? seconds=$((SECONDS - t0))"; tail -2 "$dir/stderr.log"
}

if want standalone; then
  COMMON='"dtype": "bfloat16", "warmup_iterations": 10, "verify_iterations": 100, "stop_on_first_corruption": false, "gemm_size": 4096, "gemm_layers": 4, "race_window_us": 200, "comm_delay_us": 1000'
  for mode in default ddp fsdp; do
    extra=""
    [ "$mode" = ddp ] && extra=', "ddp_bucketed": true'
    [ "$mode" = fsdp ] && extra=', "shared_layer_weights": true'
    for ms in false true; do
      trial "${mode}_missing_sync_$ms" "{\"mode\": \"$mode\", \"missing_sync\": $ms, $COMMON$extra}"
    done
    trial "${mode}_single_buffered" "{\"mode\": \"$mode\", \"missing_sync\": false, \"buffer_depth\": 1, $COMMON$extra}"
  done
  # The same with two ranks on one GPU would need two GPUs; world size 1 is the issue's scope.
  "$PY" - "$OUT" <<'PYEOF' | tee "$OUT/standalone.md"
import json, sys, glob, os, statistics as st
out = sys.argv[1]; rows = []
for f in sorted(glob.glob(f"{out}/standalone/*/result.json")):
    r = json.load(open(f)); m = r.get("metrics", {}); s = r.get("step_times_ms") or [0]
    rows.append({"run": os.path.basename(os.path.dirname(f)), "passed": r["passed"],
                 "corrupt_iterations": m.get("corrupt_iterations"), "verified": len(r.get("step_times_ms", [])),
                 "first_failure_iteration": r.get("first_failure_iteration"),
                 "step_ms_mean": round(st.mean(s), 3), "step_ms_p50": round(st.median(s), 3),
                 "schedule": m.get("schedule"), "buffer_depth": m.get("buffer_depth"),
                 "types": m.get("corruptions_by_type"), "error": (r.get("failure_details") or [{}])[0].get("error")})
bug = {x["run"].split("_")[0]: x["step_ms_mean"] for x in rows if x["run"].endswith("_missing_sync_true")}
for x in rows:
    b = bug.get(x["run"].split("_")[0])
    x["vs_bug"] = round(x["step_ms_mean"] / b, 3) if b else None
json.dump(rows, open(f"{out}/standalone.json", "w"), indent=2)
print("| run | schedule (depth) | passed | corrupt / verified | first | step mean ms | p50 ms | vs bug | types |")
print("|---|---|---|---|---|---|---|---|---|")
for x in rows:
    print(f"| {x['run']} | {x['schedule']} ({x['buffer_depth']}) | {x['passed']} | {x['corrupt_iterations']} / {x['verified']} | {x['first_failure_iteration']} | {x['step_ms_mean']} | {x['step_ms_p50']} | {x['vs_bug']} | {x['types'] or x['error'] or ''} |")
PYEOF
fi

if want sweep; then
  export AORTA_STORE=/tmp/aorta-store-race
  t0=$SECONDS
  AORTA_WORKLOAD_PATH=/tmp/race-wl "$B/aorta" sweep run --recipe recipes/race-single-gpu.yaml --output "$OUT/runs"
  echo "sweep exit $? after $((SECONDS - t0)) s"
  find "$OUT/runs" -name matrix.md | head -1 | xargs -r cat
  # Keep the run directory small: logs of the first trial per cell are enough.
  find "$OUT/runs" -name stdout.log -size +1M -delete 2>/dev/null
fi
ls -R "$OUT" | head -50
