#!/bin/bash
# Session 18, run D (nvidia-h200, one GPU): commit 818ce11, issue 9's and 11's modes, three
# rounds, and the tokio worker sweep.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
B=./.gpu/bench_tasks_new2
for round in 1 2 3; do
  mkdir -p $R/$round
  $B --modes sequential,raw-batch,executor,executor-timed,executor-traced,tokio,tokio-w8 --tasks 1,1000,10000 --reps 9 --out $R/$round > $R/$round/a.txt 2>&1
done
mkdir -p $R/big $R/sweep
$B --modes raw-batch,executor,tokio,tokio-w8 --tasks 100000 --reps 3 --out $R/big > $R/big/b.txt 2>&1
$B --modes executor,tokio-w1,tokio-w2,tokio-w4,tokio-w8,tokio --tasks 1000,10000,100000 --reps 3 --out $R/sweep > $R/sweep/s.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
