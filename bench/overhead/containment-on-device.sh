#!/usr/bin/env bash
# On the GPU machine: which containment aorta gets there, the kill -9 check of
# engine/cli/tests/containment.rs by hand (five kinds of escapee, aorta killed mid-trial), and
# parts.py with containment on and off beside an earlier build.
#   bench/overhead/containment-on-device.sh AORTA [EARLIER_AORTA]
set -uo pipefail
aorta=$(realpath "$1"); earlier=${2:+$(realpath "$2")}
here="$(cd "$(dirname "$0")/../.." && pwd)"
"$aorta" env containment
w=$(mktemp -d); cd "$w"; touch .aorta-root
printf 'schema_version: 1\nmode: probe\nticket: C\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n' > r.yaml
"$aorta" build r.yaml --store store -- bash "$here/engine/cli/tests/fixtures/escape.sh" 3001 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do [ "$(pgrep -fc 'sleep 3001\.')" -ge 5 ] && break; sleep 0.1; done
echo "escapees before kill -9: $(pgrep -fc 'sleep 3001\.')"
kill -9 "$pid"; sleep 1
echo "survivors 1 s after kill -9 of aorta: $(pgrep -fc 'sleep 3001\.')"
pkill -f 'sleep 3001\.' || true
cd "$here"
python3 bench/overhead/parts.py "$aorta" ${earlier:+"$earlier"} --runs "${RUNS:-9}" --work /dev/shm
