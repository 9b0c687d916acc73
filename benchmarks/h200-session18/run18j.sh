#!/bin/bash
# Session 18, run J (nvidia-h200): branch encode-ahead-2 (an await that finds the GPU busy with
# half a group gathered encodes it ahead), same binary with and without (--no-encode-ahead),
# alternating, two rounds; traces of tokio-set (two logical devices of the one GPU) both ways.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
B=./.gpu/bench_tasks_ahead2
for round in 1 2; do
  for v in on off; do
    F=""; [ $v = off ] && F=--no-encode-ahead
    mkdir -p $R/$v-$round
    $B $F --modes executor,tokio,tokio-w4,tokio-w2,tokio-set --gpus 2 --tasks 1,1000,10000,100000 --reps 5 --out $R/$v-$round > $R/$v-$round/log.txt 2>&1
  done
done
VKASYNC_TRACE=$R/on-set-10k.json $B --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_on.txt 2>&1
VKASYNC_TRACE=$R/off-set-10k.json $B --no-encode-ahead --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_off.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
