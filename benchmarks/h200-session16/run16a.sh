#!/bin/bash
# Session 16, run A: flushing without the lock and the executor's hand-over (new) against
# main's 83a09f4 (old), interleaved, three rounds; then perf of the new build.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  for v in old new; do
    mkdir -p $R/$v-$round
    ./.gpu/bench_tasks_$v --modes sequential,raw-batch,executor,tokio --tasks 1000 --reps 5 --out $R/$v-$round/t1k > $R/$v-$round/t1k.txt 2>&1
    ./.gpu/bench_tasks_$v --modes raw-batch,executor,tokio,tokio-w4 --tasks 10000,100000 --reps 5 --out $R/$v-$round/big > $R/$v-$round/big.txt 2>&1
  done
done
$P record -F 4000 -g --call-graph dwarf,16384 -o /tmp/tokio.data -- ./.gpu/bench_tasks_new --modes tokio --tasks 10000 --reps 3 --out /tmp > $R/rec_tokio.txt 2>&1
$P report -i /tmp/tokio.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -80 > $R/tokio_comm.txt
$P report -i /tmp/tokio.data --no-children --sort sym --stdio -g caller,0.5,callee --percent-limit 2 2>/dev/null | grep -v "^$" | head -300 > $R/tokio_self.txt
$P record -F 4000 -g --call-graph dwarf,16384 -o /tmp/exec.data -- ./.gpu/bench_tasks_new --modes executor --tasks 10000 --reps 8 --out /tmp > $R/rec_exec.txt 2>&1
$P report -i /tmp/exec.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -80 > $R/exec_comm.txt
$P report -i /tmp/exec.data --children --sort sym --stdio -g none --percent-limit 1 2>/dev/null | grep -v "^$" | head -150 > $R/exec_children.txt
cd $OUT && tar czf r.tgz r && rm -rf r
