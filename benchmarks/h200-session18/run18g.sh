#!/bin/bash
# Session 18, run G (nvidia-h200): a lone job spins for its own submission (lone) against the
# build before it (new: 818ce11's library), alternating, two rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2; do
  for b in new lone; do
    mkdir -p $R/$b-$round
    ./.gpu/bench_tasks_$b --modes raw-batch,executor,tokio,tokio-w8,tokio-w2 --tasks 1,10,100,1000,10000 --reps 9 --out $R/$b-$round > $R/$b-$round/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
