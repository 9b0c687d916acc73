#!/bin/bash
# Session 17, run F: main (63468d8), issue 9's modes and the trace's cost, two rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
nproc > $R/host.txt
for round in 1 2; do
  mkdir -p $R/$round/a $R/$round/b
  ./.gpu/bench_tasks --modes sequential,raw-batch,executor,executor-ungrouped,tokio,executor-timed,executor-traced --tasks 1,1000,10000 --reps 9 --out $R/$round/a > $R/$round/a.txt 2>&1
  ./.gpu/bench_tasks --modes raw-batch,executor,tokio --tasks 100000 --reps 5 --out $R/$round/b > $R/$round/b.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
