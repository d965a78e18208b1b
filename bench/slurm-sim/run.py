#!/usr/bin/env python3
"""Issue 37's scale benchmark: one `aorta build --executor slurm` of TRIALS trials (one cell,
`-- true`) against a simulated cluster of NODES nodes (fakeslurm.py's commands over SQLite,
cluster.py running every task's `aorta trial exec` for real). Measures what the submitting
aorta costs, apart from the trials themselves:

- submission: aorta's own timing of its sbatch calls (AORTA_TIMING=1),
- each poll cycle: squeue (the fake's, a Python start) and aorta's processing after it, in wall
  time and in the CPU time of aorta's polling thread (the wall time includes waiting for the
  cores the simulated nodes' tasks share),
- the client's CPU time (utime + stime of the aorta process itself, not its children, read
  from /proc while it runs) and its peak RSS (VmHWM),
- the time from the last task's end (the cluster's clock) to the build's exit.

    python3 bench/slurm-sim/run.py [--trials 10000] [--nodes 100] [--aorta target/release/aorta]
                                   [--drop-caches]
"""
import argparse
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def sample(pid):
    """(cpu seconds of the process itself, peak RSS in KiB or None), or None once it is gone.
    An exited, unreaped process (a zombie) still shows its final CPU times but no VmHWM."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    user, system = int(fields[11]) / TICK, int(fields[12]) / TICK
    hwm = re.search(r"VmHWM:\s+(\d+)", status)
    return (user, system), int(hwm.group(1)) if hwm else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--poll", default="2")
    ap.add_argument("--aorta", default=str(REPO / "target/release/aorta"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument(
        "--drop-caches", action="store_true",
        help="sync and drop the page cache first (root): an ext4 without a journal scans past"
        " recently deleted inodes whose table blocks are cached, so an earlier run's deletions"
        " would otherwise slow this run's file creation",
    )
    a = ap.parse_args()
    if a.drop_caches:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")

    work = Path(tempfile.mkdtemp(prefix="aorta-slurm-sim-"))
    fake = work / "fake"
    fake.mkdir()
    for cmd in ["sbatch", "squeue", "sacct", "scontrol", "scancel"]:
        (fake / cmd).symlink_to(HERE / "fakeslurm.py")
    (work / ".aorta-root").write_text("")
    (work / "probe.yaml").write_text(
        "schema_version: 1\nmode: probe\nticket: SIM\ntrials: %d\n"
        "mitigation_axis: [none]\ndiagnostic_axis: [none]\n" % a.trials
    )
    env = dict(
        os.environ,
        PATH=f"{fake}:{os.environ['PATH']}",
        FAKE_SLURM_DB=str(work / "slurm.db"),
        AORTA_ENV_SNAPSHOT=str(REPO / "docs/examples/h200-env.json"),
        AORTA_SLURM_POLL_INTERVAL=a.poll,
        AORTA_TIMING="1",
        NO_COLOR="1",
    )
    env.pop("AORTA_EXECUTOR", None)
    stop = work / "STOP"
    cluster = subprocess.Popen(
        [sys.executable, str(HERE / "cluster.py"), str(a.nodes), str(stop)], env=env, cwd=work
    )
    t0 = time.time()
    client = subprocess.Popen(
        [a.aorta, "build", "probe.yaml", "--executor", "slurm", "--store", "store", "--", "true"],
        env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    last = ((0.0, 0.0), 0)
    cpu_at = []  # (seconds since the client started, its CPU seconds so far)
    import threading

    out = {}

    def read():
        out["stdout"], out["stderr"] = client.communicate()

    reader = threading.Thread(target=read)
    reader.start()
    while client.poll() is None:
        s = sample(client.pid)
        if s:
            last = (s[0], s[1] or last[1])
            cpu_at.append((time.time() - t0, sum(s[0])))
        time.sleep(0.05)
    reader.join()
    t_exit = time.time()
    stop.write_text("")
    cluster.wait()

    con = sqlite3.connect(work / "slurm.db")
    states = dict(con.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall())
    arrays = con.execute("SELECT count(*) FROM jobs").fetchone()[0]
    last_end = con.execute("SELECT max(ended) FROM tasks").fetchone()[0]
    first_start = con.execute("SELECT min(started) FROM tasks").fetchone()[0]

    err = out["stderr"]
    ms = lambda pat: [float(x) for x in re.findall(pat, err)]
    submits = ms(r"slurm submit of \d+ trial\(s\): ([\d.]+) ms")
    polls = ms(r"slurm poll of \d+ pending task\(s\): ([\d.]+) ms")
    squeues = ms(r"slurm poll: squeue: ([\d.]+) ms")
    own = [p - q for p, q in zip(polls, squeues)]
    own_cpu = [float(c) for _, c in re.findall(r"slurm poll after squeue, (\d+) ended: ([\d.]+) ms of CPU", err)]
    summary = re.search(r"Trials: .*", out["stdout"])
    print(f"trials {a.trials}, nodes {a.nodes}, poll interval {a.poll} s; exit {client.returncode}")
    print(f"  {summary.group(0) if summary else 'no Trials line'}; tasks by state {states}; arrays {arrays}")
    print(f"  build wall {t_exit - t0:.1f} s; trials ran from {first_start - t0:.1f} s to {last_end - t0:.1f} s")
    sbatch_file = work / "slurm.db.sbatch-seconds"
    sbatch_s = sum(float(x) for x in sbatch_file.read_text().split()) if sbatch_file.exists() else 0.0
    print(
        f"  submission ({len(submits)} round(s)): {sum(submits) / 1e3:.2f} s, of which the stand-in"
        f" sbatch {sbatch_s:.2f} s: aorta's part {sum(submits) / 1e3 - sbatch_s:.2f} s"
    )
    if polls:
        print(
            f"  poll cycles {len(polls)}: median {statistics.median(polls):.0f} ms, max {max(polls):.0f} ms"
            f" (squeue median {statistics.median(squeues):.0f} ms; aorta's own part median"
            f" {statistics.median(own):.1f} ms, max {max(own):.1f} ms)"
        )
    if own_cpu:
        print(
            f"  aorta's own part of a poll cycle in CPU time (its thread, apart from the simulated"
            f" nodes on the same cores): median {statistics.median(own_cpu):.1f} ms,"
            f" max {max(own_cpu):.1f} ms"
        )
    (user, system), hwm = last
    print(
        f"  client CPU (aorta itself, not its children): {user + system:.2f} s (user {user:.2f},"
        f" system {system:.2f}); peak RSS {hwm / 1024:.0f} MiB"
    )
    print(f"  last task's end to the build's exit: {t_exit - last_end:.2f} s")
    # The client's CPU by phase, from the samples and its own timing marks (ms since its start).
    def cpu_by(at_s):
        before = [c for t, c in cpu_at if t <= at_s]
        return before[-1] if before else 0.0
    submitted = re.search(r"slurm submit of \d+ trial\(s\): [\d.]+ ms \(at ([\d.]+) ms\)", err)
    scheduled = re.search(r"schedule \(lookups \+ execution\): [\d.]+ ms \(at ([\d.]+) ms\)", err)
    if submitted and scheduled and cpu_at:
        a_s, b_s = float(submitted.group(1)) / 1e3, float(scheduled.group(1)) / 1e3
        total = user + system
        print(
            f"  client CPU by phase (50 ms samples): to the end of submission {cpu_by(a_s):.2f} s,"
            f" polling {cpu_by(b_s) - cpu_by(a_s):.2f} s, the tail (materialise, artifacts)"
            f" {total - cpu_by(b_s):.2f} s"
        )
    if client.returncode != 0 or not a.keep:
        if client.returncode != 0:
            print(err[-3000:], file=sys.stderr)
    (work / "client.stderr").write_text(err)
    phases = [l for l in err.splitlines() if l.startswith("aorta timing:") and "slurm poll" not in l]
    print("  the client's phases (AORTA_TIMING):")
    for l in phases:
        print("    " + l[len("aorta timing: "):])
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"  kept {work}")
    return 0 if client.returncode == 0 and states.get("COMPLETED") == a.trials else 1


if __name__ == "__main__":
    sys.exit(main())
