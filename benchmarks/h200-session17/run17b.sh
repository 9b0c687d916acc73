#!/bin/bash
# Session 17, run B: the executor thread's inclusive costs at T = 1,000, over many repetitions.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=$PWD/.gpu/bench_tasks
R=$OUT/r; mkdir -p $R
for m in executor executor-traced; do
  $P record -F 4000 -g --call-graph dwarf,32768 -o /tmp/$m.data -- $B --modes $m --tasks 1000 --reps 300 --out /tmp > $R/rec_$m.txt 2>&1
  $P report -i /tmp/$m.data --no-children --comm bench_tasks --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $R/${m}_self.txt
  $P report -i /tmp/$m.data --children --comm bench_tasks --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -300 > $R/${m}_children.txt
done
$P report -i /tmp/executor.data --no-children --comm bench_tasks --sort sym --stdio -g caller,0.5,callee --percent-limit 1.5 2>/dev/null | grep -v "^$" | head -600 > $R/executor_callers.txt
cd $OUT && tar czf r.tgz r && rm -rf r
