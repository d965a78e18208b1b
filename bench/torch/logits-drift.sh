#!/usr/bin/env bash
# On the GPU machine: where does the 24 x 2048 offline inference's logits checksum drift between
# steps come from? The same run by default, with only deterministic cuBLAS
# (CUBLAS_WORKSPACE_CONFIG), and with the workload's `deterministic: true` (deterministic
# algorithms + math SDPA). Prints one line per variant: passed, checksum failures, tokens/s.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=$(cd "${BIN:-.cache/device-bin}" && pwd)
PY=${PY:-/opt/torch/.venv/bin/python3}
OUT=${OUT:-$PWD/logits-drift-out}
mkdir -p "$OUT"
TORCH_LIB="$("$PY" -c "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])")/lib"
export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BIG='"hidden_size":2048,"num_layers":24,"num_heads":16,"ffn_size":5632,"vocab_size":32000'
run() {
  local label=$1 cfg=$2; shift 2
  local dir="$OUT/$label"; mkdir -p "$dir"
  printf '{"protocol":1,"workload":"inference","cell":"%s","trial_index":0,"steps":6,"config":%s,"trial_dir":"%s"}\n' "$label" "$cfg" "$dir" > "$dir/config.json"
  ( cd "$dir" && env "$@" timeout 240 "$BIN/aorta-workload-inference" run --config config.json --result result.json >stdout.log 2>stderr.log )
  "$PY" - "$dir/result.json" "$label" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"{sys.argv[2]}: no result ({e})"); sys.exit()
m = r.get("metrics", {})
bad = [f for f in r.get("failure_details", []) if f.get("type") == "logits_checksum_mismatch"]
print(f"{sys.argv[2]}: passed={r.get('passed')} mismatched_steps={[f.get('step') for f in bad]} tokens_per_sec={m.get('tokens_per_sec') or 0:.0f} checksum={m.get('logits_checksum')} error={r.get('error') or r.get('setup_error')}")
PY
}
base="\"device\":\"cuda\",\"dtype\":\"bf16\",\"warmup_steps\":1,\"request\":{\"batch_size\":8,\"prompt_len\":512,\"generate_tokens\":64},\"model\":{\"kind\":\"decoder_transformer\",$BIG}"
run default "{$base}" X=1
run cublas-workspace "{$base}" CUBLAS_WORKSPACE_CONFIG=:4096:8
run deterministic "{$base,\"deterministic\":true}" X=1
for b in math flash efficient cudnn; do
  run "attention-$b" "{$base,\"attention_backend\":\"$b\"}" X=1
done
run two-layers "{\"device\":\"cuda\",\"dtype\":\"bf16\",\"warmup_steps\":1,\"request\":{\"batch_size\":8,\"prompt_len\":512,\"generate_tokens\":64},\"model\":{\"kind\":\"decoder_transformer\",\"hidden_size\":2048,\"num_layers\":2,\"num_heads\":16,\"ffn_size\":5632,\"vocab_size\":32000}}" X=1
