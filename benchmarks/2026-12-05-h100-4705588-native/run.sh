#!/usr/bin/env bash
# A/B of the native executor's per-task changes: tls_pipeline (ab_h200) and bench_tasks, then one
# traced `staged` process per build at 16 KiB.
set -u
OUT=${OUT:-/tmp/o}
ROUNDS=3 REPS=9 BUDGET=200 MODES="staged staged-tokio staged-shares" SIZES="16384 1024" TRACE=0 OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh base=.gpu/tls-base new=.gpu/tls-new
X=$OUT/x; mkdir -p $X
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cp .gpu/commits.txt .gpu/ab1.sh $X/
for r in 1 2; do
  for b in base new; do
    timeout 40 .gpu/bt-$b --modes raw-batch,executor,tokio --tasks 1,1000 --reps 15 > $X/bt-$b-$r.txt 2>&1
  done
done
for b in base new; do
  VKASYNC_TRACE=$X/n-$b.json timeout 60 .gpu/tls-$b --connections 10000 --records 1 --record-size 16384 --reps 4 --modes staged > $X/n-$b.txt 2>&1
done
gzip $X/*.json
(cd $OUT && tar czf x.tgz x && rm -rf x)
