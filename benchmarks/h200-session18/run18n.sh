#!/bin/bash
# Session 18, run N (nvidia-h200): where the executor's threads spend their time at T = 1,000
# with the last build (perf, flat profile by thread and symbol).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
R=$OUT/r; mkdir -p $R
$P record -F 10000 -g -o /tmp/ex.data -- ./.gpu/bench_tasks_new --modes executor --tasks 1000 --reps 300 --out /tmp > $R/rec.txt 2>&1
$P report -i /tmp/ex.data --no-children --sort comm,dso,sym --stdio -g none 2>/dev/null | grep -v "^$" | grep -v "^#" | head -70 > $R/flat.txt
$P report -i /tmp/ex.data --children --comm bench_tasks_new --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | grep -v "^#" | head -90 > $R/children.txt
cd $OUT && tar czf r.tgz r && rm -rf r
