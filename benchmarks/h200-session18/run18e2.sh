#!/bin/bash
# Session 18, run E2 (nvidia-h200, one GPU): encoding ahead (branch encode-ahead; a flush asked for submits the held epoch first) on and off
# (--no-encode-ahead), same binary, alternating, two rounds; tokio with 16, 4 and 2 workers, and
# tokio-set over two logical devices of the one GPU (each gets half the jobs).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc) > $R/host.txt 2>&1
B=./.gpu/bench_tasks_ahead
for round in 1 2; do
  for v in on off; do
    F=""; [ $v = off ] && F=--no-encode-ahead
    mkdir -p $R/$v-$round
    $B $F --modes executor,tokio,tokio-w4,tokio-w2,tokio-set --gpus 2 --tasks 1,1000,10000,100000 --reps 5 --out $R/$v-$round > $R/$v-$round/log.txt 2>&1
  done
done
VKASYNC_TRACE=$R/ahead2-set-10k.json $B --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_set.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
