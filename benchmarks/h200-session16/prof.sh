#!/bin/bash
# Profile bench_tasks on the H200: baseline, then perf on the tokio and executor modes.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=./.gpu/bench_tasks
mkdir -p $OUT/r; cd $OUT/r
cat /proc/sys/kernel/perf_event_paranoid > paranoid.txt; nproc >> paranoid.txt
$P stat -e task-clock,context-switches,cpu-migrations true > stat0.txt 2>&1
/work/*/.gpu/bench_tasks --help >/dev/null 2>&1
cd - >/dev/null
$B --modes raw-batch,executor,tokio,tokio-w1 --tasks 1000,10000 --reps 5 --out $OUT/r > $OUT/r/base.txt 2>&1
$P stat -e task-clock,context-switches,cpu-migrations -- $B --modes tokio --tasks 10000 --reps 5 --out /tmp > $OUT/r/stat_tokio.txt 2>&1
$P record -F 4000 -g --call-graph dwarf,16384 -o /tmp/tokio.data -- $B --modes tokio --tasks 10000 --reps 3 --out /tmp > $OUT/r/rec_tokio.txt 2>&1
$P report -i /tmp/tokio.data --no-children --sort sym --stdio 2>/dev/null | grep -v "^$" | head -400 > $OUT/r/tokio_self.txt
$P report -i /tmp/tokio.data --children --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $OUT/r/tokio_children.txt
$P record -F 4000 -g --call-graph dwarf,16384 -o /tmp/exec.data -- $B --modes executor --tasks 1000 --reps 15 --out /tmp > $OUT/r/rec_exec.txt 2>&1
$P report -i /tmp/exec.data --no-children --sort sym --stdio 2>/dev/null | grep -v "^$" | head -400 > $OUT/r/exec_self.txt
$P report -i /tmp/exec.data --children --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $OUT/r/exec_children.txt
$P report -i /tmp/exec.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -80 > $OUT/r/exec_comm.txt
$P report -i /tmp/tokio.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -80 > $OUT/r/tokio_comm.txt
cd $OUT && tar czf r.tgz r && rm -rf r
