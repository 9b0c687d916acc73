#!/bin/bash
# The device call of 2026-12-06 (run from the repository root, carrying .gl and .gpu, with
# .gpu/tls-base built at 040c085 and .gpu/tls and .gpu/bt at b65cea3: a heavy flush cut into
# parts without moving its items, and command buffers prepared when a queue is built): A/B at
# 10,000 x 16 KiB, builds alternating, one traced process each; then every target on b65cea3.
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu-before.txt 2>&1
ROUNDS=4 ORDER=alternate MODES="staged-shares staged" SIZES="16384" REPS=9 BUDGET=190 TRACE=1 OUT=$OUT \
    timeout 280 benchmarks/tools/ab_h200.sh base=.gpu/tls-base new=.gpu/tls > $OUT/ab-pair.log 2>&1
echo "ab exit $?" >> $OUT/ab-pair.log
[ -f $OUT/ab.tgz ] && mv $OUT/ab.tgz $OUT/ab-pair.tgz
OUT=$OUT timeout 290 benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
