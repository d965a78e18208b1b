#!/usr/bin/env bash
# One device call: gpu_smoke through aorta (#41), sanitizer/ncu fixtures (#39), nvidia-smi fixtures (#38).
set -u
R=$PWD; C=$R/.carry
F=$OUT/fx; mkdir -p $F
export PATH=$C:$PATH
nvidia-smi -L > $F/nvidia-smi-L.txt 2>&1
echo "== gpu_smoke run" ; cd /tmp && rm -rf smoke && mkdir smoke && cd smoke
( time $C/aorta run --workload gpu_smoke --trials 3 ) > $F/smoke-run.txt 2>&1; echo "rc=$?" >> $F/smoke-run.txt
( time $C/aorta sweep run --recipe $R/recipes/gpu-smoke.yaml ) > $F/smoke-sweep.txt 2>&1; echo "rc=$?" >> $F/smoke-sweep.txt
( time $C/aorta sweep run --recipe $R/recipes/gpu-smoke.yaml ) > $F/smoke-sweep2.txt 2>&1; echo "rc=$?" >> $F/smoke-sweep2.txt
find . -name matrix.md | head -3 | xargs -I{} sh -c 'echo "### {}"; cat {}' > $F/smoke-matrix.md
cd $R
echo "== tools"; { which nvcc compute-sanitizer ncu nsys; nvcc --version; compute-sanitizer --version; ncu --version; cat /proc/driver/nvidia/version; } > $F/tools.txt 2>&1
S=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
mkdir -p /tmp/cu && cd /tmp/cu
for k in oob race init sync clean; do $NVCC -lineinfo -arch=sm_90 -o $k $R/bench/device/cu/$k.cu >> $F/nvcc.txt 2>&1; done
for k in oob race init sync clean; do /usr/bin/time -f "%e s" ./$k > $F/plain-$k.txt 2>&1; echo "rc=$?" >> $F/plain-$k.txt; done
for tool in memcheck racecheck initcheck synccheck; do
  for k in oob race init sync clean; do
    /usr/bin/time -f "%e s" $S --tool $tool ./$k > $F/cs13-$tool-$k.txt 2>&1; echo "rc=$?" >> $F/cs13-$tool-$k.txt
  done
done
$S --tool memcheck --xml --save $F/cs13-memcheck-oob.xml ./oob > /dev/null 2>&1
$S --tool memcheck --error-exitcode 7 ./oob > $F/cs13-memcheck-oob-exitcode.txt 2>&1; echo "rc=$?" >> $F/cs13-memcheck-oob-exitcode.txt
$S --tool racecheck --racecheck-report hazard ./race > $F/cs13-racecheck-race-hazard.txt 2>&1; echo "rc=$?" >> $F/cs13-racecheck-race-hazard.txt
[ -n "$NCU" ] && { $NCU ./clean > $F/ncu-clean.txt 2>&1; $NCU --csv --page raw --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size ./clean > $F/ncu-clean-raw.csv 2>&1; $NCU --csv ./clean > $F/ncu-clean.csv 2>&1; }
cd $C/..
echo "== nvidia-smi"; nvidia-smi -q > $F/nvidia-smi-q.txt 2>&1; nvidia-smi -q -x > $F/nvidia-smi-q.xml 2>&1
nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,PERFORMANCE,CLOCK,PCIE > $F/nvidia-smi-q-d.txt 2>&1
{ ls -la /dev/kmsg; timeout 2 head -c 4000 /dev/kmsg | tail -5; dmesg 2>&1 | tail -5; } > $F/kmsg.txt 2>&1
for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor 2>/dev/null)" = 0x10de ] && grep -H . $d/current_link_speed $d/current_link_width $d/max_link_speed $d/max_link_width $d/class 2>/dev/null; done > $F/pci.txt
ls /usr/lib/x86_64-linux-gnu/libnvidia-ml* /usr/local/nvidia/lib64/libnvidia-ml* >> $F/tools.txt 2>&1
cd $OUT && tar czf fixtures.tgz fx && rm -rf fx && ls -la
