#!/bin/bash
# Session 21, run H (one H200): the final build's trace cost on another host. s21 = main at
# d3ab187. Six processes, each the executor plain, with per-context GPU time, and traced,
# T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2 3 4 5 6; do
  D=$R/new-$round; mkdir -p $D
  ./.gpu/bench_tasks_s21 --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
