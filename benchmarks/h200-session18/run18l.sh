#!/bin/bash
# Session 18, run L (nvidia-h200): the last build (new, main) against the last session's
# (base, 8da0515) with the order of the builds alternating between rounds, three rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
i=0
for order in "new base" "base new" "new base"; do
  i=$((i+1))
  for b in $order; do
    mkdir -p $R/$b-$i
    ./.gpu/bench_tasks_$b --modes executor,tokio,tokio-w8 --tasks 1000,10000,100000 --reps 5 --out $R/$b-$i > $R/$b-$i/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
