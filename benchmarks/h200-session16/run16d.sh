#!/bin/bash
# Session 16, run D (one H200): the executor handing flushes to the driver (default) against
# encoding them on its own thread (executor-inline), with raw-batch, sequential and tokio; one
# process per round, modes interleaved by the benchmark; three rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  d=$R/new-$round; mkdir -p $d
  ./.gpu/bench_tasks_new --modes sequential,raw-batch,executor,executor-inline,tokio --tasks 1000 --reps 9 --out $d/t1k > $d/t1k.txt 2>&1
  ./.gpu/bench_tasks_new --modes raw-batch,executor,executor-inline,tokio,tokio-w4 --tasks 10000,100000 --reps 5 --out $d/big > $d/big.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
