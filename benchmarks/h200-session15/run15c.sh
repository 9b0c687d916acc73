#!/bin/bash
# Session 15, run C: trace cost after per-thread event buffers.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cd .gpu
mkdir -p /tmp/r/a
(which perf; ls /usr/bin/perf* /usr/local/bin 2>&1 | head; cat /proc/sys/kernel/perf_event_paranoid; nproc; lscpu | grep "Model name") > /tmp/r/host.txt 2>&1
./bench_tasks --modes executor,executor-traced,executor-timed,executor-traced-cmds,raw-batch,sequential --tasks 1000,10000 --reps 31 --out /tmp/r/a > /tmp/r/a/log.txt 2>&1
cd /tmp/r && tar czf $OUT/run15c.tgz . && cat a/bench_tasks.csv host.txt
