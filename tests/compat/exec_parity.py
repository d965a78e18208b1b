#!/usr/bin/env python3
"""Execution parity against the real AORTA 0.2.1 or 0.3.0 (pip package amd-aorta).

Runs the probe recipes in tests/compat/exec/ (RUNS) through `aorta sweep run` of AORTA 0.2.1
and of aorta, over one deterministic command (parity_cmd.py), and compares what a user reads:
the dry run's common lines; the cells, the baseline records, each cell's trial count,
pass/fail/error counts, stop_after note, top detectors and step-time source (matrix.json);
each trial's verdict, exit code, timeout flag, detector lists, capture, env bundle,
passthrough mode, failure type, retained files and stdout (result.json, the trial directory).

Every difference must be listed in KNOWN below, each entry under an id that
docs/compatibility.md explains; an entry that matches nothing any more is an error too, so
the list cannot go stale.

Usage: exec_parity.py AORTA_BIN   (run with the python that has amd-aorta 0.2.1 or 0.3.0 installed;
       AORTA_PARITY_KEEP=DIR keeps the run directories in DIR, which must not exist)
Exit 1 on any difference not in KNOWN (or a KNOWN entry that matched nothing).
"""
import fnmatch
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests/compat/exec"
DOC = ROOT / "docs/compatibility.md"
# run name -> (recipe in tests/compat/exec/, extra `sweep run` flags). The flags run overlays
# AORTA's probe flags on a recipe (§2.8): a tighter stop rule, a disable, file passthrough.
RUNS = {
    "verdicts": ("verdicts", []),
    "stop-after": ("stop-after", []),
    "stop-after-pass": ("stop-after-pass", []),
    "file-retain": ("file-retain", []),
    "differences": ("differences", []),
    "flags": ("stop-after", ["--stop-after-events", "1", "--max-trials", "3", "--disable-detector", "tier1:exit_nonzero",
                             "--env-passthrough-mode", "file", "--ticket", "PARITY-FLAGS"]),
}

# id (a `parity: <id>` line in docs/compatibility.md) -> the differences it covers, as
# (recipe, cell, fields) with globs; a field is `run.<key>`, `cell.<key>` or `trial.<key>`.
VERDICT = ("cell.passed_count", "cell.failed_count", "cell.error_count", "cell.top_failure_detector_id",
           "trial.verdict", "trial.failure_detectors_fired")
KNOWN = {
    "step-time-regex": [("*", "*", ("cell.step_time_source",))],
    "disables-echo": [("*", "*", ("trial.capture.disabled_detectors",))],
    "dry-run-trials": [("stop-after*", "-", ("run.dry_run.Dry run",)), ("flags", "-", ("run.dry_run.Dry run",))],
    "every-match": [("differences", "case_every_match-none", VERDICT + ("trial.capture.loss",))],
    "separate-streams": [("differences", "case_streams-none", VERDICT + (
        "cell.top_warn_detector_id", "trial.warn_detectors_fired", "trial.capture.rank"))],
    "whole-log": [("differences", "case_late_traceback-none", VERDICT)],
    "hang-cpu-veto": [("differences", "case_spin-none", VERDICT)],
    # Only where aorta's value is AORTA's plus its own files (see without_extras).
    "probe-env-sh": [("*", "*", ("trial.files", "trial.capture.retention"))],
    "traced-inputs": [("*", "*", ("trial.files", "trial.capture.retention"))],
}

# The files aorta writes into a trial directory that AORTA did not, by parity id.
EXTRAS = {"probe-env-sh": "probe.env.sh", "traced-inputs": "inputs.json"}


def without_extras(value):
    """aorta's value with its own files taken out: its files list, or its retention stamp's
    deleted list (freed_bytes then differs by those files' sizes, so it is left out)."""
    if isinstance(value, list):
        return [f for f in value if f not in EXTRAS.values()]
    if isinstance(value, dict) and "deleted" in value:
        return {**value, "deleted": without_extras(value["deleted"]), "freed_bytes": None}
    return value


def names(value):
    """The file names in a files list or a retention stamp's deleted list."""
    if isinstance(value, dict):
        value = value.get("deleted") or []
    return value if isinstance(value, list) else []


def drop_bytes(value):
    return {**value, "freed_bytes": None} if isinstance(value, dict) and "freed_bytes" in value else value


