#!/bin/bash
# A stand-in for a job whose collective fails under NCCL's Ring algorithm 40% of the time.
if [ "${NCCL_ALGO:-}" = Ring ] && [ $((RANDOM % 10)) -lt 4 ]; then
  echo "NCCL WARN: unhandled system error (stand-in)" >&2; exit 1
fi
echo ok
