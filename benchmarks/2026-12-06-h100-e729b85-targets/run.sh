#!/bin/bash
# Every target in one call (targets_gpu.sh) at the final commit, then the native front against
# 66447af (the abort flag in the task's header), alternating processes.
set -u
OUT=$OUT bash benchmarks/tools/targets_gpu.sh
mv $OUT/ab.tgz $OUT/targets-ab.tgz
ROUNDS=4 REPS=9 BUDGET=80 MODES="staged" SIZES="16384" TRACE=0 OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh new=.gpu/tls base=.gpu/tls-base
mv $OUT/ab.tgz $OUT/native.tgz
ls -la $OUT
