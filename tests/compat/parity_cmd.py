#!/usr/bin/env python3
"""The one deterministic command the execution parity test (exec_parity.py) runs under both
AORTA 0.2.1 and aorta. What it does depends only on the cell's env (PARITY_CASE, set by the
sidecar mitigations in exec-sidecar.json) and on how many times it already ran for this cell
(a counter file in STATE_DIR, so trial N of a cell does the same thing under both tools; both
run a cell's trials one after another).

Usage: parity_cmd.py STATE_DIR
"""
import fcntl
import os
import resource
import signal
import sys
import time
from pathlib import Path


def next_run(state_dir, cell):
    """0 for this cell's first trial, 1 for its second, ..."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / f"{cell}.count", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read() or 0)
        f.seek(0)
        f.truncate()
        f.write(str(n + 1))
    return n


def out(line):
    print(line, flush=True)


def err(line):
    print(line, file=sys.stderr, flush=True)


def main():
    case = os.environ.get("PARITY_CASE", "ok")
    diag = os.environ.get("PARITY_DIAG", "none")
    n = next_run(Path(sys.argv[1]), f"{case}-{diag}")
    # A signal must not leave a core file behind (tier1:coredump looks for one).
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    out(f"parity case={case} diag={diag} run={n}")
    for step in range(3):
        out(f"step {step} took {10 + step}.5 ms")
    env_file = os.environ.get("AORTA_ENV_FILE")
    if env_file:
        # file passthrough mode: echo what the wrapper would read, and leave artifacts of
        # every retention class beside probe.env (the trial directory).
        out("probe.env: " + Path(env_file).read_text().replace("\n", " ").strip())
        trial_dir = Path(env_file).parent
        (trial_dir / "heavy.bin").write_bytes(b"x" * 1000)
        (trial_dir / "stats.summary.json").write_text('{"ok": true}\n')
    if case == "exit3":
        sys.exit(3)
    if case in ("segv", "abrt", "term"):
        sig = {"segv": signal.SIGSEGV, "abrt": signal.SIGABRT, "term": signal.SIGTERM}[case]
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    if case == "traceback":
        err("Traceback (most recent call last):")
        err('  File "train.py", line 1, in <module>')
        err("RuntimeError: parity")
    if case == "sleep":
        time.sleep(60)
    if case == "vram_hi":
        out("vram_used_mib=900 rank=3")
    if case == "vram_lo":
        out("vram_used_mib=100 rank=1")
    if case == "warn":
        out("WARNING: slow allreduce on rank 2")
    if case == "flaky" and n % 2 == 1:
        out("loss is NaN")
    if case == "every_match":
        # Only the third match satisfies `float(capture['loss']) > 9`.
        for loss in ("1.0", "2.0", "12.5"):
            out(f"loss={loss}")
    if case == "streams":
        # A text that spans the seam between stdout and stderr, a capture group set from each
        # stream, and a warn pattern on each stream.
        out("local_rank=2")
        out("WARN-B")
        out("BEGIN")
        err("END")
        err("host_rank=7")
        err("WARN-A")
        return  # BEGIN stays stdout's last line
    if case == "late_traceback":
        # 11 MiB of output, then a traceback: past AORTA's 10 MiB read limit.
        line = "x" * 1023 + "\n"
        sys.stdout.write(line * (11 * 1024))
        out("Traceback (most recent call last):")
    if case == "spin":
        # Silent and busy on the CPU until the trial's timeout.
        while True:
            pass
    if case == "never_done":
        return
    out("PARITY DONE")


if __name__ == "__main__":
    main()
