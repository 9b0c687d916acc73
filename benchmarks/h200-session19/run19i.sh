#!/bin/bash
# Session 19, run I (nvidia-h200): perf profile of the tokio front (one Queue, 16 workers) with
# the session's last build, T = 100,000; and of the same over two logical devices (tokio-set).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
R=$OUT/r; mkdir -p $R
for m in tokio tokio-set; do
  $P record -F 2000 -g -o /tmp/$m.data -- ./.gpu/bench_tasks_cc3 --modes $m --gpus 2 --tasks 100000 --reps 3 --out /tmp > $R/rec_$m.txt 2>&1
  $P report -i /tmp/$m.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -120 > $R/${m}_self.txt
  $P report -i /tmp/$m.data --children --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -200 > $R/${m}_children.txt
  $P report -i /tmp/$m.data --no-children --sort comm --stdio -g none 2>/dev/null | grep -v "^$" | head -30 > $R/${m}_comm.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
