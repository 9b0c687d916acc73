#!/bin/bash
# Session 15, run X2b: worker counts for one GPU and two.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .gpu
mkdir -p /tmp/r/a /tmp/r/c
./bench_tasks --modes tokio,tokio-w32,tokio-set --gpus 2 --set-workers 16 --tasks 100000 --reps 5 --out /tmp/r/a > /tmp/r/a/log.txt 2>&1
./bench_tasks --modes tokio-w8,tokio-set --gpus 2 --set-workers 32 --tasks 100000 --reps 5 --out /tmp/r/c > /tmp/r/c/log.txt 2>&1
cd /tmp/r && tar czf $OUT/run15x2b.tgz . && cat a/bench_tasks.csv c/bench_tasks.csv
