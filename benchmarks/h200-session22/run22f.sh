#!/bin/bash
# Session 22, run F (one H200): the shipped trace's cost at T = 1,000 and 10,000 over thirty processes
# (bench_tasks_s21 = d3ab187's library, which main's hot path still is), for a median over
# more processes than one run of run A gives.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nproc; grep -m1 "model name" /proc/cpuinfo; nvidia-smi --query-gpu=name,driver_version --format=csv) > $R/host.txt 2>&1
for p in $(seq 1 30); do
  D=$R/p$p; mkdir -p $D
  ./.gpu/bench_tasks_s21 --modes executor,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
