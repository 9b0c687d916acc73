#!/bin/bash
# Session 17, run I: the tokio front handing full groups to the driver thread too
# (VKASYNC_QUEUE_HANDOFF=1, experiment build) against not, three rounds, alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  for v in off on; do
    mkdir -p $R/$v-$round
    if [ $v = on ]; then export VKASYNC_QUEUE_HANDOFF=1; else unset VKASYNC_QUEUE_HANDOFF; fi
    ./.gpu/bench_tasks_qh --modes executor,tokio,tokio-w8 --tasks 1000,10000 --reps 9 --out $R/$v-$round > $R/$v-$round/a.txt 2>&1
    ./.gpu/bench_tasks_qh --modes executor,tokio --tasks 100000 --reps 3 --out $R/$v-$round/b > $R/$v-$round/b.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
