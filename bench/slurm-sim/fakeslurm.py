#!/usr/bin/env python3
"""A stand-in for Slurm's client commands (sbatch, squeue, sacct, scontrol, scancel), for the
Slurm executor's scale benchmark (bench/slurm-sim/run.py): the commands read and write one
SQLite database ($FAKE_SLURM_DB) that bench/slurm-sim/cluster.py serves as N simulated nodes,
running each array task's script for real. Only what aorta calls is understood: the options
and `--format` strings of engine/slurm/src/lib.rs. Called through symlinks named after the
command (fake/sbatch -> ../fakeslurm.py)."""
import os
import sqlite3
import sys
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, name TEXT, script TEXT,
  output TEXT, chdir TEXT, throttle INTEGER, submitted REAL);
CREATE TABLE IF NOT EXISTS tasks (job INTEGER, task INTEGER, state TEXT, started REAL,
  ended REAL, PRIMARY KEY (job, task));
CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state);
"""


def db():
    con = sqlite3.connect(os.environ["FAKE_SLURM_DB"], timeout=60, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(SCHEMA)
    return con


def opt(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def sbatch(args):
    array = opt(args, "--array")
    lo_hi, _, throttle = array.partition("%")
    lo, hi = (int(x) for x in lo_hi.split("-"))
    if hi >= int(os.environ.get("FAKE_SLURM_MAX_ARRAY_SIZE", "1001")):
        print("sbatch: error: Batch job submission failed: Invalid job array specification", file=sys.stderr)
        return 1
    con = db()
    con.execute("BEGIN IMMEDIATE")
    cur = con.execute(
        "INSERT INTO jobs (name, script, output, chdir, throttle, submitted) VALUES (?,?,?,?,?,?)",
        (opt(args, "--job-name"), args[-1], opt(args, "--output"), opt(args, "--chdir"),
         int(throttle) if throttle else None, time.time()),
    )
    job = cur.lastrowid
    con.executemany(
        "INSERT INTO tasks (job, task, state) VALUES (?,?,'PENDING')",
        [(job, t) for t in range(lo, hi + 1)],
    )
    con.execute("COMMIT")
    print(job)
    return 0


def squeue(args):
    con = db()
    fmt = opt(args, "--format")
    jobs = opt(args, "--jobs")
    name = opt(args, "--name")
    if name is not None:
        for (job,) in con.execute("SELECT id FROM jobs WHERE name = ?", (name,)):
            print(job)
        return 0
    ids = [int(j) for j in jobs.split(",")] if jobs else None
    q = "SELECT job, task, state FROM tasks"
    if ids is not None:
        q += " WHERE job IN (%s)" % ",".join("?" * len(ids))
    rows = con.execute(q, ids or [])
    out = []
    if fmt == "%F|%K|%T":
        out = ["%d|%d|%s" % r for r in rows]
    else:
        out = ["%d_%d %s" % r for r in rows]
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    return 0


def scancel(args):
    con = db()
    con.execute("BEGIN IMMEDIATE")
    for a in args:
        if a.startswith("-"):
            continue
        job, _, task = a.partition("_")
        q = "UPDATE tasks SET state='CANCELLED', ended=? WHERE job=? AND state IN ('PENDING','RUNNING')"
        p = [time.time(), int(job)]
        if task:
            q += " AND task=?"
            p.append(int(task))
        con.execute(q, p)
    con.execute("COMMIT")
    return 0


def main():
    cmd = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if cmd == "sbatch":
        t0 = time.time()
        rc = sbatch(args)
        # How long the stand-in itself took, so the benchmark can tell aorta's part apart.
        with open(os.environ["FAKE_SLURM_DB"] + ".sbatch-seconds", "a") as f:
            f.write("%.6f\n" % (time.time() - t0))
        return rc
    if cmd == "squeue":
        return squeue(args)
    if cmd == "scancel":
        return scancel(args)
    if cmd == "sacct":
        return 0  # no accounting: silence, as on a cluster without slurmdbd
    if cmd == "scontrol":
        print("MaxArraySize            = %s" % os.environ.get("FAKE_SLURM_MAX_ARRAY_SIZE", "1001"))
        return 0
    print("fakeslurm: unknown command %s" % cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
