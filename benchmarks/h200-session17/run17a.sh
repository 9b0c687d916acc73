#!/bin/bash
# Session 17, run A: where the executor's time goes at T = 1,000 (perf, and traces with GPU spans).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=$PWD/.gpu/bench_tasks
R=$OUT/r; mkdir -p $R/tr
$B --modes sequential,executor,executor-timed,executor-traced --tasks 1000,10000 --reps 9 --out $R > $R/base.txt 2>&1
TMPDIR=$R/tr $B --modes executor-traced,executor-traced-cmds --tasks 1000 --reps 2 --out /tmp > $R/tr.txt 2>&1
for m in executor executor-traced; do
  $P record -F 8000 -g --call-graph dwarf,16384 -o /tmp/$m.data -- $B --modes $m --tasks 1000 --reps 40 --out /tmp > $R/rec_$m.txt 2>&1
  $P report -i /tmp/$m.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -120 > $R/${m}_comm.txt
  $P report -i /tmp/$m.data --children --comm bench_tasks --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -200 > $R/${m}_children.txt
  $P report -i /tmp/$m.data --children --comm vkasync-driver --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -120 > $R/${m}_driver.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
