#!/bin/bash
# Session 17, run J: where the tokio front's time goes at T = 1,000 (perf over all threads).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=$PWD/.gpu/bench_tasks_new
R=$OUT/r; mkdir -p $R
$P record -F 2000 -g --call-graph dwarf,16384 -o /tmp/t.data -- $B --modes tokio --tasks 1000 --reps 200 --out /tmp > $R/rec.txt 2>&1
$P report -i /tmp/t.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -120 > $R/self_comm.txt
$P report -i /tmp/t.data --children --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -250 > $R/children.txt
for f in run_flush Recording::encode mark_submitted QueueCore\<B\>::record SyncFuture; do
  $P report -i /tmp/t.data --children --stdio -g graph,0.5,caller,function,percent --symbol-filter="$f" 2>/dev/null | grep -v "^$" | grep -v "^#" | head -120 > "$R/tree_${f//[<>:]/_}.txt"
done
cd $OUT && tar czf r.tgz r && rm -rf r
