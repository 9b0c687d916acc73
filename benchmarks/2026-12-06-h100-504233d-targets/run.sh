#!/bin/bash
# The device call of 2026-12-06 (run from the repository root with the binaries built here and
# carried in .gpu, with .gl). 1) base (0f26a40) / step (caa4d82: the long-record path boxed, item and wait sharing their
#    bytes) / task (504233d: the example's native tasks hold only their mode's future), the native
#    and tokio fronts at 16 KiB, four rounds, order reversed in even rounds. 2) the targets on task.
set -u
cd "$(dirname "$0")/.."
ROUNDS=4 REPS=9 BUDGET=140 ORDER=alternate MODES="staged staged-tokio" SIZES="16384" TRACE=0 OUT=$OUT \
    timeout 180 benchmarks/tools/ab_h200.sh base=.gpu/tls-base step=.gpu/tls-step task=.gpu/tls-task > $OUT/ab.log 2>&1
echo "ab exit $?" >> $OUT/ab.log
mkdir -p $OUT/first && mv $OUT/ab.tgz $OUT/first/abc.tgz
OUT=$OUT timeout 360 benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
mv $OUT/first/abc.tgz $OUT/abc.tgz; rmdir $OUT/first
