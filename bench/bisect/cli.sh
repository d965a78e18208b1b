#!/usr/bin/env bash
# The three planted scenarios of engine/cli/tests/bisect.rs through the real CLI, each against
# the naive search a user would run by hand with aorta (fixed trials per cell, no sequential
# test): wall time (median of RUNS, each on a fresh store), configurations run, trials executed.
#
#   bench/bisect/cli.sh [RUNS]        # default 3; needs target/debug/aorta (cargo build -p aorta-cli)
#
#   bisect env   40 differences, fails at p=1.0 / 0.3 when A=1 and B=2
#     naive: one at a time, each difference alone on GOOD: one probe recipe, 40 cells + none,
#            N trials each (N=8 at p=1.0, 32 at p=0.3: what one pass call needs)
#   bisect range 64 versions, first bad 37, flaky 0.4
#     naive: linear scan, point 1, 2, … until a point fails, 8 trials each (a 0.4 failure shows
#            in 8 with 98%), one build per point
#   reduce       6 mitigations, m2 and m5 needed, unmitigated rate 0.5
#     naive: leave-one-out, the stack without each one, 32 trials each, one recipe
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RUNS=${1:-3}
AORTA=$ROOT/target/debug/aorta
F=$ROOT/engine/cli/tests/fixtures/bisect
export AORTA_ENV_SNAPSHOT=$ROOT/docs/examples/h200-env.json NO_COLOR=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
touch "$W/.aorta-root"
cd "$W"
exec 2>>"$W/stderr.log"   # the builds' notes; the table goes to stdout

