#!/bin/bash
# 2026-12-01, run D (one H200): why the plain executor's speed moves between processes of one
# build (3.5-7.0 us per task at T = 1,000 in runs B and C). The same binary (s23b: 695b87f), eight
# processes per placement, rotating: unpinned; its threads on two cores (taskset -c 2,3); on
# one core (taskset -c 2); on cores 2 and 10. Records the CPU topology.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nproc; lscpu; lscpu -e; nvidia-smi --query-gpu=name,driver_version --format=csv) > $R/host.txt 2>&1
for p in $(seq 1 8); do
  for v in free two one apart; do
    case $v in free) P="";; two) P="taskset -c 2,3";; one) P="taskset -c 2";; apart) P="taskset -c 2,10";; esac
    D=$R/$v-$p; mkdir -p $D
    $P ./.gpu/bench_tasks_s23b --modes executor --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
