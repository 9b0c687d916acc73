#!/bin/bash
# A/B of the new build (.gpu/tls, see commits.txt) against 0bd5ac7 (.gpu/tls-base) at 1 KiB and
# 16 KiB, then every target on the new build (run from the repository root, carrying .gl and .gpu).
set -u
cd "$(dirname "$0")/../.."
cp .gpu/commits.txt $OUT/
nvidia-smi -L > $OUT/gpu.txt 2>&1
nvidia-smi -q -d CLOCK > $OUT/clocks-before.txt 2>&1
mkdir -p $OUT/x
ROUNDS=3 REPS=9 BUDGET=150 ORDER=alternate MODES="staged-shares staged-tokio" SIZES="1024 16384" TRACE=0 OUT=$OUT/x \
    timeout 200 bash benchmarks/tools/ab_h200.sh base=.gpu/tls-base new=.gpu/tls > $OUT/ab-new.log 2>&1
echo "ab exit $?" >> $OUT/ab-new.log
mv $OUT/x/ab.tgz $OUT/ab-new.tgz; rmdir $OUT/x 2>/dev/null
OUT=$OUT timeout 390 bash benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
tail -2 $OUT/targets.log
