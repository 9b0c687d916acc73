#!/bin/bash
# Split flushes, second A/B: off, s16q4 (split 16 MiB, 4 compute queues), q4 (4 compute queues alone), s16 (split alone).
cd "$(dirname "$0")/.."
nvidia-smi -q -d CLOCK > $OUT/clocks-before.txt 2>&1
ROUNDS=4 REPS=9 BUDGET=400 MODES="staged-shares staged staged-tokio" SIZES="16384" TRACE=0 OUT=$OUT \
  bash benchmarks/tools/ab_h200.sh off=.gpu/off s16q4=.gpu/s16q4 q4=.gpu/q4 s16=.gpu/s16
