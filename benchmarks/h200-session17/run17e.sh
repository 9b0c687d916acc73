#!/bin/bash
# Session 17, run E: the executor handing full groups to its driver thread (ho) against not (63468d8), three rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R/tr
for round in 1 2 3; do
  for b in base ho; do
    B=./.gpu/bench_tasks; [ $b = ho ] && B=./.gpu/bench_tasks_ho
    mkdir -p $R/$b-$round
    $B --modes sequential,raw-batch,executor,executor-traced --tasks 1000,10000 --reps 9 --out $R/$b-$round > $R/$b-$round/a.txt 2>&1
  done
done
TMPDIR=$R/tr ./.gpu/bench_tasks_ho --modes executor-traced --tasks 1000 --reps 2 --out /tmp > $R/tr.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
