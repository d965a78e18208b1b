#!/usr/bin/env python3
"""Traced-inputs benchmarks for docs/benchmarks.md (issue "Never a wrong cache hit").

1. import-2000: a command trial running Python that imports 2,000 modules of a generated
   package tree (20 packages × 100 modules), traced (the default) and untraced
   (AORTA_TRACE=off), interleaved: each round forces one execution of each (`--rerun all`,
   their own stores) and reads the trial's wall time from its result.json, and the whole
   build's wall time (which adds settling the trace: stat, hash through the digest cache).
2. cached-10k-500: one cell of 10,000 trials, each `cat`ting the same 500 files of the
   workspace (500 traced inputs each): the cold build (`--jobs` = cores), then the fully cached
   rerun (warm: stat only), then a `touch` of all 500 inputs (same bytes, new mtimes) and the
   rebuild after it (must execute nothing: one hash per file), then cached reruns again.

3. trivial-200: docs/benchmarks.md's engine benchmark (20 cells × 10 trials of `true`, a fresh
   store each run), traced and untraced, interleaved: what tracing costs a trial that does
   nothing.
4. import-torch (with `--torch PYTHON`, on the GPU machine): the same comparison as 1 for a
   trial running `PYTHON -c "import torch; torch.cuda.is_available()"`.

Usage: traced_inputs.py AORTA_BIN [--runs N] [--work DIR] [--trials N] [--inputs N]
       [--torch PYTHON] [--skip-cached]
Prints a markdown table of medians (min–max) and the machine it ran on.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def summary(xs, unit="s", scale=1.0):
    m = statistics.median(xs) * scale
    return f"{m:.3f} {unit} ({min(xs) * scale:.3f}–{max(xs) * scale:.3f}, n={len(xs)})"


def run(cmd, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return wall, p


def executed(p):
    m = re.search(r"Trials: (\d+) executed, (\d+) reused", p.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def import_tree(ws: Path, packages=20, modules=100):
    root = ws / "benchpkg"
    lines = []
    for s in range(packages):
        pkg = root / f"s{s:02d}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for m in range(modules):
            (pkg / f"m{m:03d}.py").write_text(f"VALUE = {s * modules + m}\n")
            lines.append(f"import benchpkg.s{s:02d}.m{m:03d}")
    (root / "__init__.py").write_text("")
    (ws / "import_all.py").write_text("\n".join(lines) + "\nprint('imported', len(lines) if False else 0)\n")


def bench_imports(aorta, work: Path, runs: int, env, torch=None):
    ws = work / ("torch" if torch else "imports")
    ws.mkdir()
    if not torch:
        import_tree(ws)
    (ws / "r.yaml").write_text(
        "schema_version: 1\nmode: probe\nticket: IMPORTS\ntrials: 1\n"
        "mitigation_axis: [none]\ndiagnostic_axis: [none]\n"
    )
    python = torch or shutil.which("python3")
    real_python = subprocess.run([python, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True).stdout.strip()
    command = [real_python, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"] if torch else [real_python, "import_all.py"]
    variants = {
        "traced": {},
        "traced with ptrace (AORTA_TRACE_MECHANISM=ptrace)": {"AORTA_TRACE_MECHANISM": "ptrace"},
        "untraced (AORTA_TRACE=off)": {"AORTA_TRACE": "off"},
    }
    trial = {v: [] for v in variants}
    build = {v: [] for v in variants}
    inputs = {}
    for i in range(runs + 1):
        for v, extra in variants.items():
            e = dict(env, **extra)
            tag = "-".join(f"{k}={v}" for k, v in extra.items()) or "on"
            store = ws / f"store-{tag}"
            out = ws / f"out-{tag}"
            cmd = [aorta, "build", "r.yaml", "--store", str(store), "--output", str(out), "--rerun", "all", "--", *command]
            wall, p = run(cmd, e, ws)
            rec = json.loads((out / "IMPORTS" / "none-none" / "trial_0" / "result.json").read_text())
            if i == 0:
                inputs[v] = (rec.get("inputs") or {}).get("count")
                continue  # warm-up: page cache, digest cache
            trial[v].append(rec["walltime_sec"])
            build[v].append(wall)
    return real_python, trial, build, inputs


def bench_cached(aorta, work: Path, runs: int, trials: int, n_inputs: int, env):
    ws = work / "cached"
    (ws / "in").mkdir(parents=True)
    for k in range(n_inputs):
        (ws / "in" / f"f{k:04d}.txt").write_text(f"{k}\n")
    (ws / "r.yaml").write_text(
        f"schema_version: 1\nmode: probe\nticket: CACHED\ntrials: {trials}\n"
        "mitigation_axis: [none]\ndiagnostic_axis: [none]\n"
    )
    cat = shutil.which("cat")
    cmd = [aorta, "build", "r.yaml", "--store", str(ws / "store"), "--output", str(ws / "out"), "--jobs", str(os.cpu_count() or 1), "--", "sh", "-c", f"{cat} in/* > /dev/null"]
    cold, p = run(cmd, env, ws)
    cold_counts = executed(p)
    count = json.loads((ws / "out" / "CACHED" / "none-none" / "trial_0" / "result.json").read_text())["inputs"]["count"]
    cached = []
    for _ in range(runs):
        wall, p = run(cmd, env, ws)
        assert executed(p)[0] == 0, p.stdout
        cached.append(wall)
    later = time.time() + 5
    for f in (ws / "in").iterdir():
        os.utime(f, (later, later))
    touched, p = run(cmd, dict(env, AORTA_TIMING="1"), ws)
    touched_counts = executed(p)
    hashed = re.search(r"traced inputs: (\d+) file\(s\) hashed", p.stderr)
    after = []
    for _ in range(runs):
        wall, p = run(cmd, env, ws)
        assert executed(p)[0] == 0, p.stdout
        after.append(wall)
    return cold, cold_counts, count, cached, touched, touched_counts, hashed.group(1) if hashed else "?", after


def bench_trivial(aorta, work: Path, runs: int, env):
    ws = work / "trivial"
    ws.mkdir()
    side = ws / "side.json"
    mits = {f"m{i}": {f"BENCH_M{i}": "1"} for i in range(5)}
    mits.update({f"d{j}": {f"BENCH_D{j}": "1"} for j in range(4)})
    side.write_text(json.dumps({"version": 1, "mitigations": mits}))
    (ws / "r.yaml").write_text(
        "schema_version: 1\nmode: probe\nticket: TRIVIAL\ntrials: 10\n"
        "mitigation_axis: [m0, m1, m2, m3, m4]\ndiagnostic_axis: [d0, d1, d2, d3]\n"
    )
    true = shutil.which("true")
    times = {"traced": [], "untraced (AORTA_TRACE=off)": []}
    for i in range(runs):
        for v in times:
            e = dict(env, AORTA_TRACE="off") if "off" in v else env
            d = ws / f"{i}-{'off' if 'off' in v else 'on'}"
            wall, _ = run([aorta, "build", "r.yaml", "--mitigations-file", str(side), "--store", str(d / "store"), "--output", str(d / "out"), "--", true], e, ws)
            times[v].append(wall)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aorta")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--work")
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--inputs", type=int, default=500)
    ap.add_argument("--skip-cached", action="store_true")
    ap.add_argument("--torch", metavar="PYTHON", help="also time `import torch` with this interpreter")
    ap.add_argument("--bytecode", action="store_true", help="let Python write and read __pycache__ (its default: one open per module); without, PYTHONDONTWRITEBYTECODE=1 (two: the missing .pyc, then the source)")
    a = ap.parse_args()
    aorta = os.path.abspath(a.aorta)
    work = Path(tempfile.mkdtemp(prefix="aorta-traced-", dir=a.work))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AORTA_")}
    if a.bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    python, trial, build, inputs = bench_imports(aorta, work, a.runs, env)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, {platform.platform()}, python {platform.python_version()} ({python})")
    print()
    print("| benchmark | figure |")
    print("|---|---|")
    for v in trial:
        print(f"| import-2000, {v}: the trial's wall time | {summary(trial[v], 'ms', 1e3)} |")
    for v in build:
        print(f"| import-2000, {v}: the whole build (`--rerun all`) | {summary(build[v], 'ms', 1e3)} |")
    t_on, t_off = statistics.median(trial["traced"]), statistics.median(trial["untraced (AORTA_TRACE=off)"])
    b_on, b_off = statistics.median(build["traced"]), statistics.median(build["untraced (AORTA_TRACE=off)"])
    print(f"| import-2000: tracing's cost | trial +{(t_on - t_off) * 1e3:.1f} ms ({(t_on / t_off - 1) * 100:.1f}%); build +{(b_on - b_off) * 1e3:.1f} ms ({(b_on / b_off - 1) * 100:.1f}%); {inputs['traced']} traced inputs |")
    t_pt = statistics.median(trial["traced with ptrace (AORTA_TRACE_MECHANISM=ptrace)"])
    print(f"| import-2000: tracing's cost with ptrace | trial +{(t_pt - t_off) * 1e3:.1f} ms ({(t_pt / t_off - 1) * 100:.1f}%) |")
    print(f"| bytecode | {'written and read (__pycache__)' if a.bytecode else 'off (PYTHONDONTWRITEBYTECODE=1)'} |")
    trivial = bench_trivial(aorta, work, a.runs, env)
    for v, xs in trivial.items():
        print(f"| trivial-200 (20 cells × 10 trials of `true`, cold), {v} | {summary(xs)} |")
    on, off = statistics.median(trivial["traced"]), statistics.median(trivial["untraced (AORTA_TRACE=off)"])
    print(f"| trivial-200: tracing's cost | +{(on - off) * 1e3:.0f} ms a build, +{(on - off) / 200 * 1e3:.2f} ms a trial ({(on / off - 1) * 100:.0f}%) |")
    if a.torch:
        _, trial, build, inputs = bench_imports(aorta, work, a.runs, env, torch=a.torch)
        for v in trial:
            print(f"| import-torch, {v}: the trial's wall time | {summary(trial[v], 'ms', 1e3)} |")
        t_on, t_off = statistics.median(trial["traced"]), statistics.median(trial["untraced (AORTA_TRACE=off)"])
        b_on, b_off = statistics.median(build["traced"]), statistics.median(build["untraced (AORTA_TRACE=off)"])
        print(f"| import-torch: tracing's cost | trial +{(t_on - t_off) * 1e3:.1f} ms ({(t_on / t_off - 1) * 100:.1f}%); build +{(b_on - b_off) * 1e3:.1f} ms ({(b_on / b_off - 1) * 100:.1f}%); {inputs['traced']} traced inputs |")
        t_pt = statistics.median(trial["traced with ptrace (AORTA_TRACE_MECHANISM=ptrace)"])
        print(f"| import-torch: tracing's cost with ptrace | trial +{(t_pt - t_off) * 1e3:.1f} ms ({(t_pt / t_off - 1) * 100:.1f}%) |")
    if not a.skip_cached:
        cold, cold_counts, count, cached, touched, touched_counts, hashed, after = bench_cached(aorta, work, a.runs, a.trials, a.inputs, env)
        print(f"| {a.trials:,} trials × {count} traced inputs: cold build (`--jobs {os.cpu_count()}`) | {cold:.1f} s, {cold_counts[0]} executed |")
        print(f"| … fully cached rerun, warm (stat only) | {summary(cached)} |")
        print(f"| … after `touch` of all {a.inputs} inputs (same bytes) | {touched:.3f} s, {touched_counts[0]} executed, {hashed} file(s) hashed |")
        print(f"| … fully cached rerun after that | {summary(after)} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
