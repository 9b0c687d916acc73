#!/bin/bash
# Session 18, run H (nvidia-h200): the executor untimed, timed and traced, each in its own
# process, three times, with each one's counters (host waits, spin, handed flushes).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  for m in executor executor-timed executor-traced; do
    ./.gpu/bench_tasks_lone --modes $m --tasks 1000 --reps 30 --out /tmp > $R/$m-$round.txt 2>&1
  done
done
./.gpu/bench_tasks_lone --modes executor,executor-timed,executor-traced --tasks 1000 --reps 30 --out /tmp > $R/together.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
