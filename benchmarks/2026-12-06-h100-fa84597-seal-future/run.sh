#!/bin/bash
# The device call's script (run from the repository root; `.gpu/tls-base` built at 7d6d866,
# `.gpu/tls-new` at fa84597; carry `.gl` and `.gpu`).
set -u
cd "$(dirname "$0")/.."
ROUNDS=4 REPS=9 BUDGET=330 MODES="staged staged-tokio staged-shares" SIZES="16384 1024" TRACE=0 OUT=$OUT \
    timeout 420 benchmarks/tools/ab_h200.sh base=.gpu/tls-base new=.gpu/tls-new > $OUT/ab.log 2>&1
echo "ab exit $?" >> $OUT/ab.log
