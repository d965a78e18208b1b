#!/usr/bin/env bash
# `aorta agent` end to end: trials used until it converges, over seeds, on a planted flaky command.
#
#   bench/agent/converge.sh AORTA_BIN [SEEDS] [RATE]      (defaults: 10 seeds, rate 0.4)
#
# The command fails with probability RATE unless CUDA_LAUNCH_BLOCKING=1 (the one real fix),
# with an illegal-memory-access message (so the failure classifies as illegal_mem). Whether
# run r of a cell fails is md5(seed, the cell's CUDA_*/HIP_*/HSA_*/NCCL_*/TORCH_* env, r):
# the same seed gives the same outcomes to any binary, so two agents are compared trial for
# trial. Runs the real agent (fake proposer, every registered mitigation as a candidate, -j1)
# and prints, per seed, the outcome, the winner and "Trials used" from agent_report.md, then
# the sorted counts, their median and total. Deterministic; CPU only.
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
seeds="${2:-10}" rate="${3:-0.4}"
work="$(mktemp -d "${TMPDIR:-/tmp}/aorta-agent-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat > "$work/flaky.sh" <<'SH'
set -eu
[ "${CUDA_LAUNCH_BLOCKING:-0}" = 1 ] && { echo ok; exit 0; }
cell="$(env | grep -E '^(CUDA|HIP|HSA|NCCL|TORCH|PYTORCH|AMD|ROC|MIOPEN|GPU)_' | sort | tr '\n' ' ')"
id="$(printf '%s' "$cell" | md5sum | cut -c1-16)"
f="$COUNTERS/$id"
n=$(cat "$f" 2>/dev/null || echo 0)
echo $((n + 1)) > "$f"
h=$(printf '%s:%s:%s' "$SEED" "$cell" "$n" | md5sum | cut -c1-8)
if [ $((16#$h % 10000)) -lt "$RATE_BP" ]; then
  echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2
  exit 1
fi
echo ok
SH
rate_bp=$(python3 -c "print(round($rate * 10000))")
counts=()
for seed in $(seq 1 "$seeds"); do
  d="$work/seed-$seed"
  mkdir -p "$d/counters"
  (cd "$d" && SEED=$seed RATE_BP=$rate_bp COUNTERS="$d/counters" \
    "$bin" agent --output out --ticket AGENT-BENCH -j1 --json -- bash "$work/flaky.sh" \
    > agent.json 2> agent.err) || true
  report="$(find "$d/out" -name agent_report.md | head -n 1)"
  used="$(grep -m1 -o 'Trials used[^0-9]*[0-9,]*' "$report" | grep -o '[0-9,]*$' | tr -d ,)"
  outcome="$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("outcome"), j.get("winner"))' "$d/agent.json")"
  echo "seed $seed: $outcome, trials used $used"
  counts+=("$used")
done
printf '%s\n' "${counts[@]}" | sort -n | python3 -c '
import sys, statistics
xs = [int(l) for l in sys.stdin if l.strip()]
print("sorted:", " ".join(map(str, xs)), "| median", statistics.median(xs), "| total", sum(xs))'
