#!/usr/bin/env bash
# On the GPU machine: aorta's torch workloads (training, inference, llm_determinism at AORTA's
# default size) next to the PyTorch eager baseline and AORTA 0.2.1's own llm_determinism.
# Writes one JSON file per run under $OUT (default ./torch-bench-out) and a summary.json.
#
# Needs, relative to the repository root:
#   $BIN (default .cache/device-bin): aorta-workload-{training,inference,llm_determinism}
#        (cargo build --release -p aorta-torch-workloads; copy them there; optionally `aorta`)
#   $PY  (default /opt/torch/.venv/bin/python3): a Python with torch; its torch/lib is libtorch
#   $AORTA_WHEEL (default: the first .cache/amd_aorta-0.2.1-*.whl), from
#        `pip download --no-deps -d .cache amd-aorta==0.2.1`; skipped when absent
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.cache/device-bin}
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-$PWD/torch-bench-out}
STEPS=${STEPS:-50}
mkdir -p "$OUT"
BIN=$(cd "$BIN" && pwd) || { echo "no $BIN: build and copy the workload binaries first" >&2; exit 2; }
T=${T:-240}   # seconds per run; the whole script fits in a 10-minute device call
TORCH_LIB="$("$PY" -c "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])")/lib"
export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AORTA_LIBTORCH="$TORCH_LIB"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true

# One protocol trial of one of our workloads: name, label, steps, config JSON.
ours() {
  local name=$1 label=$2 steps=$3 cfg=$4 dir="$OUT/rust-$2"
  mkdir -p "$dir"
  printf '{"protocol":1,"workload":"%s","cell":"%s","trial_index":0,"steps":%s,"config":%s,"trial_dir":"%s"}\n' \
    "$name" "$label" "$steps" "$cfg" "$dir" > "$dir/config.json"
  echo "== ours: $label"
  ( cd "$dir" && timeout "$T" "$BIN/aorta-workload-$name" run --config config.json --result result.json >stdout.log 2>stderr.log )
  echo "   exit $? -> $dir/result.json"
}
eager() {
  local label=$1; shift
  echo "== eager: $label"
  timeout "$T" "$PY" bench/torch/eager_baseline.py "$@" > "$OUT/eager-$label.json" 2> "$OUT/eager-$label.stderr" ; echo "   exit $?"
}

BIG='"hidden_size":2048,"num_layers":24,"num_heads":16,"ffn_size":5632,"vocab_size":32000'
SMALL='"hidden_size":512,"num_layers":4,"num_heads":8,"ffn_size":2048,"vocab_size":32000'

# Training: AORTA llm_determinism's default size, bf16, batch 1 x 512, and a small model.
ours training train-big "$STEPS" "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"batch_size\":1,\"seq_len\":512,\"warmup_steps\":5,\"model\":{\"kind\":\"transformer\",$BIG}}"
eager train-big training --hidden 2048 --layers 24 --heads 16 --ffn 5632 --seq 512 --batch 1 --steps "$STEPS" --warmup 5
eager train-big-fused training --fused --hidden 2048 --layers 24 --heads 16 --ffn 5632 --seq 512 --batch 1 --steps "$STEPS" --warmup 5
ours training train-small "$STEPS" "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"batch_size\":8,\"seq_len\":256,\"warmup_steps\":5,\"model\":{\"kind\":\"transformer\",$SMALL}}"
eager train-small training --hidden 512 --layers 4 --heads 8 --ffn 2048 --seq 256 --batch 8 --steps "$STEPS" --warmup 5
eager train-small-fused training --fused --hidden 512 --layers 4 --heads 8 --ffn 2048 --seq 256 --batch 8 --steps "$STEPS" --warmup 5
ours training train-moe "$STEPS" "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"batch_size\":8,\"seq_len\":256,\"warmup_steps\":5,\"model\":{\"kind\":\"moe_transformer\",\"num_experts\":4,$SMALL}}"

# Inference: offline batch with the KV cache, same model both sides; continuous batching (ours).
ours inference infer-offline 8 "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"warmup_steps\":1,\"request\":{\"batch_size\":8,\"prompt_len\":128,\"generate_tokens\":32},\"model\":{\"kind\":\"decoder_transformer\",$SMALL}}"
eager infer-offline inference --hidden 512 --layers 4 --heads 8 --ffn 2048 --batch 8 --prompt-len 128 --gen 32 --steps 8 --warmup 1
ours inference infer-offline-big 4 "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"warmup_steps\":1,\"request\":{\"batch_size\":8,\"prompt_len\":512,\"generate_tokens\":64},\"model\":{\"kind\":\"decoder_transformer\",$BIG}}"
eager infer-offline-big inference --hidden 2048 --layers 24 --heads 16 --ffn 5632 --batch 8 --prompt-len 512 --gen 64 --steps 4 --warmup 1
ours inference infer-continuous 64 "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"mode\":\"continuous_batch\",\"request\":{\"batch_size\":6,\"prompt_len\":64,\"generate_tokens\":32},\"serving\":{\"continuous_batch\":{\"max_active_requests\":4}},\"model\":{\"kind\":\"decoder_transformer\",$SMALL}}"

