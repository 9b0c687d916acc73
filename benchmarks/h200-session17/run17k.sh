#!/bin/bash
# Session 17, run K: per-thread stashes of free pool chunks (stash) against main (new, 24e50bb's
# library = a56a478), three rounds alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  for b in new stash; do
    mkdir -p $R/$b-$round
    ./.gpu/bench_tasks_$b --modes executor,tokio,tokio-w8 --tasks 1000,10000 --reps 9 --out $R/$b-$round > $R/$b-$round/a.txt 2>&1
  done
done
for b in new stash; do
  mkdir -p $R/$b-big
  ./.gpu/bench_tasks_$b --modes executor,tokio --tasks 100000 --reps 3 --out $R/$b-big > $R/$b-big/b.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
