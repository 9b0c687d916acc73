#!/bin/bash
# 2026-12-01 (nvidia-h200-x2): the build of commit 8da0515,
# one GPU against two through QueueSet, in one run. Run from the checkout's root.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/r/a /tmp/r/b
(nvidia-smi --query-gpu=name,clocks.sm --format=csv; nproc; lscpu | grep 'Model name') > /tmp/r/host.txt 2>&1
./.gpu/bench_tasks_base --modes executor,tokio,tokio-w8,tokio-set --gpus 2 --tasks 1000,10000,100000 --reps 5 --out /tmp/r/a > /tmp/r/a/log.txt 2>&1
for w in 16 32; do
./.gpu/tls_pipeline_base --connections 10000 --records 1 --record-size 16384 --reps 3 --workers $w --modes coalesced-tokio,coalesced-tokio-set --gpus 2 --csv /tmp/r/b/sealing16k-w$w.csv > /tmp/r/b/log16k-w$w.txt 2>&1
done
cd /tmp/r && tar czf $OUT/r.tgz . && cat host.txt a/bench_tasks.csv b/*.csv
