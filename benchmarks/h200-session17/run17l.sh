#!/bin/bash
# Session 17, run L: the final main (library of d84b220 / b3420b2), issue 9's and 11's modes, three rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
B=./.gpu/bench_tasks_stash
for round in 1 2 3; do
  mkdir -p $R/$round
  $B --modes sequential,raw-batch,executor,executor-timed,executor-traced,tokio,tokio-w8 --tasks 1,1000,10000 --reps 9 --out $R/$round > $R/$round/a.txt 2>&1
done
mkdir -p $R/big
$B --modes raw-batch,executor,tokio,tokio-w8 --tasks 100000 --reps 3 --out $R/big > $R/big/b.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
