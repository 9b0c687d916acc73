#!/bin/bash
# Split flushes A/B: old (91161ff), off (split 0), s32, s16q4 (16 MiB, 4 compute queues); poll logs.
cd "$(dirname "$0")/.."
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi -q -d CLOCK > $OUT/clocks-before.txt 2>&1
ROUNDS=2 REPS=9 BUDGET=320 MODES="staged-shares staged" SIZES="16384 1024" TRACE=1 OUT=$OUT \
  bash benchmarks/tools/ab_h200.sh old=.gpu/old off=.gpu/off s32=.gpu/s32 s16q4=.gpu/s16q4
# Diagnostic: the share tasks' polls, traced and untraced (dbg-polls build), 16 KiB.
mkdir -p $OUT/polls
VKASYNC_SPLIT_FLUSHES=0 VKASYNC_BENCH_POLLS=$OUT/polls/untraced.csv timeout 60 .gpu/tls-polls --connections 10000 --records 1 --record-size 16384 --reps 5 --modes staged-shares > $OUT/polls/untraced.txt 2>&1
VKASYNC_SPLIT_FLUSHES=0 VKASYNC_BENCH_POLLS=$OUT/polls/traced.csv VKASYNC_TRACE=$OUT/polls/traced.json timeout 60 .gpu/tls-polls --connections 10000 --records 1 --record-size 16384 --reps 3 --modes staged-shares > $OUT/polls/traced.txt 2>&1
gzip $OUT/polls/traced.json
cd $OUT && tar czf polls.tgz polls && rm -rf polls
