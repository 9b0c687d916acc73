#!/bin/bash
# Session 16, run B: old (83a09f4) against new (flush without the lock, hand-over, op vectors
# reused), and new with glibc's heap trimming off (MALLOC_TOP_PAD_/MALLOC_TRIM_THRESHOLD_), to see
# whether heap churn still matters. Interleaved, two rounds. Then perf of new at T = 1,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
R=$OUT/r; mkdir -p $R
run() { # name env binary
  local d=$R/$1-$round; mkdir -p $d
  env $2 ./.gpu/bench_tasks_$3 --modes sequential,raw-batch,executor,tokio --tasks 1000 --reps 7 --out $d/t1k > $d/t1k.txt 2>&1
  env $2 ./.gpu/bench_tasks_$3 --modes raw-batch,executor,tokio,tokio-w4 --tasks 10000,100000 --reps 5 --out $d/big > $d/big.txt 2>&1
}
for round in 1 2; do
  run old X=1 old
  run new X=1 new
  run newpad "MALLOC_TOP_PAD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824" new
done
$P record -F 4000 -g --call-graph dwarf,16384 -o /tmp/exec.data -- ./.gpu/bench_tasks_new --modes executor --tasks 1000 --reps 40 --out /tmp > $R/rec_exec.txt 2>&1
$P report -i /tmp/exec.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -70 > $R/exec_comm.txt
$P report -i /tmp/exec.data --children --sort sym --stdio -g none --percent-limit 0.7 2>/dev/null | grep -v "^$" | head -200 > $R/exec_children.txt
$P report -i /tmp/exec.data --no-children --sort sym --stdio -G --percent-limit 3 2>/dev/null | grep -v "^$" | head -400 > $R/exec_callers.txt
cd $OUT && tar czf r.tgz r && rm -rf r
