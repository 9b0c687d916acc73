#!/bin/bash
# Session 19, run D (nvidia-h200): copies of a phase's small regions by one dispatch of the copy
# kernel (branch compute-copies, the default) against vkCmdCopyBuffer (VKASYNC_COMPUTE_COPIES=0),
# one binary, three rounds with the order alternating; traces of both.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
B=./.gpu/bench_tasks_cc; S=./.gpu/tls_pipeline_cc
for c in 1 0; do
  VKASYNC_COMPUTE_COPIES=$c VKASYNC_TRACE=$R/exec-c$c.json $B --modes executor --tasks 10000 --reps 1 --out /tmp > $R/tr_exec_c$c.txt 2>&1
done
for round in 1 2 3; do
  order="1 0"; [ $round = 2 ] && order="0 1"
  for c in $order; do
    D=$R/c$c-$round; mkdir -p $D
    VKASYNC_COMPUTE_COPIES=$c $B --modes raw-batch,executor,tokio,tokio-w8,tokio-set --gpus 2 --tasks 1,1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
    VKASYNC_COMPUTE_COPIES=$c $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $D/sealing.csv > $D/sealing.txt 2>&1
  done
done
for c in 1 0; do VKASYNC_COMPUTE_COPIES=$c $S > $R/example-c$c.txt 2>&1; done
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
