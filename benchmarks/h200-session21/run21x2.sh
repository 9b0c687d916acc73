#!/bin/bash
# Session 21, run X2 (nvidia-h200-x2): one GPU against two, on one host, one build
# (.gpu/bench_tasks_s21, .gpu/tls_pipeline_s21: release builds of main at d3ab187). One GPU: one queue under tokio (16 and 32
# workers) and a set of L logical devices (queues) of GPU 0; two GPUs: a set of L per GPU.
# Two rounds; then a trace of the two-GPU set.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=./.gpu/bench_tasks_s21; S=./.gpu/tls_pipeline_s21
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2; do
  D=$R/mix-r$round-one; mkdir -p $D
  $B --modes executor,tokio,tokio-w32 --tasks 10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
  for G in 1 2; do for L in 1 2 3; do
    D=$R/mix-r$round-g$G-l$L; mkdir -p $D
    $B --modes tokio-set --gpus $G --lanes $L --set-workers 32 --tasks 10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
  done; done
  $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 32 --modes coalesced-tokio,cpu-all --csv $R/seal-r$round-one.csv > $R/seal-r$round-one.txt 2>&1
  for G in 1 2; do for L in 1 2; do
    $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 32 --modes coalesced-tokio-set --gpus $G --lanes $L --csv $R/seal-r$round-g$G-l$L.csv > $R/seal-r$round-g$G-l$L.txt 2>&1
  done; done
done
VKASYNC_TRACE=$R/set-10k.json $B --modes tokio-set --gpus 2 --lanes 2 --set-workers 32 --tasks 10000 --reps 2 --out /tmp > $R/tr_set.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
