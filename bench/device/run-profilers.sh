#!/usr/bin/env bash
# On the GPU machine, from the repository root, with the release aorta in .carry/: the ncu and
# torch_profiler collectors against the same cells without a collector. Leaves $OUT/profilers.tgz
# (each run directory) and $OUT/profilers.txt.
set -u
R=$PWD; A=$R/.carry/aorta
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
PY=/opt/torch/.venv/bin/python3; [ -x $PY ] || PY=python3
W=/tmp/prof; rm -rf $W; mkdir -p $W/bin; cd $W
$NVCC -lineinfo -arch=sm_90 -o bin/clean $R/bench/device/cu/clean.cu
{
for r in plain:profile-plain ncu:profile; do n=${r%%:*}; f=${r#*:}
  /usr/bin/time -f "clean $n sweep %e s" $A sweep run --recipe $R/bench/device/$f.yaml --ticket CLEAN-$n --output $W/out -- $W/bin/clean > $W/clean-$n.txt 2>&1; tail -1 $W/clean-$n.txt
done
for r in plain:profile-plain torch:profile-torch; do n=${r%%:*}; f=${r#*:}
  /usr/bin/time -f "torch $n sweep %e s" $A sweep run --recipe $R/bench/device/$f.yaml --ticket TORCH-$n --output $W/out -- $PY $R/bench/device/torch_step.py > $W/torch-$n.txt 2>&1; tail -1 $W/torch-$n.txt
done
for d in CLEAN-ncu TORCH-torch; do echo "=== $d"; sed -n '/^## Reproduction Summary/,/^## Notes/p' $W/out/$d/matrix.md; done
for d in CLEAN-plain CLEAN-ncu TORCH-plain TORCH-torch; do
  for c in none-none cuda_launch_blocking-none; do
    f=$(find $W/out/$d/$c -name result.json | head -1)
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], r['verdict'], round(r['walltime_sec'],3), [ (p['tool'], len(p['kernels']), p.get('note')) for p in r.get('profiles',[])])" $f $d $c
  done
done
} > $OUT/profilers.txt 2>&1
cd $W && tar czf $OUT/profilers.tgz out *.txt
# The race workload (a libtorch executable; its libtorch from the GPU machine's torch) under ncu.
TORCH_LIB=$($PY -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))' 2>/dev/null)
cd $W && AORTA_LIBTORCH=$TORCH_LIB /usr/bin/time -f "race ncu sweep %e s" $A sweep run --recipe $R/bench/device/race-ncu.yaml --output $W/race > $W/race.txt 2>&1
{ tail -3 $W/race.txt; sed -n '/^## Reproduction Summary/,/^## Notes/p' $(find $W/race -name matrix.md | head -1); } >> $OUT/profilers.txt 2>&1
tar czf $OUT/profilers.tgz -C $W out race *.txt
