#!/bin/bash
# Session 16, run H (one H200): the trace's cost before (g: 41b27ae) and after (h) merging a
# context's consecutive commands into one owner range, interleaved, two rounds; and the tokio
# front with and without a group bound of 96 commands (h).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2; do
  for v in g h; do
    d=$R/$v-$round; mkdir -p $d
    ./.gpu/bench_tasks_$v --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 15 --out $d/trace > $d/trace.txt 2>&1
  done
  d=$R/tokio-$round; mkdir -p $d
  ./.gpu/bench_tasks_h --modes executor,tokio,tokio-grouped --tasks 1000,10000,100000 --reps 5 --out $d > $d/log.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
