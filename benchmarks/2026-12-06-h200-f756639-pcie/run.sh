#!/bin/bash
# Heavy flushes on threads of their own (tls-ft) against ceaeece (tls), 10,000 x 16 KiB, four
# alternating rounds; bench_pcie first where it has not run yet. Run as .gpu/run.sh from the
# repository root, carrying .gl and .gpu, with the stripped binaries in .gpu (tls built at ceaeece,
# pcie at f756639, tls-ft at the branch flush-threads).
set -u
cd "$(dirname "$0")/.."
nvidia-smi -L > $OUT/gpu.txt 2>&1
if [ "${PCIE:-1}" = 1 ]; then
    mkdir -p $OUT/pcie
    q="--query-gpu=timestamp,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"
    nvidia-smi $q --format=csv,noheader -lms 100 > $OUT/pcie/link-100ms.csv 2>&1 &
    s=$!
    timeout 60 .gpu/pcie --out $OUT/pcie > $OUT/pcie/out.txt 2>&1
    echo "pcie exit $?" >> $OUT/pcie/out.txt
    kill $s
    lscpu > $OUT/pcie/lscpu.txt 2>&1
fi
ROUNDS=4 REPS=9 BUDGET=300 MODES="staged-shares staged-tokio" SIZES="16384" TRACE=0 ORDER=alternate OUT=$OUT \
    timeout 420 bash benchmarks/tools/ab_h200.sh base=.gpu/tls ft=.gpu/tls-ft > $OUT/ab.log 2>&1
echo "ab exit $?" >> $OUT/ab.log
