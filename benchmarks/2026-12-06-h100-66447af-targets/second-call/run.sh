#!/bin/bash
# Every target in one call (targets_gpu.sh, 66447af), then the one-hold change against its parent:
# the native front at 16 KiB and the mix at T = 1,000, alternating processes.
set -u
OUT=$OUT bash benchmarks/tools/targets_gpu.sh
mv $OUT/ab.tgz $OUT/targets-ab.tgz
ROUNDS=4 REPS=9 BUDGET=80 MODES="staged" SIZES="16384" TRACE=0 OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh new=.gpu/tls base=.gpu/tls-base
mv $OUT/ab.tgz $OUT/native.tgz
export T=$OUT/t; mkdir -p $T
. benchmarks/tools/gpu_env.sh
clocks_start $T/clocks-50ms.csv
cp .gpu/builds.txt $T/
timeout 70 bash -c '
for i in 1 2 3 4; do for b in bt bt-base; do
  .gpu/$b --modes raw-batch,executor --tasks 1,1000 --reps 15 --out $T/$b-$i > $T/$b-$i.txt 2>&1
done; done'
[ -n "$clocks" ] && kill $clocks
cd $OUT && tar czf t.tgz t && rm -rf t
ls -la $OUT
