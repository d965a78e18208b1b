#!/usr/bin/env python3
"""Where a trial's overhead goes: 200 trials of `true` (20 cells × 10, probe mode, one slot)
under variants that switch one cost off at a time, interleaved with the spawn floor (200 bare
`posix_spawn`s of `true` from Python), medians of N runs.

Variants: default; Tier 3 off (no kernel-log read, no GPU snapshots); only
`tier3:thermal_throttle` off (no NVML violation counter, the costly reading); GPU metrics from
the amd-smi fake (`AORTA_PROBE_AMDSMI_FAKE`: no NVML calls, the rest as default); Tier 3 off
with the fake; cgroup containment off (`AORTA_CONTAINMENT=off`: no move into the trial's
cgroup, no `cgroup.procs` read).

Usage: parts.py AORTA_BIN [AORTA_BIN...] [--runs N] [--work DIR]
Several binaries (e.g. before and after a change) run interleaved in the same loop.
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_engine import spawn_floor, write_probe_200  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aorta", nargs="+")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default=None, help="variant names to run, separated by semicolons")
    a = ap.parse_args()
    bins = [os.path.abspath(b) for b in a.aorta]
    work = Path(tempfile.mkdtemp(prefix="aorta-parts-", dir=a.work))
    plain = write_probe_200(work)
    no_t3 = write_probe_200(work, "disable_detector_tiers: [tier3]\n", "no-tier3.yaml")
    no_throttle = write_probe_200(work, "disable_detectors: [tier3:thermal_throttle]\n", "no-throttle.yaml")
    fake = {"AORTA_PROBE_AMDSMI_FAKE": "vram=1,throttle=0,util=0"}
    variants = {
        "default": (plain, {}),
        "tier 3 off": (no_t3, {}),
        "tier3:thermal_throttle off (no NVML violation counter)": (no_throttle, {}),
        "GPU metrics faked (no NVML)": (plain, fake),
        "tier 3 off, GPU metrics faked": (no_t3, fake),
        "cgroup containment off": (plain, {"AORTA_CONTAINMENT": "off"}),
        "tier 3 off, cgroup containment off": (no_t3, {"AORTA_CONTAINMENT": "off"}),
    }
    if a.only:
        keep = a.only.split(";")
        variants = {k: v for k, v in variants.items() if k in keep}
    times = {(b, v): [] for b in range(len(bins)) for v in variants}
    floor = []
    for i in range(a.runs):
        floor.append(spawn_floor(200))
        for (b, v) in times:
            recipe, extra = variants[v]
            tag = f"{b}-" + v.replace(" ", "_").replace(",", "").replace("(", "").replace(")", "")
            env = dict(os.environ, NO_COLOR="1", AORTA_STORE=str(work / f"st-{tag}-{i}"), **extra)
            t0 = time.perf_counter()
            out = subprocess.run([bins[b], "sweep", "run", "--recipe", str(recipe), "--output", str(work / f"o-{tag}-{i}"), "--", "true"],
                                 env=env, capture_output=True, text=True)
            times[(b, v)].append(time.perf_counter() - t0)
            if out.returncode != 0:
                raise SystemExit(f"{bins[b]} {v} failed ({out.returncode}): {out.stderr[-2000:]}")
    f = statistics.median(floor)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}; work dir {work}")
    print(f"| binary | variant (200 trials of `true`) | median (min–max), n={a.runs} | per trial over the floor | × floor |")
    print("|---|---|---|---|---|")
    print(f"| — | spawn floor (posix_spawn from Python) | {f:.3f} s ({min(floor):.3f}–{max(floor):.3f}) | — | 1.00 |")
    for (b, v), ts in times.items():
        m = statistics.median(ts)
        print(f"| {a.aorta[b]} | {v} | {m:.3f} s ({min(ts):.3f}–{max(ts):.3f}) | {(m - f) / 200 * 1000:.2f} ms | {m / f:.2f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
