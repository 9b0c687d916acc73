#!/bin/bash
# Session 21, run G (one H200): spare query pools shared by a queue's overlapping flushes.
# p21 = 690f489 plus a temporary counter of query pools made (printed as "EXP pools made",
# not shipped); n21 = main at 3f91ef7; f21 = branch trace-pools at 690f489. Part 1: pools
# made in one traced run. Part 2: six rounds, order alternating, executor plain, timed and
# traced, T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
./.gpu/bench_tasks_p21 --modes executor-traced --tasks 1000,10000 --reps 40 --out /tmp/p > $R/pools.txt 2>&1
for round in 1 2 3 4 5 6; do
  order="main new"; [ $((round % 2)) = 0 ] && order="new main"
  for v in $order; do
    b=n21; [ $v = new ] && b=f21
    D=$R/$v-$round; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
