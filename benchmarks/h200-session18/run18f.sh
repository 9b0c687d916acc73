#!/bin/bash
# Session 18, run F (nvidia-h200): where a full trace's cost goes, against per-task GPU time
# alone (perf, flat profiles of each thread, executor at T = 1,000; build 818ce11).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=$PWD/.gpu/bench_tasks_new
R=$OUT/r; mkdir -p $R
for m in executor-timed executor-traced; do
  TMPDIR=/tmp $P record -F 10000 -o /tmp/$m.data -- $B --modes $m --tasks 1000 --reps 150 --out /tmp > $R/rec_$m.txt 2>&1
  $P report -i /tmp/$m.data --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -80 > $R/${m}_flat.txt
  $P report -i /tmp/$m.data --no-children --sort comm --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -20 > $R/${m}_comm.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
