#!/usr/bin/env bash
# `aorta doctor` on the GPU machine (issue #38): times --level quick and --level medium (3 runs
# each), keeps every --json report, the workload's own logs, and nvidia-smi's reports beside them
# for the field-by-field comparison; then shows the injected GEMM and memory-test mismatches
# being caught on real hardware, and a build refused / marked by --doctor.
#
# Run from the repository root with the release binaries in .carry/:
#   cargo build --release -p aorta-cli -p aorta-hw-queue
#   mkdir -p .carry && cp target/release/aorta target/release/aorta-workload-gpu_doctor .carry/
#   OUT=/tmp/doctor-out bash bench/doctor/run-on-gpu.sh
# ($OUT defaults to ./doctor-out.) docs/benchmarks.md's "aorta doctor" section is filled from
# $OUT/summary.txt. The field-by-field comparison of this machine's `nvidia-smi -q` with its
# `-q -x`, anywhere with cargo afterwards:
#   AORTA_DOCTOR_COMPARE_DIR=$OUT cargo test -p aorta-doctor the_text_report_agrees
set -u
R=$PWD
C=$R/.carry
OUT=${OUT:-$R/doctor-out}
mkdir -p "$OUT"
export PATH="$C:$PATH" AORTA_WORKLOAD_PATH="$C" NO_COLOR=1
# cuBLAS for the GEMM (doctor also adds the toolkit's lib64 itself; this covers wheels too).
PY=${PY:-python3}; . "$R/bench/cuda-libs.sh"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

{
  echo "== machine"; nvidia-smi -L; cat /proc/driver/nvidia/version 2>/dev/null | head -1
  echo "== binaries"; ls -la "$C"
} > "$OUT/machine.txt" 2>&1

# The passive sources, as doctor reads them and as people read them.
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
nvidia-smi -q -x > "$OUT/nvidia-smi-q.xml" 2>&1
nvidia-smi -q -x -d PERFORMANCE > "$OUT/nvidia-smi-q-x-d-performance.xml" 2>&1
nvidia-smi nvlink --status > "$OUT/nvidia-smi-nvlink-status.txt" 2>&1
( time nvidia-smi -q -x > /dev/null ) > "$OUT/nvidia-smi-q-x-time.txt" 2>&1

: > "$OUT/timings.txt"
for level in quick medium; do
  for i in 1 2 3; do
    work="$OUT/work-$level-$i"; [ "$level" = quick ] || mkdir -p "$work"
    t0=$(now)
    AORTA_DOCTOR_WORK_DIR="$work" "$C/aorta" doctor --level "$level" --json \
      > "$OUT/doctor-$level-$i.json" 2> "$OUT/doctor-$level-$i.stderr"
    rc=$?
    t1=$(now)
    echo "$level run $i: exit $rc, $(secs "$t0" "$t1") s wall" | tee -a "$OUT/timings.txt"
  done
done
"$C/aorta" doctor --level quick > "$OUT/doctor-quick.txt" 2>&1; echo "exit $?" >> "$OUT/doctor-quick.txt"
AORTA_DOCTOR_WORK_DIR="$OUT/work-medium-text" "$C/aorta" doctor --level medium > "$OUT/doctor-medium.txt" 2>&1
echo "exit $?" >> "$OUT/doctor-medium.txt"

# Injected mismatches through the real workload: each must report exactly one.
for knob in inject_gemm_mismatch inject_memtest_mismatch; do
  d="$OUT/inject-$knob"; mkdir -p "$d"
  printf '{"protocol":1,"workload":"gpu_doctor","config":{"device":0,"%s":true,"gemm_iters":10,"memtest_fraction":0.1},"trial_dir":"%s"}\n' "$knob" "$d" > "$d/CONFIG.json"
  ( cd "$d" && CUDA_DEVICE_ORDER=PCI_BUS_ID "$C/aorta-workload-gpu_doctor" run --config CONFIG.json --result RESULT.json > stdout.log 2> stderr.log; echo "exit $?" >> stderr.log )
done

# The preflight: a build refused by a (stand-in) failing node, then the real node passing.
ws=$(mktemp -d); cd "$ws"
printf 'schema_version: 1\nmode: probe\nticket: DOCTOR\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n' > r.yaml
printf '#!/bin/sh\ncase "$1" in nvlink) exit 0;; esac\ncat %s\n' "$R/tests/fixtures/gpu/doctor/nvidia-smi-q-gen3x8.xml" > fake-smi; chmod +x fake-smi
AORTA_DOCTOR_NVIDIA_SMI=$ws/fake-smi "$C/aorta" build r.yaml --store s --output o --doctor quick -- true > "$OUT/preflight-refused.txt" 2>&1
echo "exit $?" >> "$OUT/preflight-refused.txt"
"$C/aorta" build r.yaml --store s --output o --doctor quick -- true > "$OUT/preflight-real.txt" 2>&1
echo "exit $?" >> "$OUT/preflight-real.txt"
find o -name doctor.json -exec cp {} "$OUT/preflight-doctor.json" \;
cd "$R"; rm -rf "$ws"

# One line per figure, for docs/benchmarks.md.
{
  cat "$OUT/timings.txt"
  for f in "$OUT"/doctor-medium-*.json; do
    python3 - "$f" <<'PY' 2>/dev/null || echo "$f: (python3 missing or unreadable)"
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[1].rsplit("/", 1)[-1], r["status"], "%.1f s" % r["elapsed_sec"])
for c in r["checks"]:
    if c["status"] != "pass" or c["id"].split(".")[0] in ("gemm", "copy", "memtest"):
        print("  %-5s %-28s %s" % (c["status"], c["id"], c.get("measured") or c.get("reason") or ""))
PY
  done
  for knob in inject_gemm_mismatch inject_memtest_mismatch; do
    echo "$knob: $(grep -o '"mismatches":[0-9]*' "$OUT/inject-$knob/RESULT.json" | tr '\n' ' ')"
  done
  tail -3 "$OUT/preflight-refused.txt"; tail -2 "$OUT/preflight-real.txt"
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
