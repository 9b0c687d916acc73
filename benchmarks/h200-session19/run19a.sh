#!/bin/bash
# Session 19, run A (nvidia-h200): group commit submitting behind one submission in flight
# (VKASYNC_PIPELINE_DEPTH=2) against only on an idle GPU (1), one binary (branch pipeline);
# traces of both at T = 10,000; then two rounds, the order alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
B=./.gpu/bench_tasks_pipe
for d in 1 2; do
  VKASYNC_PIPELINE_DEPTH=$d VKASYNC_TRACE=$R/tokio-d$d.json $B --modes tokio --tasks 10000 --reps 2 --out /tmp > $R/tr_tokio_d$d.txt 2>&1
  VKASYNC_PIPELINE_DEPTH=$d VKASYNC_TRACE=$R/exec-d$d.json $B --modes executor --tasks 10000 --reps 2 --out /tmp > $R/tr_exec_d$d.txt 2>&1
done
for round in 1 2; do
  order="1 2"; [ $round = 2 ] && order="2 1"
  for d in $order; do
    mkdir -p $R/d$d-$round
    VKASYNC_PIPELINE_DEPTH=$d $B --modes raw-batch,executor,tokio,tokio-w8,tokio-set --gpus 2 --tasks 1,1000,10000,100000 --reps 5 --out $R/d$d-$round > $R/d$d-$round/log.txt 2>&1
    VKASYNC_PIPELINE_DEPTH=$d ./.gpu/tls_pipeline_pipe --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $R/d$d-$round/sealing.csv > $R/d$d-$round/sealing.txt 2>&1
  done
done
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
