#!/usr/bin/env bash
# Offload::Auto at 1,000 connections x 4 records of 16 KiB: 0262655 (tls0) against 81b1251 (tls,
# with the example's warm-up run), alternating, three pairs; and 10,000 x 4 x 16 KiB once each.
set -u
OUT=${OUT:-/tmp/o}
X=$OUT/auto; mkdir -p $X/runs
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cp .gpu/commits.txt .gpu/auto.sh $X/
nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu --format=csv -lms 50 > $X/clocks-50ms.csv 2>&1 &
dq=$!
for r in 1 2 3; do for b in tls0 tls; do
  timeout 60 .gpu/$b --connections 1000 --records 4 --record-size 16384 --reps 7 --modes auto,host,coalesced --runs-csv $X/runs/$b-1000-$r.csv > $X/$b-1000-$r.txt 2>&1
done; done
for b in tls0 tls; do
  timeout 60 .gpu/$b --connections 10000 --records 4 --record-size 16384 --reps 7 --modes auto,host,coalesced --runs-csv $X/runs/$b-10000.csv > $X/$b-10000.txt 2>&1
done
kill $dq
(cd $OUT && tar czf auto.tgz auto && rm -rf auto)
