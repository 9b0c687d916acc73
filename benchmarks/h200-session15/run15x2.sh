#!/bin/bash
# Session 15, run X2 (nvidia-h200-x2): one GPU against two through QueueSet, same run.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .gpu
mkdir -p /tmp/r/a /tmp/r/b
(nvidia-smi --query-gpu=name,clocks.sm --format=csv; nproc) > /tmp/r/host.txt 2>&1
./bench_tasks --modes tokio,tokio-set --gpus 2 --tasks 10000,100000 --reps 5 --out /tmp/r/a > /tmp/r/a/log.txt 2>&1
./tls_pipeline --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced-tokio,coalesced-tokio-set,cpu-all --gpus 2 --csv /tmp/r/b/sealing16k-w16.csv > /tmp/r/b/log16k-w16.txt 2>&1
./tls_pipeline --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 32 --modes coalesced-tokio,coalesced-tokio-set --gpus 2 --csv /tmp/r/b/sealing16k-w32.csv > /tmp/r/b/log16k-w32.txt 2>&1
cd /tmp/r && tar czf $OUT/run15x2.tgz . && cat host.txt a/bench_tasks.csv b/*.csv
