#!/usr/bin/env bash
# AORTA_TIMING phases of one build of 200 trials and of 1 trial (tier 3 off, empty store each),
# for each binary given, three times, interleaved: where a slower build spends the time.
#   bench/overhead/phases-on-device.sh AORTA...
set -uo pipefail
bins=(); for b in "$@"; do bins+=("$(realpath "$b")"); done
w=$(mktemp -d -p /dev/shm); cd "$w"; touch .aorta-root
for n in 1 200; do
  printf 'schema_version: 1\nmode: probe\nticket: P%s\ntrials: %s\nmitigation_axis: [none]\ndiagnostic_axis: [none]\ndisable_detector_tiers: [tier3]\n' "$n" "$n" > "r$n.yaml"
done
for i in 1 2 3; do
  for n in 200 1; do
    for b in "${bins[@]}"; do
      rm -rf st o
      s=$(date +%s%N)
      t=$(AORTA_TIMING=1 AORTA_STORE=st "$b" sweep run --recipe "r$n.yaml" --output o -- true 2>&1 | grep 'timing:' | sed 's/aorta timing: //; s/ (recipe, environment, keys, DAG)//; s/ (lookups + execution)//' | grep -v 'artifacts: [0-9]* rendered' | tr '\n' ';')
      e=$(date +%s%N)
      echo "$(basename "$b") n=$n wall=$(( (e - s) / 1000000 )) ms: $t"
    done
  done
done
