#!/usr/bin/env python3
"""The simulated cluster behind fakeslurm.py: NODES nodes of one task slot each, serving the
PENDING tasks of $FAKE_SLURM_DB in submission order (an array's `%N` throttle respected),
running each task's batch script for real (`sh SCRIPT` with SLURM_ARRAY_JOB_ID and
SLURM_ARRAY_TASK_ID, output to the array's --output with %a filled in), marking it RUNNING,
then COMPLETED or FAILED by its exit status. Stops when the file STOP exists.

    cluster.py NODES STOP
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakeslurm  # noqa: E402


def main():
    nodes, stop = int(sys.argv[1]), sys.argv[2]
    con = fakeslurm.db()
    running = {}  # Popen -> (job, task)
    while not os.path.exists(stop):
        done = [(p, jt) for p, jt in running.items() if p.poll() is not None]
        if done:
            now = time.time()
            con.execute("BEGIN IMMEDIATE")
            for p, (job, task) in done:
                state = "COMPLETED" if p.returncode == 0 else "FAILED"
                con.execute(
                    "UPDATE tasks SET state=?, ended=? WHERE job=? AND task=? AND state='RUNNING'",
                    (state, now, job, task),
                )
                del running[p]
            con.execute("COMMIT")
        free = nodes - len(running)
        if free > 0:
            rows = con.execute(
                "SELECT t.job, t.task, j.script, j.output, j.chdir, j.throttle FROM tasks t "
                "JOIN jobs j ON j.id = t.job WHERE t.state='PENDING' ORDER BY t.job, t.task LIMIT ?",
                (free,),
            ).fetchall()
            per_job = {}
            for job, task, script, output, chdir, throttle in rows:
                if throttle:
                    if job not in per_job:
                        per_job[job] = con.execute(
                            "SELECT count(*) FROM tasks WHERE job=? AND state='RUNNING'", (job,)
                        ).fetchone()[0]
                    if per_job[job] >= throttle:
                        continue
                    per_job[job] += 1
                env = dict(os.environ, SLURM_ARRAY_JOB_ID=str(job), SLURM_ARRAY_TASK_ID=str(task),
                           SLURM_JOB_ID=str(job))
                log = open(output.replace("%a", str(task)), "wb")
                p = subprocess.Popen(["sh", script], cwd=chdir, env=env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT)
                log.close()
                running[p] = (job, task)
                con.execute(
                    "UPDATE tasks SET state='RUNNING', started=? WHERE job=? AND task=?",
                    (time.time(), job, task),
                )
        # A cancelled task's process is stopped.
        if running:
            cancelled = {
                (j, t)
                for j, t in con.execute("SELECT job, task FROM tasks WHERE state='CANCELLED' AND started IS NOT NULL")
            }
            for p, jt in list(running.items()):
                if jt in cancelled:
                    p.kill()
                    p.wait()
                    del running[p]
        time.sleep(0.02)


if __name__ == "__main__":
    main()
