#!/bin/bash
# Session 15, run B: trace cost with timestamps per phase (default) and per command, per-task
# timing alone, against the default executor; issue 9's modes at T = 1 .. 100,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .gpu
mkdir -p /tmp/r/a /tmp/r/b /tmp/r/c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > /tmp/r/gpu.txt 2>&1
./bench_tasks --modes executor,executor-traced,executor-timed,executor-traced-cmds,raw-batch --tasks 1000,10000 --reps 15 --out /tmp/r/a > /tmp/r/a/log.txt 2>&1
./bench_tasks --modes sequential,raw-batch,executor,tokio,tokio-w1,tokio-w2,tokio-w4,tokio-w8 --tasks 1,1000,10000,100000 --reps 7 --out /tmp/r/b > /tmp/r/b/log.txt 2>&1
VKASYNC_TRACE=/tmp/r/c/tasks-exec.json ./bench_tasks --modes executor --tasks 1000 --reps 3 --out /tmp/r/c > /tmp/r/c/log.txt 2>&1
VKASYNC_TRACE=/tmp/r/c/tls.json ./tls_pipeline --connections 2000 --records 1 --record-size 16384 --reps 1 --modes coalesced,coalesced-tokio >> /tmp/r/c/log.txt 2>&1
cd /tmp/r && tar czf $OUT/run15b.tgz . && cat a/bench_tasks.csv b/bench_tasks.csv
