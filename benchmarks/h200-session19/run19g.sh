#!/bin/bash
# Session 19, run G (nvidia-h200): the executor loop's minimum group at an await (min) or none
# (nomin), both with compute copies and groups handed to the driver thread, against main at
# the session start; two rounds, order rotating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2; do
  order="min nomin main"; [ $round = 2 ] && order="main nomin min"
  for v in $order; do
    D=$R/$v-$round; mkdir -p $D
    ./.gpu/bench_tasks_$v --modes executor,tokio,tokio-set --gpus 2 --tasks 10,1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