# llm_determinism at AORTA's defaults (24 layers, hidden 2048, seq 512, bf16), then the planted
# atomics without and with the deterministic switch (the first should diverge, the second not).
ours llm_determinism det-default 1 '{"device":"cuda"}'
ours llm_determinism det-moe 1 '{"device":"cuda","num_layers":4,"num_experts":4}'
ours llm_determinism det-planted 3 '{"device":"cuda","num_layers":4,"plant_nondeterminism":"index_add","deterministic":false,"dtype":"fp32"}'
ours llm_determinism det-planted-deterministic 3 '{"device":"cuda","num_layers":4,"plant_nondeterminism":"index_add","deterministic":true,"dtype":"fp32"}'
ours llm_determinism det-scatter 3 '{"device":"cuda","num_layers":4,"plant_nondeterminism":"scatter_add","deterministic":false,"dtype":"fp32"}'

# Through the engine, when the aorta binary was carried too.
if [ -x "$BIN/aorta" ]; then
  echo "== aorta run --workload training --trials 1 --steps $STEPS"
  "$BIN/aorta" run --workload training --trials 1 --steps "$STEPS" --results-dir "$OUT/aorta-run" > "$OUT/aorta-run.log" 2>&1; echo "   exit $?"
fi

# AORTA 0.2.1's own llm_determinism (pure-Python wheel on this machine's torch), one rank.
wheel=${AORTA_WHEEL:-$(ls .cache/amd_aorta-0.2.1-*.whl 2>/dev/null | head -1)}
if [ -n "$wheel" ] && [ -f "$wheel" ]; then
  echo "== AORTA 0.2.1 llm_determinism (python)"
  # Installed beside, not into, the torch venv: a venv made from a venv's python does not see
  # the parent venv's site-packages, so the package goes into a folder on PYTHONPATH instead.
  pkg="$(mktemp -d)/aorta-0.2.1"
  "$PY" -m pip install -q --no-index --no-deps --target "$pkg" "$wheel"
  PYTHONPATH="$pkg" RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29531 timeout "$T" "$PY" - > "$OUT/aorta-py-det-default.json" 2> "$OUT/aorta-py-det-default.stderr" <<'PY'
import dataclasses, json, time
from aorta.workloads.llm_determinism import LlmDeterminismWorkload
w = LlmDeterminismWorkload({})  # AORTA's defaults: 24 layers, hidden 2048, seq 512, bf16
t0 = time.perf_counter(); w.setup(); t1 = time.perf_counter()
try:
    r = w.run()
finally:
    t2 = time.perf_counter(); w.cleanup()
d = dataclasses.asdict(r)
d["setup_sec"], d["run_sec"] = t1 - t0, t2 - t1
print(json.dumps(d, default=str))
PY
  echo "   exit $?"
else
  echo "== AORTA 0.2.1 wheel not found (.cache/amd_aorta-0.2.1-*.whl): skipped"
fi

# Side by side: one line per run with the figures that matter.
"$PY" - "$OUT" > "$OUT/summary.json" <<'PY'
import glob, json, os, sys
out, rows = sys.argv[1], {}
for f in sorted(glob.glob(f"{out}/rust-*/result.json")):
    r = json.load(open(f)); m = r.get("metrics", {})
    rows[os.path.basename(os.path.dirname(f))] = {"passed": r.get("passed"), **{k: m.get(k) for k in (
        "step_time_p50", "step_time_p99", "tokens_per_sec", "mfu", "achieved_tflops", "prefill_latency_ms",
        "decode_latency_ms", "final_loss", "run_times_ms", "divergence_reasons", "deterministic", "sdpa_backend")}, "failures": r.get("failure_details", [])[:3]}
for f in sorted(glob.glob(f"{out}/eager-*.json")) + sorted(glob.glob(f"{out}/aorta-py-*.json")):
    try:
        r = json.load(open(f))
    except ValueError:
        r = {"error": "no JSON"}
    r.pop("step_times_ms", None)
    rows[os.path.basename(f)[:-5]] = r
print(json.dumps(rows, indent=1, default=str))
PY
echo "summary: $OUT/summary.json"
