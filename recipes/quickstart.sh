#!/usr/bin/env bash
# A stand-in for a flaky GPU job, runnable on any machine: it "crashes" the way an
# unsynchronised CUDA stream race does, unless CUDA_LAUNCH_BLOCKING=1 serialises launches.
# `aorta build //recipes:quickstart` runs it across the quickstart matrix.
set -u
echo "step 1/3: loading model"
echo "step 2/3: forward pass"
if [ "${CUDA_LAUNCH_BLOCKING:-0}" != "1" ]; then
  echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2
  exit 1
fi
echo "step 3/3: loss=0.6931"
echo "done"
