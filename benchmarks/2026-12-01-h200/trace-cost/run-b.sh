#!/bin/bash
# 2026-12-01, run B (one H200): the trace's cost, shipped (s21 = d3ab187's library, main's hot
# path before 695b87f) against the leaner host events and GPU-span bookkeeping
# plus polls sharing one clock read and GPU spans stored under one lock (s23b: 695b87f), twenty processes each, alternating, T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nproc; grep -m1 "model name" /proc/cpuinfo; nvidia-smi --query-gpu=name,driver_version --format=csv) > $R/host.txt 2>&1
for p in $(seq 1 20); do
  order="old new"; [ $((p % 2)) = 0 ] && order="new old"
  for v in $order; do
    b=s21; [ $v = new ] && b=s23b
    D=$R/$v-$p; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
  date +%T >> $R/host.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
