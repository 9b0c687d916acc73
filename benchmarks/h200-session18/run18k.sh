#!/bin/bash
# Session 18, run K (nvidia-h200): the lone job's spin again, with the order of the builds
# alternating between rounds (run G always ran the build without it first): new (main) and
# nolone (main with the lone spin disabled), three rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
i=0
for order in "new nolone" "nolone new" "new nolone"; do
  i=$((i+1))
  for b in $order; do
    mkdir -p $R/$b-$i
    ./.gpu/bench_tasks_$b --modes raw-batch,executor,tokio,tokio-w8,tokio-w2 --tasks 1,10 --reps 15 --out $R/$b-$i > $R/$b-$i/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
