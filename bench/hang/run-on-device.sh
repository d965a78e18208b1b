#!/usr/bin/env bash
# The spinning CUDA hang on the GPU machine: bench/hang/spin.py through `aorta sweep run
# --kill-on-hang`, with py-spy on PATH. Prints the verdict, the detectors, the hint matrix.md
# quotes, the hang's timing and the head of the kept stacks.
# Usage: AORTA=path/to/aorta PY=python-with-torch PY_SPY_DIR=dir bench/hang/run-on-device.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}; mkdir -p "$out"
cd "$(dirname "$0")"
export PATH="$PY_SPY_DIR:$PATH" AORTA_STORE=/tmp/aorta-spin-store
rm -rf /tmp/aorta-spin-out "$AORTA_STORE"
t0=$(date +%s.%N)
"$AORTA" sweep run --recipe spin.yaml --output /tmp/aorta-spin-out --kill-on-hang -v -- "$PY" spin.py
echo "aorta exit $? after $(awk "BEGIN{print $(date +%s.%N) - $t0}") s wall"
t=/tmp/aorta-spin-out/SPIN-HANG/none-none/trial_0
python3 - "$t/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("verdict", r["verdict"], "exit", r["exit_code"], "walltime", r["walltime_sec"])
print("failure detectors", r["failure_detectors_fired"])
for d in r["result"]["failure_details"]:
    print("hint:", d.get("hint"))
PY
sed -n '/Failure hints/,$p' /tmp/aorta-spin-out/SPIN-HANG/matrix.md | head -8
head -30 "$t/hang-stacks.txt"
cp "$t/result.json" "$out/spin-result.json"; cp "$t/hang-stacks.txt" "$out/spin-hang-stacks.txt"
cp /tmp/aorta-spin-out/SPIN-HANG/matrix.md "$out/spin-matrix.md"
