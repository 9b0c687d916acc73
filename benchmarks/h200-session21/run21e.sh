#!/bin/bash
# Session 21, run E (one H200): which part of a trace costs what. x21 = branch trace-cheap at
# 106228c plus a temporary switch VKASYNC_EXP (bits: 1 no task spawn/poll events, 2 no await
# events, 4 no GPU timestamps, 8 no flush-level events; not shipped). Three rounds, variants
# rotating; each process runs the executor plain and traced, T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  case $round in 1) order="0 1 2 4 8 15";; 2) order="15 8 4 2 1 0";; 3) order="4 0 8 1 15 2";; esac
  for v in $order; do
    D=$R/x$v-$round; mkdir -p $D
    VKASYNC_EXP=$v ./.gpu/bench_tasks_x21 --modes executor,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
