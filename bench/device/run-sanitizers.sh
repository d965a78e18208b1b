#!/usr/bin/env bash
# On the GPU machine, from the repository root, with the release aorta in .carry/: each
# planted program of bench/device/cu/ under every sanitizer cell, through aorta sweep run.
# Leaves $OUT/sanitizers.tgz (matrix.md and result.json of each run) and $OUT/summary.txt.
set -u
R=$PWD; A=$R/.carry/aorta
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
W=/tmp/san; rm -rf $W; mkdir -p $W/bin; cd $W
for k in oob race init sync clean; do $NVCC -lineinfo -arch=sm_90 -o bin/$k $R/bench/device/cu/$k.cu; done
for k in oob race init sync clean; do
  /usr/bin/time -f "$k sweep %e s" $A sweep run --recipe $R/bench/device/sanitizers.yaml --ticket SAN-$k --output $W/out -- $W/bin/$k > $W/$k.txt 2>&1
  tail -1 $W/$k.txt
done 2>&1 | tee $OUT/summary.txt
for k in oob race init sync clean; do
  echo "=== $k"; grep -A12 '^## Reproduction Summary' $W/out/SAN-$k/matrix.md; grep -A8 -i 'failure hints' $W/out/SAN-$k/matrix.md
done >> $OUT/summary.txt 2>&1
find $W/out -name result.json | while read f; do python3 - "$f" <<'PY'
import json,sys
r=json.load(open(sys.argv[1]))
s=r.get("sanitizer") or {}
print(r["cell_name"], r.get("verdict"), round(r.get("walltime_sec",0),3), s.get("errors"), (s.get("hazards") or [{}])[0].get("location"), sys.argv[1].split("/out/")[1].split("/")[0])
PY
done | sort -k6 >> $OUT/summary.txt
# The same sweep again: every trial a store hit.
$A sweep run --recipe $R/bench/device/sanitizers.yaml --ticket SAN-oob --output $W/out -- $W/bin/oob 2>&1 | tail -3 >> $OUT/summary.txt
tar czf $OUT/sanitizers.tgz -C $W out *.txt
