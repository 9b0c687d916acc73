#!/bin/bash
# Session 20, run E (one H200): perf of the executor with and without a trace at T = 1,000
# (frame-pointer build of main), with per-task GPU time only, and with a full trace.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=./.gpu/bench_tasks_fp
R=$OUT/r; mkdir -p $R
for m in executor executor-timed executor-traced; do
  $P record -F 5000 -g -o /tmp/$m.data -- $B --modes $m --tasks 1000 --reps 300 --out /tmp > $R/$m-log.txt 2>&1
  $P report -i /tmp/$m.data --comms bench_tasks_fp,vkasync-driver --no-children --sort comm,sym --stdio -g none --percent-limit 0.1 2>/dev/null | grep -v "^$" | head -250 > $R/$m-flat.txt
  $P report -i /tmp/$m.data --comms bench_tasks_fp --children --sort sym --stdio -g none --percent-limit 0.8 2>/dev/null | grep -v "^$" | head -120 > $R/$m-children.txt
done
for i in 1 2; do $B --modes executor,executor-timed,executor-traced --tasks 1000 --reps 100 --out /tmp > $R/inproc-$i.txt 2>&1; done
cd $OUT && tar czf r.tgz r && rm -rf r
