#!/usr/bin/env bash
set -u
OUT=${OUT:-/tmp/o}
nvidia-smi -L > $OUT/gpu-name.txt 2>&1
ROUNDS=3 REPS=9 BUDGET=200 MODES="staged-shares" SIZES="16384 1024" TRACE=1 OUT=$OUT \
  bash benchmarks/tools/ab_h200.sh base=.gpu/tls d3=.gpu/d3 q2d3=.gpu/q2d3 q4d5=.gpu/q4d5 chain=.gpu/tls-chain