fresh() { rm -rf store out state; mkdir state; export BISECT_STATE=$W/state; }
ran() { wc -l < state/ran; }
# time_of CMD…: seconds of wall time, to stderr's last line
t0() { date +%s.%N; }
dt() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(date +%s.%N)"; }
median() { python3 -c "import sys, statistics; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }

report() { # name times… -- configs trials answer
  local name=$1; shift; local times=(); while [ "$1" != -- ]; do times+=("$1"); shift; done; shift
  printf '| %s | %s s (%s) | %s | %s | %s |\n' "$name" "$(median "${times[@]}")" "${times[*]}" "$1" "$2" "$3"
}

echo "| search | wall time, median (each run) | configurations | trials executed | answer |"
echo "|---|---|---|---|---|"

# --- bisect env and its naive one-at-a-time sweep
mkdir -p v
python3 - "$F" <<'PY'
import json, sys, re
f = sys.argv[1]
bad = {}
for line in open(f + "/bad.env"):
    line = line.strip()
    if not line or line.startswith("#"): continue
    line = line.removeprefix("export ")
    k, v = line.split("=", 1)
    bad[k] = v.strip("'\"")
good = dict(l.strip().removeprefix("export ").split("=", 1) for l in open(f + "/good.env") if "=" in l and not l.startswith("#"))
diffs = sorted(k for k in bad if good.get(k) != bad[k])
json.dump({"version": 1, "mitigations": {f"d_{k}": {k: bad[k]} for k in diffs}}, open("one.json", "w"))
for n in (8, 32):
    open(f"one{n}.yaml", "w").write(
        f"schema_version: 1\nmode: probe\ntrials: {n}\nmitigation_axis: [none, {', '.join('d_' + k for k in diffs)}]\ndiagnostic_axis: [none]\n")
PY
for p in 1000 300; do
  n=$([ $p = 1000 ] && echo 8 || echo 32)
  times=(); for _ in $(seq "$RUNS"); do fresh; s=$(t0)
    "$AORTA" bisect env --good "$F/good.env" --bad "$F/bad.env" --store store --output out -j 2 --json -- "$F/planted.sh" env $p 1 > env.json
    times+=("$(dt "$s")"); done
  read -r probes result < <(python3 -c "import json; d=json.load(open('env.json')); print(len({p['cell'] for p in d['probes']}), ' '.join(d['result']))")
  report "bisect env, p=$p/1000" "${times[@]}" -- "$probes" "$(ran)" "{$result}"
  times=(); for _ in $(seq "$RUNS"); do fresh; s=$(t0)
    BISECT_STATE=$W/state "$AORTA" build "one$n.yaml" --mitigations-file one.json --store store --output out -j 2 --json -- "$F/planted.sh" env $p 1 > one.out || true
    times+=("$(dt "$s")"); done
  found=$(python3 -c "import json; d=json.loads(open('one.out').readline()); print(' '.join(c['name'] for c in d['cells'] if c['passed'] < c['trials']) or 'nothing')")
  report "one at a time, $n trials, p=$p/1000" "${times[@]}" -- 41 "$(ran)" "$found"
done

# --- bisect range and its naive linear scan
: > list.txt
for i in $(seq 0 63); do echo "$i" > "v/v$i"; echo "VERSION_FILE=$W/v/v$i" >> list.txt; done
times=(); for _ in $(seq "$RUNS"); do fresh; s=$(t0)
  "$AORTA" bisect range --list list.txt --store store --output out -j 2 --json -- "$F/planted.sh" range 400 1 > range.json
  times+=("$(dt "$s")"); done
read -r probes result < <(python3 -c "import json; d=json.load(open('range.json')); print(d['search_probes'], d['answer'].split(' (')[0].split('is ')[-1])")
report "bisect range, 0.4" "${times[@]}" -- "$probes" "$(ran)" "$result"
times=(); for _ in $(seq "$RUNS"); do fresh; s=$(t0)
  for i in $(seq 1 63); do
    printf '{"version": 1, "mitigations": {"v%s": {"VERSION_FILE": "%s/v/v%s"}}}\n' "$i" "$W" "$i" > point.json
    printf 'schema_version: 1\nmode: probe\ntrials: 8\nmitigation_axis: [v%s]\ndiagnostic_axis: [none]\n' "$i" > point.yaml
    "$AORTA" build point.yaml --mitigations-file point.json --store store --output out -j 2 --json -- "$F/planted.sh" range 400 1 > point.out || true
    python3 -c "import json,sys; d=json.loads(open('point.out').readline()); sys.exit(0 if d['cells'][0]['passed'] < d['cells'][0]['trials'] else 1)" && break
  done
  times+=("$(dt "$s")"); done
report "linear scan, 8 trials, 0.4" "${times[@]}" -- "$i" "$(ran)" "#$i"

# --- reduce and its naive leave-one-out
times=(); for _ in $(seq "$RUNS"); do fresh; s=$(t0)
  "$AORTA" reduce --mitigations m1,m2,m3,m4,m5,m6 --mitigations-file "$F/mitigations.json" --store store --output out -j 2 --json -- "$F/planted.sh" reduce 500 1 > reduce.json
  times+=("$(dt "$s")"); done
read -r probes result < <(python3 -c "import json; d=json.load(open('reduce.json')); print(len({p['cell'] for p in d['probes']}), ' '.join(d['result']))")
report "reduce, 0.5" "${times[@]}" -- "$probes" "$(ran)" "[$result]"
python3 - <<'PY'
import json
m = {f"lo{i}": {f"M{j}": "1" for j in range(1, 7) if j != i} for i in range(1, 7)}
json.dump({"version": 1, "mitigations": m}, open("lo.json", "w"))
open("lo.yaml", "w").write("schema_version: 1\nmode: probe\ntrials: 32\nmitigation_axis: [" + ", ".join(m) + "]\ndiagnostic_axis: [none]\n")
PY
times=(); for _ in $(seq "$RUNS"); do fresh; s=$(t0)
  "$AORTA" build lo.yaml --mitigations-file lo.json --store store --output out -j 2 --json -- "$F/planted.sh" reduce 500 1 > lo.out || true
  times+=("$(dt "$s")"); done
needed=$(python3 -c "import json; d=json.loads(open('lo.out').readline()); print(' '.join('m' + c['name'][2] for c in d['cells'] if c['passed'] < c['trials']))")
report "leave-one-out, 32 trials, 0.5" "${times[@]}" -- 6 "$(ran)" "[$needed]"
