#!/usr/bin/env python3
"""What a 200-trial build costs in CPU, not wall time: aorta's own work per trial is what a
busy host takes away from the next trial, so it shows before the wall-clock ratio moves.

Two measures, for each binary given (interleaved with each other and the floor):
1. `perf stat -e task-clock` of a 200-trial probe build of `true` (20 cells × 10, one slot),
   aorta and its 200 children together, beside the same for the spawn floor (Python spawning
   200 `true`s). Medians of N runs. The difference between a binary and the floor is aorta's own
   CPU plus its start-up, less Python's start-up.
2. With `--syscalls`: the system calls aorta's own threads make per trial, from `strace -f` of a
   20-trial build (the children's calls left out), counted between the 6th and the 16th trial's
   clone so start-up and the tail are left out.

Usage: cpu.py AORTA_BIN [AORTA_BIN...] [--runs N] [--work DIR] [--syscalls]
Needs `perf` (and `strace` for --syscalls).
"""
import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_engine import write_probe_200  # noqa: E402

FLOOR = """import os, shutil
true = shutil.which("true")
for i in range(200):
    pid = os.posix_spawn(true, [true], os.environ)
    os.waitpid(pid, 0)
"""


def task_clock_ms(cmd, env, cwd):
    """CPU time (ms) of `cmd` and everything it starts."""
    out = subprocess.run(
        ["perf", "stat", "-x", ",", "-e", "task-clock", "--", *cmd],
        env=env, cwd=cwd, capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    for line in out.stderr.splitlines():
        if "task-clock" in line:
            return float(line.split(",")[0])
    raise SystemExit(f"no task-clock in perf's output:\n{out.stderr}")


def syscalls_per_trial(binary, work):
    """(per-trial system calls of aorta's threads, the commonest ones) for a 20-trial build."""
    recipe = work / "r20.yaml"
    recipe.write_text(
        "schema_version: 1\nmode: probe\nticket: SC\ntrials: 20\n"
        "mitigation_axis: [none]\ndiagnostic_axis: [none]\n"
    )
    trace = work / "strace.txt"
    for d in ("out-sc", "store-sc"):
        shutil.rmtree(work / d, ignore_errors=True)
    env = dict(os.environ, AORTA_STORE=str(work / "store-sc"), NO_COLOR="1")
    subprocess.run(
        ["strace", "-f", "-o", str(trace), binary, "sweep", "run", "--recipe", str(recipe),
         "--output", str(work / "out-sc"), "--jobs", "1", "--", "true"],
        env=env, cwd=work, capture_output=True, check=True,
    )
    lines = trace.read_text().splitlines()
    children = {l.split()[0] for l in lines if "execve(" in l and "true" in l}
    clones = [
        i for i, l in enumerate(lines)
        if (m := re.search(r"clone3(\(|.*resumed).*= (\d+)$", l)) and m.group(2) in children
    ]
    first, last = clones[5], clones[15]
    calls = collections.Counter()
    for l in lines[first:last]:
        if l.split()[0] in children:
            continue
        if m := re.match(r"\d+\s+(\w+)\(", l):
            calls[m.group(1)] += 1
    return sum(calls.values()) / 10, [(k, v / 10) for k, v in calls.most_common(8)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aorta", nargs="+")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--work", default=None)
    ap.add_argument("--syscalls", action="store_true")
    a = ap.parse_args()
    bins = [os.path.abspath(b) for b in a.aorta]
    work = Path(tempfile.mkdtemp(prefix="aorta-cpu-", dir=a.work))
    recipe = write_probe_200(work)
    floor = work / "floor.py"
    floor.write_text(FLOOR)
    cpu = {b: [] for b in bins}
    floors = []
    for i in range(a.runs):
        for b in bins:
            for d in ("out", "store"):
                shutil.rmtree(work / d, ignore_errors=True)
            env = dict(os.environ, AORTA_STORE=str(work / "store"), NO_COLOR="1")
            cmd = [b, "sweep", "run", "--recipe", str(recipe), "--output", str(work / "out"), "--", "true"]
            cpu[b].append(task_clock_ms(cmd, env, work))
        floors.append(task_clock_ms([sys.executable, str(floor)], dict(os.environ), work))
    py_start = statistics.median(
        task_clock_ms([sys.executable, "-c", "pass"], dict(os.environ), work) for _ in range(a.runs)
    )
    print(f"work dir {work}; medians of {a.runs} interleaved runs")
    print()
    print("| binary | CPU of a 200-trial build (task-clock, with its children) | over the floor, per trial |")
    print("|---|---|---|")
    f = statistics.median(floors) - py_start
    print(f"| spawn floor (Python's own start-up, {py_start:.1f} ms, taken off) | {f:.1f} ms | — |")
    for b in bins:
        m = statistics.median(cpu[b])
        print(f"| {b} | {m:.1f} ms (min {min(cpu[b]):.1f}, max {max(cpu[b]):.1f}) | {(m - f) / 200 * 1000:.0f} µs |")
    if a.syscalls:
        print()
        for b in bins:
            n, top = syscalls_per_trial(b, work)
            print(f"{b}: {n:.1f} system calls a trial in aorta's threads; commonest: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in top))


if __name__ == "__main__":
    main()
