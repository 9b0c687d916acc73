#!/bin/bash
# The device call's script (run from the repository root with `.gpu/tls` and `.gpu/bt` built at
# fa84597, carrying `.gl` and `.gpu`): the targets, then four more alternating rounds of the
# native and tokio fronts at 16 KiB.
set -u
cd "$(dirname "$0")/.."
OUT=$OUT timeout 330 benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
mkdir -p $OUT/first && mv $OUT/ab.tgz $OUT/first/
ROUNDS=4 REPS=9 BUDGET=100 MODES="staged-tokio staged" SIZES=16384 TRACE=0 OUT=$OUT \
    timeout 150 benchmarks/tools/ab_h200.sh base=.gpu/tls > $OUT/ab2.log 2>&1
echo "ab2 exit $?" >> $OUT/ab2.log
mv $OUT/ab.tgz $OUT/ab2.tgz; mv $OUT/first/ab.tgz $OUT/ab.tgz; rmdir $OUT/first
