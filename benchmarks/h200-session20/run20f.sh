#!/bin/bash
# Session 20, run F (one H200): branch timing-owners (bench_tasks_o20) against main
# (bench_tasks_s20), four rounds alternating the order: the executor plain, with per-task GPU
# time, and with a full trace, in one process, T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2 3 4; do
  order="o20 s20"; [ $((round % 2)) = 0 ] && order="s20 o20"
  for b in $order; do
    D=$R/$b-$round; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
