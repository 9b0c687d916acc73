#!/bin/bash
# Session 19, run J (nvidia-h200): the pool's stash moving chunks in batches (branch
# stash-batches, sb) against main's last build (cc3), two rounds, order alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2; do
  order="sb cc3"; [ $round = 2 ] && order="cc3 sb"
  for b in $order; do
    D=$R/$b-$round; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,tokio,tokio-w8,tokio-set --gpus 2 --tasks 1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
    ./.gpu/tls_pipeline_$b --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $D/sealing.csv > $D/sealing.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
