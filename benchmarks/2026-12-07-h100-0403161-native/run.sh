#!/bin/bash
# The native fronts on 0403161: one executor, one per core, one per core over a shared queue, beside the tokio fronts
# (run from the repository root, carrying .gl and .gpu).
set -u
cd "$(dirname "$0")/.."
cp .gpu/commits.txt $OUT/
nvidia-smi -L > $OUT/gpu.txt 2>&1
ROUNDS=3 REPS=9 BUDGET=400 MODES="staged-shares staged-tokio staged staged-cores staged-cores-queue" SIZES="16384 1024" TRACE=0 OUT=$OUT \
    timeout 450 bash benchmarks/tools/ab_h200.sh base=.gpu/tls > $OUT/ab.log 2>&1
echo "ab exit $?" >> $OUT/ab.log
