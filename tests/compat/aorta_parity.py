#!/usr/bin/env python3
"""Recipe parity against the real AORTA 0.2.1 or 0.3.0 (pip package amd-aorta).

For every shipped recipe and every bad-recipe fixture, load it with AORTA's own loader and
with `aorta build --dry-run --json`, and compare: accepted or rejected, cell names in order,
each cell's resolved env vars, and the baseline cell. aorta's NVIDIA mitigations are not in
AORTA's registry, so AORTA gets them through a generated sidecar file.

Usage: aorta_parity.py AORTA_BIN   (run with the python that has amd-aorta 0.2.1 or 0.3.0 installed)
Exit 1 on any difference not listed in DELIBERATE (whose ids docs/compatibility.md explains).
"""
import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from aorta.registry.mitigations import get_mitigation, load_mitigations
from aorta.triage.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]

# Where aorta is stricter than AORTA on purpose: fixture -> (id, why). Each id is a
# `parity: <id>` entry of docs/compatibility.md.
DELIBERATE = {
    "extra-env-bad-name.yaml": ("load-env-names", "aorta checks env var names at load; AORTA only when a trial runs"),
    "no-baseline.yaml": ("load-baseline", "AORTA's loader accepts it but its dry-run and run pre-flight reject it; aorta rejects at load"),
    "duplicate-key.yaml": ("load-duplicate-key", "PyYAML keeps the last of two equal keys; aorta refuses the recipe naming both lines"),
    "probe-reserved-group.yaml": ("load-reserved-group", "a named group called like a capture key overwrote the classifier's own entry in AORTA's one dict; aorta refuses the name at load"),
}
# Differences with one release only (the fixtures of tests/fixtures/aorta-0.3.0 use its new keys).
DELIBERATE_BY_VERSION = {
    "0.2.1": {
        name: ("load-0.3.0-keys", "a key or collector AORTA 0.3.0 added (trial_isolation, a recipe-wide extra_env, proton, collect in a probe recipe): aorta follows 0.3.0")
        for name in ["triage-extra-env-isolation.yaml", "triage-in-process.yaml", "triage-collect-proton.yaml", "probe-collect-empty.yaml"]
    },
    "0.3.0": {
        "probe-collect-rocprof.yaml": ("load-probe-collect", "AORTA 0.3.0 wraps a probe's command in rocprof; aorta wraps it only in ncu or torch_profiler, and refuses a ROCm collector saying how to profile instead"),
    },
}
VERSION = importlib.metadata.version("amd-aorta")
DELIBERATE = {**DELIBERATE, **DELIBERATE_BY_VERSION.get(VERSION, {})}
DOC = ROOT / "docs/compatibility.md"


def aorta_rs(aorta_bin, path):
    out = subprocess.run([aorta_bin, "build", str(path), "--dry-run", "--json"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[:3]
    plan = json.loads(out.stdout)
    cells = [(c["name"], {e["key"]: e["value"] for e in c["env"]}) for c in plan["cells"]]
    return {"cells": cells, "baseline": plan["baseline_cell"]}, None


def aorta_py(path, sidecar):
    try:
        r = load_recipe(path, sidecar_files=(sidecar,))
    except Exception as e:  # noqa: BLE001 - any rejection counts
        return None, f"{type(e).__name__}: {e}"
    cells = []
    for c in r.cells:
        if r.probe_extras is not None:
            env = dict(r.probe_extras.cell_envs.get(c.name, {}))
        else:
            env = {}
            for m in c.mitigations:
                env.update(get_mitigation(m, extra_files=[sidecar]))
            # 0.3.0: the recipe's extra_env, then the cell's own.
            env.update(getattr(r, "extra_env", {}))
            env.update(c.extra_env)
        cells.append((c.name, env))
    return {"cells": cells, "baseline": r.confound.baseline_cell}, None


def main():
    aorta_bin = sys.argv[1]
    listed = json.loads(subprocess.run([aorta_bin, "mitigations", "list", "--json"], capture_output=True, text=True, check=True).stdout)
    aorta_names = set(load_mitigations())
    extra = {m["name"]: m["env"] for m in listed if m["name"] not in aorta_names}
    with tempfile.TemporaryDirectory() as tmp:
        sidecar = Path(tmp) / "aorta-rs-builtins.json"
        sidecar.write_text(json.dumps({"version": 1, "mitigations": extra}))
        files = (
            sorted((ROOT / "recipes").glob("*.yaml"))
            + sorted((ROOT / "tests/fixtures/bad-recipes").iterdir())
            + sorted((ROOT / "tests/fixtures/aorta-0.3.0").iterdir())
        )
        doc = DOC.read_text()
        ids = {kid for d in [DELIBERATE, *DELIBERATE_BY_VERSION.values()] for kid, _ in d.values()}
        failures = [f"DELIBERATE id '{kid}' has no `parity: {kid}` entry in docs/compatibility.md" for kid in sorted(ids) if f"parity: {kid}`" not in doc]
        checked = 0
        for f in files:
            checked += 1
            rs, rs_err = aorta_rs(aorta_bin, f.relative_to(ROOT))
            py, py_err = aorta_py(f, sidecar)
            name = f.name
            if (rs is None) != (py is None):
                verdict = f"aorta {'rejects' if rs is None else 'accepts'}, AORTA {'rejects' if py is None else 'accepts'} ({py_err or rs_err})"
                if name in DELIBERATE:
                    kid, why = DELIBERATE[name]
                    print(f"  deliberate [{kid}] {name}: {verdict} — {why}")
                else:
                    failures.append(f"{name}: {verdict}")
                continue
            if rs is None:
                continue
            if rs["cells"] != py["cells"]:
                failures.append(f"{name}: cells differ\n    aorta: {rs['cells']}\n    AORTA: {py['cells']}")
            if py["baseline"] is not None and py["baseline"] != rs["baseline"]:
                failures.append(f"{name}: baseline {rs['baseline']} vs AORTA {py['baseline']}")
        print(f"checked {checked} recipes against AORTA {VERSION}: {checked - len(failures)} agree")
        for f in failures:
            print("  MISMATCH " + f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
