#!/bin/bash
# Session 18, run I (nvidia-h200, one GPU): the session's last build (new, c8ceec4) against the
# last session's (base, 8da0515), alternating, two rounds; T = 100,000 and sealing per build.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc) > $R/host.txt 2>&1
for round in 1 2; do
  for b in base new; do
    mkdir -p $R/$b-$round
    ./.gpu/bench_tasks_$b --modes sequential,raw-batch,executor,executor-traced,tokio,tokio-w8 --tasks 1,1000,10000 --reps 9 --out $R/$b-$round > $R/$b-$round/log.txt 2>&1
  done
done
for b in base new; do
  mkdir -p $R/$b-big
  ./.gpu/bench_tasks_$b --modes raw-batch,executor,tokio,tokio-w8 --tasks 100000 --reps 3 --out $R/$b-big > $R/$b-big/log.txt 2>&1
  ./.gpu/tls_pipeline_$b --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $R/$b-big/sealing16k-w16.csv > $R/$b-big/sealing.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
