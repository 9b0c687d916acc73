#!/bin/bash
# Session 17, run H: main with full groups handed to the driver thread (new, a56a478) against
# main before it (base, bb9121d / 1846d50), alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  for b in base new; do
    mkdir -p $R/$b-$round
    ./.gpu/bench_tasks_$b --modes sequential,raw-batch,executor,executor-timed,executor-traced,tokio --tasks 1000,10000 --reps 9 --out $R/$b-$round > $R/$b-$round/a.txt 2>&1
  done
done
for b in base new; do
  mkdir -p $R/$b-big
  ./.gpu/bench_tasks_$b --modes raw-batch,executor,tokio --tasks 100000 --reps 5 --out $R/$b-big > $R/$b-big/b.txt 2>&1
  ./.gpu/tls_pipeline_$b --modes coalesced,coalesced-tokio --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 > $R/$b-big/seal.txt 2>&1
done
./.gpu/tls_pipeline_new > $R/new-big/default.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
