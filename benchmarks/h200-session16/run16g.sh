#!/bin/bash
# Session 16, run G (one H200): the executor's group bound (default 96 commands) against no
# bound (executor-ungrouped), two rounds; sealing with the executor and tokio, old (83a09f4)
# against new, to check that coalesced crypto is unchanged by it.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2; do
  d=$R/new-$round; mkdir -p $d
  ./.gpu/bench_tasks_new --modes sequential,raw-batch,executor,executor-ungrouped,tokio --tasks 1,1000,10000,100000 --reps 5 --out $d/modes > $d/modes.txt 2>&1
  for v in old new; do
    ./.gpu/tls_pipeline_$v --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $d/seal16-$v.csv > $d/seal16-$v.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
