#!/usr/bin/env python3
"""Placing stored trials into a new run directory: hard links (the default) against copies
(`AORTA_PLACE_OUTPUTS=copy`), side by side. One cell of TRIALS trials of `-- true` is built
once; then each round rebuilds it into a fresh `--output` directory (every trial a store hit,
placed from the store), once each way, in alternating order. Reports the medians of the
build's wall time, its CPU (the aorta process; a cached build starts no trial), and its
`materialise` phase (AORTA_TIMING).

    python3 bench/place/run.py [--trials 10000] [--rounds 3] [--aorta target/release/aorta]
                               [--drop-caches]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def build(aorta, work, out, env):
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [aorta, "build", "probe.yaml", "--store", "store", "--output", out, "--", "true"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    stdout, stderr = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"build into {out} failed ({p.returncode}):\n{stderr[-3000:]}")
    m = re.search(r"materialise: ([\d.]+) ms", stderr)
    trials = re.search(r"Trials: .*", stdout).group(0)
    return wall, float(m.group(1)) / 1e3 if m else 0.0, trials


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--aorta", default=str(REPO / "target/release/aorta"))
    ap.add_argument(
        "--drop-caches", action="store_true",
        help="sync and drop the page cache before each build (root): an ext4 without a journal"
        " scans past recently deleted inodes whose table blocks are cached, so each round's"
        " deletions would otherwise slow the next round's file creation",
    )
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="aorta-place-"))
    (work / ".aorta-root").write_text("")
    (work / "probe.yaml").write_text(
        "schema_version: 1\nmode: probe\nticket: PLACE\ntrials: %d\n"
        "mitigation_axis: [none]\ndiagnostic_axis: [none]\n" % a.trials
    )
    base = dict(
        os.environ,
        AORTA_ENV_SNAPSHOT=str(REPO / "docs/examples/h200-env.json"),
        AORTA_TIMING="1",
        NO_COLOR="1",
    )
    base.pop("AORTA_EXECUTOR", None)
    base.pop("AORTA_PLACE_OUTPUTS", None)
    wall, _, trials = build(a.aorta, work, "out0", base)
    print(f"first build ({a.trials} trials executed): {wall:.1f} s; {trials}")

    rows = {"copy": [], "link": []}
    for r in range(a.rounds):
        order = ["copy", "link"] if r % 2 == 0 else ["link", "copy"]
        for mode in order:
            out = f"out-{mode}-{r}"
            env = dict(base, AORTA_PLACE_OUTPUTS=mode)
            if a.drop_caches:
                os.sync()
                Path("/proc/sys/vm/drop_caches").write_text("3\n")
            before = os.times()
            wall, materialise, trials = build(a.aorta, work, out, env)
            after = os.times()
            cpu = (after.children_user - before.children_user) + (
                after.children_system - before.children_system
            )
            sysc = after.children_system - before.children_system
            rows[mode].append((wall, cpu, sysc, materialise))
            print(
                f"  round {r} {mode}: wall {wall:.2f} s, cpu {cpu:.2f} s (system {sysc:.2f}),"
                f" materialise {materialise:.2f} s; {trials}"
            )
            shutil.rmtree(work / out)

    med = lambda mode, i: statistics.median(x[i] for x in rows[mode])
    print(f"medians of {a.rounds} rounds, {a.trials} stored trials into a new run directory:")
    for mode in ["copy", "link"]:
        print(
            f"  {mode}: wall {med(mode, 0):.2f} s, cpu {med(mode, 1):.2f} s"
            f" (system {med(mode, 2):.2f}), materialise {med(mode, 3):.2f} s"
        )
    print(
        f"  link / copy: wall {med('link', 0) / med('copy', 0):.2f},"
        f" cpu {med('link', 1) / med('copy', 1):.2f},"
        f" materialise {med('link', 3) / med('copy', 3):.2f}"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
