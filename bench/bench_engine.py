#!/usr/bin/env python3
"""Engine benchmarks for docs/benchmarks.md, measured side by side in one run.

1. probe-200: a probe recipe of 20 cells × 10 trials of `true`, first (cold) run, against
   AORTA 0.2.1 (`pip install amd-aorta==0.2.1`), each tool writing into a fresh directory,
   and beside them two floors: 200 bare `posix_spawn`s of `true` from Python (the spawn
   floor), and the same spawns each followed by the five file creations a trial costs (the
   file floor: stdout.log, stderr.log, result.json, the store's blob and entry). All four are
   interleaved in one loop so machine noise hits them alike.
2. cached-10k: 1,000 cells × 10 trials of `true`: build once, then time the fully cached
   rerun (artifacts included: it renders nothing) and its peak RSS.

Beside the wall times, the CPU (user + system) each tool and its 200 trials used, against the
spawn floor's (its 200 children and Python's loop): a busy host takes CPU away, so a tool that
uses more of it per trial loses more wall time than the floor when the machine is loaded.

Usage: bench_engine.py AORTA_RS_BIN AORTA_PY_BIN [--runs N] [--work DIR]
`--work` picks the filesystem (e.g. /dev/shm for tmpfs). Prints a markdown table of medians
(and min/max) and the machine it ran on.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

M20 = ["none", "tf32_off", "xnack", "hsa_no_sdma", "hip_launch_blocking"]
D20 = ["none", "amd_log_level_4", "gpu_max_hw_queues_2", "roc_signal_pool_16k"]


def write_probe_200(d: Path, extra: str = "", name: str = "probe-200.yaml") -> Path:
    r = d / name
    r.write_text(
        "schema_version: 1\nmode: probe\nticket: BENCH\ntrials: 10\n"
        f"mitigation_axis: [{', '.join(M20)}]\ndiagnostic_axis: [{', '.join(D20)}]\n"
        "confound: {baseline_cell: none-none}\n" + extra
    )
    return r


def write_cached_10k(d: Path) -> tuple[Path, Path]:
    side = d / "bench-sidecar.json"
    mits = {f"m{i}": {f"BENCH_M{i}": "1"} for i in range(40)}
    mits.update({f"d{j}": {f"BENCH_D{j}": "1"} for j in range(25)})
    side.write_text(json.dumps({"version": 1, "mitigations": mits}))
    r = d / "cached-10k.yaml"
    r.write_text(
        "schema_version: 1\nmode: probe\nticket: BENCH10K\ntrials: 10\n"
        f"mitigation_axis: [{', '.join(f'm{i}' for i in range(40))}]\n"
        f"diagnostic_axis: [{', '.join(f'd{j}' for j in range(25))}]\n"
        "confound: {baseline_cell: m0-d0}\n"
    )
    return r, side


def cpu_of(usage):
    return usage.ru_utime + usage.ru_stime


def timed(cmd, env=None, cwd=None):
    """Wall time, the child's peak RSS (KiB) and the CPU seconds of the command and every
    process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return wall, max(after.ru_maxrss, before.ru_maxrss), cpu_of(after) - cpu_of(before)


def rss_of(cmd, env=None, cwd=None):
    """Peak RSS via /usr/bin/time -v (ru_maxrss of RUSAGE_CHILDREN is a running maximum)."""
    out = subprocess.run(["/usr/bin/time", "-v", *cmd], env=env, cwd=cwd, capture_output=True, text=True)
    for line in out.stderr.splitlines():
        if "Maximum resident set size" in line:
            return int(line.split()[-1])
    return None


def spawn_floor(n: int, files_dir: Path | None = None, cpu: list | None = None) -> float:
    """n bare spawns of `true` (and, with `files_dir`, five small files created per spawn).
    With `cpu`, appends the CPU seconds the loop and its children used."""
    true = shutil.which("true")
    before = cpu_of(resource.getrusage(resource.RUSAGE_SELF)) + cpu_of(resource.getrusage(resource.RUSAGE_CHILDREN))
    t0 = time.perf_counter()
    for i in range(n):
        pid = os.posix_spawn(true, [true], os.environ)
        os.waitpid(pid, 0)
        if files_dir is not None:
            d = files_dir / f"t{i}"
            d.mkdir(parents=True)
            for name in ("stdout.log", "stderr.log", "result.json", "blob", "entry"):
                with open(d / name, "wb") as f:
                    f.write(b"x")
                    os.fdatasync(f.fileno())
    wall = time.perf_counter() - t0
    if cpu is not None:
        after = cpu_of(resource.getrusage(resource.RUSAGE_SELF)) + cpu_of(resource.getrusage(resource.RUSAGE_CHILDREN))
        cpu.append(after - before)
    return wall


