#!/bin/bash
# Session 17, run G: push descriptors written through a descriptor update template (tpl) against
# vkCmdPushDescriptorSetKHR (base, bb9121d), three rounds, alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  for b in base tpl; do
    mkdir -p $R/$b-$round
    ./.gpu/bench_tasks_$b --modes raw-batch,executor,executor-traced,tokio --tasks 1000,10000 --reps 9 --out $R/$b-$round > $R/$b-$round/a.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
