#!/usr/bin/env bash
set -u
OUT=${OUT:-/tmp/o}
R=$OUT/r2; mkdir -p $R
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $icd ] && export VK_DRIVER_FILES=$icd
nvidia-smi -L > $R/gpu.txt 2>&1
{ nproc; lscpu; cat /sys/fs/cgroup/cpu.max; } > $R/cpu.txt 2>&1
for s in 16384 1024; do
  DBG_DUE=1 timeout 60 .gpu/tls-dbg --connections 10000 --records 1 --record-size $s --reps 2 --warmup 1 --modes staged-shares 2>&1 | gzip > $R/dbg-s$s.txt.gz
done
ROUNDS=3 REPS=9 BUDGET=330 MODES="staged-shares staged-tokio" SIZES="16384 1024" TRACE=0 OUT=$OUT \
  bash benchmarks/tools/ab_h200.sh base=.gpu/tls new=.gpu/tls-new g2048=.gpu/g2048 g1024=.gpu/g1024 g512q4=.gpu/g512q4
timeout 60 bash -c '
for w in 16 12; do for s in 16384 1024; do
  .gpu/tls --connections 10000 --records 1 --record-size $s --reps 9 --modes staged-shares --workers $w > '$R'/w$w-s$s.txt 2>&1
done; done'
tar czf $OUT/r2.tgz -C $OUT r2 && rm -rf $R
