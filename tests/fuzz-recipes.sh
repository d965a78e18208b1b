#!/usr/bin/env bash
# Fuzzes recipe loading through the real binary (issue #18): a structured mutator over recipes/
# and tests/fixtures/ makes ~2,000 cases (deletions, type swaps, huge numbers, deep nesting,
# anchors and aliases, long lines, invalid UTF-8, …), each run as
# `aorta sweep run --recipe CASE --dry-run` within 10 s and 512 MiB of address space.
# Fails on any panic, overrun, signal or exit code other than 0/2, and on the issue's
# reproductions not giving a clear exit-2 error. Settings and reproduction of one case:
# engine/recipe/tests/fuzz_cli.rs (AORTA_FUZZ_CASES, _SEED, _CASE, _JOBS, _TIMEOUT_S, _MEM_MIB).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v prlimit >/dev/null || { echo "fuzz-recipes: prlimit (util-linux) is required for the memory bound" >&2; exit 2; }
cargo build --quiet --locked --bin aorta
export AORTA_BIN="${AORTA_BIN:-$PWD/target/debug/aorta}"
exec cargo test --quiet --locked -p aorta-recipe --test fuzz_cli -- --ignored --nocapture
