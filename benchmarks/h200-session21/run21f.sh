#!/bin/bash
# Session 21, run F (one H200): the trace's cost, main (m21 = 2b5ebd3) against the branch
# trace-cheap at 7d39512 (n21: lock-free events in 4-byte units, no per-task trace reference, pools reset per use; a trace without per-context time;
# awaits end at their poll's start). Six rounds, order alternating; each process runs the
# executor plain, with per-context GPU time, and traced, T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2 3 4 5 6; do
  order="main new"; [ $((round % 2)) = 0 ] && order="new main"
  for v in $order; do
    b=m21; [ $v = new ] && b=n21
    D=$R/$v-$round; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
