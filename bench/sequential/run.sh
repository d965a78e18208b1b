#!/usr/bin/env bash
# `trials: auto` (engine/report/src/sequential.rs) against the fixed-N design, by simulation.
# The goal: ≤ 40% of the fixed-N design's trials at a false-fix rate ≤ 5% for the whole run.
#
#   bench/sequential/run.sh [--seeds 10000] [--cap 64] [--seed 1] [--verify SEEDS] [--no-variants]
#
# Per baseline failure rate p0 ∈ {1.0, 0.7, 0.4, 0.2}: a baseline, a real fix (rate 0), a partial
# fix (p0/2), five duds (p0) and a speed confound (rate 0, 1.5× step time), M = 8, confidence
# 0.95. Measures, over SEEDS simulated runs per row: the sequential design's mean and 95th
# percentile total trials (lockstep rounds of `plan`, the baseline included), its false-fix,
# missed-fix and any-worse rates, the smallest fixed N (report rule: two-sided Fisher, Holm)
# with at least its real-fix power, and the ratio of the two designs' trials. Also the same
# figures for variants of the rules (first look, looks' spacing, futility threshold). CPU only,
# deterministic given --seed; the markdown tables go to stdout. ~1-2 minutes on one core.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec cargo run --release -p aorta-report --example sequential_sim -- "$@"
