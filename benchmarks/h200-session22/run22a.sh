#!/bin/bash
# Session 22, run A (one H200): polls sharing a clock read, and a trace's GPU spans written
# after the queue's lock is released. s21 = d3ab187 (session 21's final library); s22a = this
# session's build. Six rounds, order alternating, executor plain, timed and traced,
# T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nproc; grep -m1 "model name" /proc/cpuinfo; nvidia-smi --query-gpu=name,driver_version --format=csv) > $R/host.txt 2>&1
for round in 1 2 3 4 5 6; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for v in $order; do
    b=s21; [ $v = new ] && b=s22a
    D=$R/$v-$round; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
