#!/usr/bin/env python3
"""Two aorta builds side by side on bench_engine.py's probe-200 (20 cells × 10 trials of `true`,
first run, a fresh store each), interleaved with the spawn floor, medians of N: how a change
to the engine moves the 200-trivial-trials figure against the floor (docs/benchmarks.md).

Usage: engine_ab.py OLD_AORTA NEW_AORTA [--runs N] [--work DIR]
"""
import argparse
import os
import platform
import shutil
import statistics
import tempfile
from pathlib import Path

from bench_engine import spawn_floor, summary, timed, write_probe_200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    tools = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    work = Path(tempfile.mkdtemp(prefix="aorta-ab-", dir=a.work))
    probe = write_probe_200(work)
    env = dict(os.environ, NO_COLOR="1")
    times = {k: [] for k in tools}
    floor = []
    for i in range(a.runs):
        floor.append(spawn_floor(200))
        # Alternate which goes first, so drift hits both alike.
        order = list(tools.items()) if i % 2 == 0 else list(reversed(tools.items()))
        for name, bin_ in order:
            e = dict(env, AORTA_STORE=str(work / f"store-{name}-{i}"))
            wall, _, _ = timed([bin_, "sweep", "run", "--recipe", str(probe), "--output", str(work / f"{name}-{i}"), "--", "true"], env=e)
            times[name].append(wall)
    f = statistics.median(floor)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}")
    print()
    print("| probe 20 cells × 10 trials of `true`, first run | wall | against the spawn floor |")
    print("|---|---|---|")
    for name in tools:
        print(f"| {name} ({tools[name]}) | {summary(times[name])} | {statistics.median(times[name]) / f:.2f}× |")
    print(f"| spawn floor: 200 `posix_spawn`s of `true` | {summary(floor)} | 1.00× |")
    print(f"\nnew / old (medians): {statistics.median(times['new']) / statistics.median(times['old']):.3f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
