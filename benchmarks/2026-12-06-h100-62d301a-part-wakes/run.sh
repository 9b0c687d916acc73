#!/bin/bash
# The device call of 2026-12-06 (run from the repository root, carrying .gl and .gpu, with
# .gpu/tls-base built at f51688c and .gpu/tls at 62d301a's code: a split flush's lane tasks woken
# at their own part's value): staged-shares and staged-tokio at 10,000 x 16 KiB, builds
# alternating, one traced process each.
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu-before.txt 2>&1
ROUNDS=4 ORDER=alternate MODES="staged-shares staged-tokio" SIZES="16384" REPS=9 BUDGET=200 TRACE=1 OUT=$OUT \
    timeout 300 benchmarks/tools/ab_h200.sh base=.gpu/tls-base parts=.gpu/tls > $OUT/ab.log 2>&1
echo "ab exit $?" >> $OUT/ab.log
