#!/usr/bin/env bash
# `aorta bisect` and `aorta reduce`'s searches on simulated flaky trials against the naive ones
# (engine/bisect/examples/bisect_sim.rs): wrong answers, probes and trials per search.
# The goals: ddmin within (n²+7n)/2 probes, range bisect within ⌈log2 n⌉ + 3 points, and under a
# flaky rate of 0.4 a false boundary in at most 5% of 10,000 runs.
#
#   bench/bisect/run.sh [--seeds 10000]
#
# CPU only, deterministic; the markdown table goes to stdout. The dev profile: a release build of
# the engine below the crate costs more minutes than the simulation.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec cargo run -p aorta-bisect --example bisect_sim -- "$@"
