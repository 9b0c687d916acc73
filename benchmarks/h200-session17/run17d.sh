#!/bin/bash
# Session 17, run D: what the executor thread's hot functions call (perf, callee trees).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=$PWD/.gpu/bench_tasks
R=$OUT/r; mkdir -p $R
$P record -F 4000 -g --call-graph dwarf,32768 -o /tmp/e.data -- $B --modes executor --tasks 1000 --reps 300 --out /tmp > $R/rec.txt 2>&1
$P report -i /tmp/e.data --no-children --comm bench_tasks --sort dso,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -100 > $R/self_dso.txt
for f in Recording::encode SyncFuture RawBuffer::new Local\<B\>::spawn into_vec QueueCore\<B\>::record Retired run_flush mark_submitted RawBuffer\ as; do
  $P report -i /tmp/e.data --children --comm bench_tasks --stdio -g graph,0.3,caller,function,percent --symbol-filter="$f" 2>/dev/null | grep -v "^$" | grep -v "^#" | head -150 > "$R/tree_${f//[<>:]/_}.txt"
done
cd $OUT && tar czf r.tgz r && rm -rf r