def summary(xs):
    return f"{statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aorta_rs")
    ap.add_argument("aorta_py")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default=None, help="where the stores and outputs go (default: $TMPDIR)")
    a = ap.parse_args()
    rs, py = os.path.abspath(a.aorta_rs), os.path.abspath(a.aorta_py)
    work = Path(tempfile.mkdtemp(prefix="aorta-bench-", dir=a.work))
    env = dict(os.environ, NO_COLOR="1")
    variants = {
        "default": write_probe_200(work),
        # Tier 3 reads the kernel log once per trial (dmesg): ~10 ms on this kernel.
        "tier 3 off": write_probe_200(work, "disable_detector_tiers: [tier3]\n", "probe-200-no-tier3.yaml"),
    }
    times = {v: ([], []) for v in variants}
    cpus = {v: ([], []) for v in variants}
    floors = ([], [])
    floor_cpu = []
    for i in range(a.runs):
        floors[0].append(spawn_floor(200, cpu=floor_cpu))
        floors[1].append(spawn_floor(200, work / f"floor-{i}"))
        for v, probe in variants.items():
            # Alternate the tools so machine noise hits both alike.
            store = work / f"store-{v}-{i}"
            e = dict(env, AORTA_STORE=str(store))
            out = v.replace(" ", "-")
            wall, _, cpu = timed([rs, "sweep", "run", "--recipe", str(probe), "--output", str(work / f"rs-{out}-{i}"), "--", "true"], env=e)
            times[v][0].append(wall)
            cpus[v][0].append(cpu)
            wall, _, cpu = timed([py, "sweep", "run", "--recipe", str(probe), "--output", str(work / f"py-{out}-{i}"), "--", "true"], env=env)
            times[v][1].append(wall)
            cpus[v][1].append(cpu)
    big, side = write_cached_10k(work)
    e = dict(env, AORTA_STORE=str(work / "store-10k"))
    cmd = [rs, "sweep", "run", "--recipe", str(big), "--mitigations-file", str(side), "--output", str(work / "rs-10k"), "--jobs", str(os.cpu_count() or 1), "--", "true"]
    first = timed(cmd, env=e)[0]
    cached = [timed(cmd, env=e)[0] for _ in range(a.runs)]
    rss = rss_of(cmd, env=e)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()}")
    print()
    print("| benchmark | aorta | AORTA 0.2.1 | ratio |")
    print("|---|---|---|---|")
    for v, (rs_times, py_times) in times.items():
        rs_med, py_med = statistics.median(rs_times), statistics.median(py_times)
        print(f"| probe 20 cells × 10 trials of `true`, first run, {v} | {summary(rs_times)} | {summary(py_times)} | {py_med / rs_med:.2f}× (AORTA time / aorta time) |")
        print(f"| … aorta against the spawn floor / the file floor | {rs_med / statistics.median(floors[0]):.2f}× / {rs_med / statistics.median(floors[1]):.2f}× | — | — |")
        rs_cpu, py_cpu = statistics.median(cpus[v][0]), statistics.median(cpus[v][1])
        print(f"| … CPU (user + system, the tool and its 200 trials) | {rs_cpu * 1e3:.0f} ms ({rs_cpu / statistics.median(floor_cpu):.2f}× the floor's) | {py_cpu * 1e3:.0f} ms | — |")
    print(f"| spawn floor: 200 `posix_spawn`s of `true` from Python | {summary(floors[0])}; CPU {statistics.median(floor_cpu) * 1e3:.0f} ms | — | — |")
    print(f"| file floor: the same plus 5 file creations (fdatasync) each | {summary(floors[1])} | — | — |")
    print(f"| 1,000 cells × 10 trials, first run (`--jobs {os.cpu_count()}`) | {first:.3f} s | — | — |")
    print(f"| 1,000 cells × 10 trials, fully cached rerun | {summary(cached)} | — | — |")
    print(f"| peak RSS of the cached rerun | {rss / 1024:.1f} MiB | — | — |" if rss else "| peak RSS | n/a | — | — |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
