#!/usr/bin/env python3
"""Figures for docs/benchmarks.md, "Handing a run on" (issue 14): `aorta classify` on a
multi-GB generated log (wall time, peak RSS of the process), and `aorta bundle` on the
quickstart run (time, archive size).

Usage (from the repository root, release build):

    cargo build --release --bin aorta
    python3 bench/handoff/bench.py target/release/aorta [--gib 4] [--runs 5] [--dir /dev/shm]

The log is generated into --dir (tmpfs by default, so the disk is out of the measurement) and
deleted afterwards: healthy training output (rank-prefixed step lines with losses and
throughput, NCCL INFO lines) ending in a traceback and a CUDA OOM, so every scan reads to the
end. Peak RSS is that one process's (os.wait4). Medians of --runs.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def block():
    lines = []
    for i in range(4096):
        lines.append(f"[rank{i % 8}] step {i} loss=2.{i:04d} lr=3.0e-4 tokens/s=41230 grad_norm=0.{i % 97:02d}\n")
        if i % 64 == 0:
            lines.append(f"node7:1234:1290 [{i % 8}] NCCL INFO Channel 00/0{i % 8} : 0[0] -> 1[1] via P2P/CUMEM\n")
    return "".join(lines).encode()


def generate(path, gib):
    b = block()
    target = gib << 30
    with open(path, "wb") as f:
        written = 0
        while written < target:
            f.write(b)
            written += len(b)
        f.write(b"[rank3]: Traceback (most recent call last):\n")
        f.write(b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    return os.path.getsize(path)


def timed(argv, **kw):
    """(wall seconds, peak RSS in MiB, exit status) of one process."""
    start = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    return time.monotonic() - start, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("aorta")
    ap.add_argument("--gib", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm")
    a = ap.parse_args()
    aorta = str(Path(a.aorta).resolve())

    log = Path(a.dir) / "aorta-handoff-bench.log"
    size = generate(log, a.gib)
    try:
        runs = [timed([aorta, "classify", "--json", str(log)]) for _ in range(a.runs)]
    finally:
        log.unlink()
    assert all(r[2] == 1 for r in runs), runs
    wall = statistics.median(r[0] for r in runs)
    rss = statistics.median(r[1] for r in runs)
    print(f"classify: {size} bytes, median of {a.runs}: {wall:.2f} s ({size / wall / 1e6:.0f} MB/s), "
          f"peak RSS {rss:.1f} MiB (max {max(r[1] for r in runs):.1f})")

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, AORTA_STORE=f"{tmp}/store")
        subprocess.run([aorta, "build", "//recipes:quickstart", "--output", f"{tmp}/out"],
                       cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)
        run_dir = Path(tmp) / "out" / "QUICKSTART-1"
        assert (run_dir / "report.html").is_file(), run_dir
        src = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
        out = Path(tmp) / "q.tar.gz"
        runs = [timed([aorta, "bundle", str(run_dir), "--output", str(out)]) for _ in range(a.runs)]
        assert all(r[2] == 0 for r in runs), runs
        wall = statistics.median(r[0] for r in runs)
        members = len(list(p for p in run_dir.rglob("*") if p.is_file()))
        print(f"bundle quickstart: run directory {members} files, {src} bytes; archive {out.stat().st_size} bytes; "
              f"median of {a.runs}: {wall * 1000:.1f} ms, peak RSS {statistics.median(r[1] for r in runs):.1f} MiB")


if __name__ == "__main__":
    main()
