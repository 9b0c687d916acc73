#!/bin/bash
# Session 18, run M (nvidia-h200): the executor alone, the last build (new) against the last
# session's (base), in the order base new new base base new new base.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
i=0
for b in base new new base base new new base; do
  i=$((i+1))
  mkdir -p $R/$i-$b
  ./.gpu/bench_tasks_$b --modes raw-batch,executor --tasks 1000,10000 --reps 9 --out $R/$i-$b > $R/$i-$b/log.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
