#!/bin/bash
# Session 15, run A: trace overhead and per-task timing cost (issue 11), and traces of the
# mix workload at T = 1,000 in both fronts (issue 9 diagnosis).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
mkdir -p $OUT/a $OUT/b
echo "== A: overhead" >> $OUT/log.txt
./bench_tasks --modes sequential,raw-batch,executor,executor-traced,executor-timed,tokio,tokio-w1,tokio-w4 --tasks 1,1000,10000 --reps 9 --out $OUT/a >> $OUT/log.txt 2>&1
echo "== B: traces" >> $OUT/log.txt
VKASYNC_TRACE=$OUT/b/tasks-exec.json ./bench_tasks --modes executor --tasks 1000 --reps 3 --out $OUT/b >> $OUT/log.txt 2>&1
VKASYNC_TRACE=$OUT/b/tasks-tokio.json ./bench_tasks --modes tokio --tasks 1000 --reps 3 --out $OUT/b >> $OUT/log.txt 2>&1
VKASYNC_TRACE=$OUT/b/tls.json ./tls_pipeline --connections 2000 --records 1 --record-size 16384 --reps 1 --modes coalesced,coalesced-tokio >> $OUT/log.txt 2>&1
cd $OUT/b && gzip -9 *.json; ls -la >> $OUT/log.txt
