#!/bin/bash
# Session 16, run E (one H200): issue 9's modes, old (83a09f4) and new (8bb983a: flushes
# without the queue's lock) one after the other; then the trace's cost, interleaved, two rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
nproc > $R/host.txt
for v in new old; do
  d=$R/$v-1; mkdir -p $d
  ./.gpu/bench_tasks_$v --modes sequential,raw-batch,executor,tokio,tokio-w1,tokio-w2,tokio-w4,tokio-w8 --tasks 1,1000,10000,100000 --reps 5 --out $d/modes > $d/modes.txt 2>&1
done
for round in 1 2; do
  for v in old new; do
    d=$R/$v-$round; mkdir -p $d
    ./.gpu/bench_tasks_$v --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 21 --out $d/trace > $d/trace.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
