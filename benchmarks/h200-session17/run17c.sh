#!/bin/bash
# Session 17, run C: old (f2f0537) against new (63468d8: join fast path, the loop's checks), two rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R/tr
nproc > $R/host.txt
for round in 1 2; do
  for b in old new; do
    B=./.gpu/bench_tasks; [ $b = old ] && B=./.gpu/bench_tasks_old
    mkdir -p $R/$b-$round/a $R/$b-$round/b
    $B --modes sequential,raw-batch,executor,executor-timed,executor-traced,tokio --tasks 1000,10000 --reps 9 --out $R/$b-$round/a > $R/$b-$round/a.txt 2>&1
    $B --modes raw-batch,executor,tokio --tasks 100000 --reps 5 --out $R/$b-$round/b > $R/$b-$round/b.txt 2>&1
  done
done
TMPDIR=$R/tr ./.gpu/bench_tasks --modes executor-traced --tasks 1000 --reps 2 --out /tmp > $R/tr.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
