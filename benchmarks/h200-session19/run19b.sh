#!/bin/bash
# Session 19, run B (nvidia-h200): pipeline depth 2 (the branch's default) against 1
# (VKASYNC_PIPELINE_DEPTH=1, read by the examples), one binary, three rounds, order alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2 3; do
  order="1 2"; [ $round = 2 ] && order="2 1"
  for d in $order; do
    mkdir -p $R/d$d-$round
    VKASYNC_PIPELINE_DEPTH=$d ./.gpu/bench_tasks_pipe --modes executor,tokio,tokio-w8,tokio-w4,tokio-set --gpus 2 --tasks 1000,10000,100000 --reps 5 --out $R/d$d-$round > $R/d$d-$round/log.txt 2>&1
    VKASYNC_PIPELINE_DEPTH=$d ./.gpu/tls_pipeline_pipe --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced-tokio,coalesced-tokio-set --gpus 2 --csv $R/d$d-$round/sealing.csv > $R/d$d-$round/sealing.txt 2>&1
  done
done
VKASYNC_TRACE=$R/seal-d2.json ./.gpu/tls_pipeline_pipe --connections 10000 --records 1 --record-size 16384 --reps 1 --workers 16 --modes coalesced-tokio > $R/tr_seal_d2.txt 2>&1
VKASYNC_PIPELINE_DEPTH=1 VKASYNC_TRACE=$R/seal-d1.json ./.gpu/tls_pipeline_pipe --connections 10000 --records 1 --record-size 16384 --reps 1 --workers 16 --modes coalesced-tokio > $R/tr_seal_d1.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
