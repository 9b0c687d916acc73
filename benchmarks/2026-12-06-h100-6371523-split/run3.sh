#!/bin/bash
# The native executor's front (staged) with parts and compute queues: off, q4, s16, s16q4; 4 rounds, 16 KiB.
cd "$(dirname "$0")/.."
ROUNDS=4 REPS=9 BUDGET=300 MODES="staged" SIZES="16384" TRACE=0 OUT=$OUT \
  bash benchmarks/tools/ab_h200.sh off=.gpu/off q4=.gpu/q4 s16=.gpu/s16 s16q4=.gpu/s16q4
