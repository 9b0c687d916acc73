#!/bin/bash
# Session 16, run F (one H200): the executor's flush bound. executor (default bound, 4,096
# commands) against executor-eager (bound N) for N = 96, 256, 768; two rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2; do
  for n in 96 256 768; do
    d=$R/e$n-$round; mkdir -p $d
    ./.gpu/bench_tasks_new --modes raw-batch,executor,executor-eager --eager-ops $n --tasks 1000,10000,100000 --reps 5 --out $d > $d/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
