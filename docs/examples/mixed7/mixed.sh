#!/usr/bin/env bash
# A stand-in for a job with an intermittent stream race (fails about half the time), to show a
# mixed matrix: serialising launches fixes it, one connection hides it by slowing every step,
# disabling P2P breaks the job outright, the rest change nothing.
set -u
steps=3
delay=0.02
[ "${CUDA_DEVICE_MAX_CONNECTIONS:-}" = "1" ] && delay=0.08
for i in $(seq 1 $steps); do
  sleep "$delay"
  echo "step $i/$steps time_ms=$(awk "BEGIN{print $delay*1000 + ($RANDOM % 5)}")"
done
if [ "${NCCL_P2P_DISABLE:-0}" = "1" ]; then
  echo "NCCL WARN: P2P disabled, transport failed: unhandled system error" >&2; exit 1
fi
if [ "${CUDA_LAUNCH_BLOCKING:-0}" != "1" ]; then
  limit=50
  [ "${CUDA_DEVICE_MAX_CONNECTIONS:-}" = "1" ] && limit=5
  if [ $((RANDOM % 100)) -lt $limit ]; then
    echo "RuntimeError: CUDA error: an illegal memory access was encountered" >&2; exit 1
  fi
fi
echo "done"
