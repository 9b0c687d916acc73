#!/usr/bin/env bash
# A/B: new (26a00b9, the lone-spin fix) against f2 (small coalesced groups wait for an idle
# GPU) and d1 (new at pipeline depth 1); cq = f2 with copy queues. Then the defaults of f2.
set -u
OUT=${OUT:-/tmp/o}
end=$(($(date +%s) + ${LIMIT:-200}))
ROUNDS=2 BUDGET=100 MODES="staged-shares staged-tokio" TRACE=0 SIZES="1024 16384" OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh new=.gpu/tls-new f2=.gpu/tls-f2 d1=.gpu/tls-d1 cq=.gpu/tls-cq
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
X=$OUT/x; mkdir -p $X
cp .gpu/commits.txt .gpu/next.sh $X/
nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu --format=csv -lms 50 > $X/clocks-50ms.csv 2>&1 &
dq=$!
for i in 1 2; do
  [ $(date +%s) -gt $((end - 30)) ] && break
  VKASYNC_TRACE=$X/f2-1024-$i.json timeout 30 .gpu/tls-f2 --connections 10000 --records 1 --record-size 1024 --reps 9 --modes staged-shares,staged-tokio --runs-csv $X/f2-1024-$i.csv > $X/f2-1024-$i.txt 2>&1
done
[ $(date +%s) -lt $((end - 45)) ] && timeout $((end - $(date +%s) - 10)) .gpu/tls-f2 --csv $X/defaults-f2.csv --runs-csv $X/defaults-f2-runs.csv > $X/defaults-f2.txt 2>&1
# The candidate large default case: 10,000 x 1 x 16 KiB, every default mode, without and with copy queues.
for b in f2 cq; do
  [ $(date +%s) -lt $((end - 40)) ] && timeout $((end - $(date +%s) - 5)) .gpu/tls-$b --connections 10000 --records 1 --record-size 16384 --reps 3 --csv $X/c10k-$b.csv --runs-csv $X/c10k-$b-runs.csv > $X/c10k-$b.txt 2>&1
done
kill $dq
gzip $X/*.json 2>/dev/null
(cd $OUT && tar czf x.tgz x && rm -rf x)
