#!/usr/bin/env bash
# Per-trial overhead of `--executor slurm` against the local executor, on the one-node
# cluster of tests/slurm-cluster.sh (docs/benchmarks.md, "Slurm executor").
#
#   bench/slurm/overhead.sh AORTA [RUNS] [CPUS]
#
# Two probe recipes whose command is `true`: 1 trial (submission to result: `aorta build` from
# start to exit, the array's one task included) and 100 trials (one array of 100 tasks). Each
# run starts from an empty store; the two executors alternate; medians of RUNS (default 5).
# The node claims CPUS CPUs (default 8): that many tasks run at once.
set -euo pipefail
aorta=$(realpath "$1")
runs=${2:-5}
cpus=${3:-8}
here="$(cd "$(dirname "$0")/../.." && pwd)"
work=$(mktemp -d)
trap '"$here/tests/slurm-cluster.sh" down "$work/cluster" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
eval "$("$here/tests/slurm-cluster.sh" up "$work/cluster" 0 "$cpus" | sed 's/^/export /')"
export PATH="$PATH_PREPEND:$PATH"
export AORTA_ENV_SNAPSHOT="$here/docs/examples/h200-env.json"
cd "$work"
touch .aorta-root
for n in 1 100; do
  printf 'schema_version: 1\nmode: probe\nticket: BENCH-%s\ntrials: %s\nmitigation_axis: [none]\ndiagnostic_axis: [none]\ndisable_detector_tiers: [tier3]\n' "$n" "$n" > "r$n.yaml"
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one() { # one EXECUTOR N: seconds for one build from an empty store
  rm -rf store probe_results
  local t0 t1
  t0=$(date +%s.%N)
  "$aorta" build "r$2.yaml" --store store --executor "$1" --jobs 2 -- true >/dev/null 2>&1
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
for n in 1 100; do
  : > "slurm-$n" ; : > "local-$n"
  for _ in $(seq "$runs"); do
    one slurm "$n" >> "slurm-$n"
    one local "$n" >> "local-$n"
  done
  s=$(median < "slurm-$n"); l=$(median < "local-$n")
  printf '%s trial(s) of true: slurm %.3f s (%s), local %.3f s (%s); per trial: slurm %.3f s, local %.4f s\n' \
    "$n" "$s" "$(sort -g "slurm-$n" | tr '\n' ' ' | sed 's/ $//')" "$l" "$(sort -g "local-$n" | tr '\n' ' ' | sed 's/ $//')" \
    "$(echo "$s / $n" | bc -l)" "$(echo "$l / $n" | bc -l)"
done