# A KNOWN id whose difference must also pass a check on the two values.
KNOWN_CHECK = {
    kid: (lambda f: lambda aorta, AORTA: f in names(aorta) and without_extras(aorta) == drop_bytes(AORTA))(f)
    for kid, f in EXTRAS.items()
}


def run(tool, argv, name, tmp):
    recipe, flags = RUNS[name]
    # Each tool runs in a directory of its own, so the command line is the same for both.
    cwd = tmp / tool
    cwd.mkdir(parents=True)
    out = cwd / "out"
    cmd = argv + [
        "sweep", "run",
        "--recipe", str(HERE / f"{recipe}.yaml"),
        "--output", str(out),
        "--mitigations-file", str(HERE / "sidecar.json"),
    ] + flags
    if tool == "aorta":
        cmd += ["--store", str(tmp / tool / "store"), "-j", "1"]
    cmd += ["--", sys.executable, str(HERE.parent / "parity_cmd.py"), "state"]
    dry = subprocess.run(cmd[:-4] + ["--dry-run"] + cmd[-4:], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if dry.returncode != 0:
        raise SystemExit(f"{tool} --dry-run failed on {recipe} (exit {dry.returncode}):\n{dry.stdout}\n{dry.stderr}")
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:  # failing trials are results: both tools exit 0
        raise SystemExit(f"{tool} failed on {recipe} (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
    dirs = [d for d in out.iterdir() if (d / "matrix.json").is_file()] if out.is_dir() else []
    if len(dirs) != 1:
        raise SystemExit(f"{tool} left {len(dirs)} run directories for {recipe}:\n{p.stdout}\n{p.stderr}")
    return dirs[0], dry_run_view(dry.stdout)


# The lines of AORTA's probe dry run that aorta prints too (aorta prints more besides).
DRY_RUN_LINES = ("Dry run (probe):", "Argv (forwarded byte-for-byte):", "Env-passthrough mode:", "Disabled detectors:")


def dry_run_view(text):
    lines = text.splitlines()
    return {p.split(" (")[0].rstrip(":"): next((l for l in lines if l.startswith(p)), None) for p in DRY_RUN_LINES}


def trial_view(d):
    r = json.loads((d / "result.json").read_text())
    return {
        "verdict": r["verdict"],
        "exit_code": r["exit_code"],
        "timed_out": r["timed_out"],
        "failure_detectors_fired": r["failure_detectors_fired"],
        "error_detectors_fired": r["error_detectors_fired"],
        "warn_detectors_fired": r["warn_detectors_fired"],
        "capture": r.get("capture"),
        "env": r.get("env"),
        "env_passthrough_mode": r.get("env_passthrough_mode"),
        "failure_type": r.get("failure_type"),
        "has_error_message": "error_message" in r or "error_message" in (r.get("capture") or {}),
        "files": sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()),
        # What the command printed (it echoes probe.env in file mode), or its digest when long.
        "stdout": text_or_digest(d / "stdout.log"),
    }


def text_or_digest(path):
    if not path.is_file():
        return None
    data = path.read_bytes()
    return data.decode(errors="replace") if len(data) <= 4096 else "sha256:" + hashlib.sha256(data).hexdigest()


def view(run):
    """What the comparison reads from one run: (run-level fields, {cell: {field: value}})."""
    run_dir, dry = run
    m = json.loads((run_dir / "matrix.json").read_text())
    top = {f"dry_run.{k}": v for k, v in dry.items()}
    top |= {
        "cells": [c["name"] for c in m["cells"]],
        "trials_per_cell": m["trials_per_cell"],
        "baseline_cell": m["baseline_cell"],
        "baseline_cell_configured": m["confound"]["baseline_cell_configured"],
        "stop_after": m["stop_after"],
    }
    cells = {}
    for c in m["cells"]:
        cells[c["name"]] = {
            "trials": len(c["trial_paths"]),
            "passed_count": c["passed_count"],
            "failed_count": c["failed_count"],
            "error_count": c["error_count"],
            "stop_after_note": c["stop_after_note"],
            "top_failure_detector_id": c["top_failure_detector_id"],
            "top_warn_detector_id": c["top_warn_detector_id"],
            "step_time_source": c["step_time_source"],
        }
        tdirs = sorted(run_dir.joinpath(c["name"]).glob("trial_*"), key=lambda p: int(p.name[6:]))
        cells[c["name"]]["trial_dirs"] = [p.name for p in tdirs]
        cells[c["name"]]["trials_seen"] = {p.name: trial_view(p) for p in tdirs}
    return top, cells


def differences(recipe, rs, py):
    """(recipe, cell, field, aorta value, AORTA value) for each disagreement."""
    (rs_top, rs_cells), (py_top, py_cells) = rs, py
    found = []
    for k in py_top:
        if rs_top[k] != py_top[k]:
            found.append((recipe, "-", f"run.{k}", rs_top[k], py_top[k]))
    for name in py_cells:
        if name not in rs_cells:
            continue  # the cell lists differ: reported above
        a, b = rs_cells[name], py_cells[name]
        for k, v in b.items():
            if k != "trials_seen" and a[k] != v:
                found.append((recipe, name, f"cell.{k}", a[k], v))
        for t, pv in b["trials_seen"].items():
            rv = a["trials_seen"].get(t)
            if rv is None:
                continue  # the trial_dirs lists differ: reported above
            for f, y in pv.items():
                if f == "capture":  # key by key, so each difference names its capture key
                    for ck in sorted(set(y or {}) | set(rv[f] or {})):
                        if (rv[f] or {}).get(ck) != (y or {}).get(ck):
                            found.append((recipe, name, f"{t}.capture.{ck}", (rv[f] or {}).get(ck), (y or {}).get(ck)))
                elif rv[f] != y:
                    found.append((recipe, name, f"{t}.{f}", rv[f], y))
    return found


def known_id(diff):
    recipe, cell, field = diff[:3]
    field = re.sub(r"^trial_\d+\.", "trial.", field)
    for kid, entries in KNOWN.items():
        for r, c, fields in entries:
            if fnmatch.fnmatchcase(recipe, r) and fnmatch.fnmatchcase(cell, c) and any(fnmatch.fnmatchcase(field, f) for f in fields):
                if kid in KNOWN_CHECK and not KNOWN_CHECK[kid](diff[3], diff[4]):
                    continue
                return kid
    return None


def main():
    aorta_bin = os.path.abspath(sys.argv[1])
    # AORTA's console script, beside the python that runs this file (the venv's bin/), run by
    # that python: its #! line names the path the venv was created at, which a venv cached in
    # .cache/ and reused by another clone (.ci/clean-clone --cache) no longer has.
    py_aorta = [sys.executable, str(Path(sys.executable).parent / "aorta")]
    doc = DOC.read_text()
    failures = [f"KNOWN id '{k}' has no `parity: {k}` entry in docs/compatibility.md" for k in KNOWN if f"parity: {k}`" not in doc]
    # AORTA_PARITY_KEEP=DIR keeps both tools' run directories there, for a look after a failure.
    keep = os.environ.get("AORTA_PARITY_KEEP")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(keep or tmp)
        jobs = [(tool, argv, r) for r in RUNS for tool, argv in (("aorta", [aorta_bin]), ("AORTA", py_aorta))]
        with ThreadPoolExecutor(max_workers=4) as pool:
            dirs = list(pool.map(lambda j: run(j[0], j[1], j[2], tmp / j[2]), jobs))
        runs = {(tool, r): d for (tool, _, r), d in zip(jobs, dirs)}
        used, trials = {}, 0
        for r in RUNS:
            rs, py = view(runs[("aorta", r)]), view(runs[("AORTA", r)])
            trials += sum(len(c["trial_dirs"]) for c in py[1].values())
            for d in differences(r, rs, py):
                kid = known_id(d)
                if kid is None:
                    failures.append(f"{d[0]} / {d[1]} / {d[2]}:\n      aorta: {json.dumps(d[3])}\n      AORTA: {json.dumps(d[4])}")
                else:
                    used.setdefault(kid, []).append(d)
        for kid, ds in used.items():
            d = ds[0]
            print(f"  known [{kid}] {len(ds)} difference(s), e.g. {d[0]} / {d[1]} / {d[2]}: aorta {json.dumps(d[3])}, AORTA {json.dumps(d[4])}")
        failures += [f"KNOWN id '{k}' matched no difference: remove it (and its page entry) or fix the matcher" for k in KNOWN if k not in used]
    print(f"ran {len(RUNS)} runs ({trials} AORTA trials) through AORTA {importlib.metadata.version('amd-aorta')} and aorta: "
          f"{'no unlisted difference' if not failures else f'{len(failures)} problem(s)'}")
    for f in failures:
        print("  MISMATCH " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
