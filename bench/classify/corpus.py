#!/usr/bin/env python3
"""Recall and false fires of aorta's and AORTA 0.2.1's log classifiers over the log corpus.

Usage (from the repository root; docs/benchmarks.md has the full recipe):

    cargo build --release -p aorta-classify --example classify_logs
    python3 -m venv .cache/aorta-0.2.1 && .cache/aorta-0.2.1/bin/pip install amd-aorta==0.2.1
    python3 bench/classify/corpus.py target/release/examples/classify_logs .cache/aorta-0.2.1/bin/python

The corpus is engine/classify/tests/corpus: MANIFEST.tsv lists, per log, the Tier-4 detectors
that must fire (every other one must not). AORTA's classifier is its own
`aorta.probe.classifier.tier4_patterns.scan` over the log text as AORTA builds it (stdout, "\\n",
empty stderr, first 10 MiB); aorta's is `classify` with the log as stdout (classify_logs).

Printed, as a Markdown table:
- expected firings found: (log, detector) pairs of the manifest that fired, over all pairs;
  for AORTA also over the pairs whose detector AORTA has (its seven ids);
- failure logs flagged: failure logs on which at least one Tier-4 detector fired;
- false fires: (log, detector) firings the manifest does not list; clean logs with any firing.
Exit status 1 if aorta misses an expected firing or fires a false one (the corpus test's rule).
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "engine/classify/tests/corpus"

# Runs inside AORTA's venv: prints {file: [ids]} for the files given on stdin (one per line).
AORTA_SCAN = r"""
import json, sys
from aorta.probe.classifier import tier4_patterns
from aorta.probe.sandbox import MAX_LOG_BYTES
out = {}
for path in sys.stdin.read().split("\n"):
    if not path:
        continue
    data = open(path, "rb").read()[:MAX_LOG_BYTES]
    text = data.decode("utf-8", errors="replace") + "\n"
    out[path] = tier4_patterns.scan(text)
print(json.dumps({"ids": list(tier4_patterns.ALL_DETECTOR_IDS), "fired": out}))
"""


def manifest():
    rows = []
    for line in (CORPUS / "MANIFEST.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, ids, _shape = line.split("\t")
        want = set() if ids == "-" else {f"tier4:{i}" for i in ids.split(",")}
        rows.append((name, want))
    return rows


def run_aorta(binary, files):
    out = subprocess.run([binary, *map(str, files)], capture_output=True, text=True, check=True).stdout
    return {Path(r["file"]).name: set(r["fired"]) for r in map(json.loads, out.splitlines())}


def run_aorta_py(python, files):
    out = subprocess.run(
        [python, "-c", AORTA_SCAN], input="\n".join(map(str, files)), capture_output=True, text=True, check=True
    ).stdout
    res = json.loads(out)
    return set(res["ids"]), {Path(f).name: set(ids) for f, ids in res["fired"].items()}


def score(rows, fired, only_ids=None):
    pairs = [(name, i) for name, want in rows for i in want if only_ids is None or i in only_ids]
    found = sum(1 for name, i in pairs if i in fired[name])
    failing = [name for name, want in rows if want]
    flagged = sum(1 for name in failing if fired[name])
    false = sorted((name, i) for name, want in rows for i in fired[name] - want)
    clean = [name for name, want in rows if not want]
    clean_fired = sum(1 for name in clean if fired[name])
    return {
        "found": found,
        "pairs": len(pairs),
        "flagged": flagged,
        "failing": len(failing),
        "false": false,
        "clean_fired": clean_fired,
        "clean": len(clean),
    }


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, python = sys.argv[1], sys.argv[2]
    rows = manifest()
    files = [CORPUS / name for name, _ in rows]
    ours = run_aorta(binary, files)
    aorta_ids, theirs = run_aorta_py(python, files)
    a, b = score(rows, ours), score(rows, theirs)
    b_own = score(rows, theirs, only_ids=aorta_ids)
    pct = lambda n, d: f"{n}/{d} ({100 * n / d:.0f}%)" if d else "0/0"
    print(f"corpus: {len(rows)} logs, {a['failing']} failure logs, {a['clean']} clean logs\n")
    print("| measure | aorta (library v3) | AORTA 0.2.1 |")
    print("|---|---|---|")
    print(f"| expected firings found | {pct(a['found'], a['pairs'])} | {pct(b['found'], b['pairs'])} |")
    print(f"| expected firings of AORTA's seven ids found | {pct(score(rows, ours, aorta_ids)['found'], b_own['pairs'])} | {pct(b_own['found'], b_own['pairs'])} |")
    print(f"| failure logs flagged by a log pattern | {pct(a['flagged'], a['failing'])} | {pct(b['flagged'], b['failing'])} |")
    print(f"| false firings (any log) | {len(a['false'])} | {len(b['false'])} |")
    print(f"| clean logs with a firing | {a['clean_fired']}/{a['clean']} | {b['clean_fired']}/{b['clean']} |")
    for tool, s in (("aorta", a), ("AORTA 0.2.1", b)):
        for name, i in s["false"]:
            print(f"  false firing, {tool}: {name}: {i}")
    for name, want in rows:
        missed = want - theirs[name]
        if missed & aorta_ids:
            print(f"  AORTA 0.2.1 misses {', '.join(sorted(missed & aorta_ids))} on {name}")
    return 0 if a["found"] == a["pairs"] and not a["false"] else 1


if __name__ == "__main__":
    sys.exit(main())
