#!/bin/bash
# Session 18, run X2b (nvidia-h200-x2): where the tokio front's time goes with one GPU and two
# (build 8da0515): traces (VKASYNC_TRACE) at T = 10,000 and perf at T = 100,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=$PWD/.gpu/bench_tasks_base
R=$OUT/r; mkdir -p $R
VKASYNC_TRACE=$R/tokio-10k.json $B --modes tokio --tasks 10000 --reps 2 --out /tmp > $R/tr_tokio.txt 2>&1
VKASYNC_TRACE=$R/set-10k.json $B --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_set.txt 2>&1
for m in tokio tokio-set; do
  $P record -F 4000 -g -o /tmp/$m.data -- $B --modes $m --gpus 2 --tasks 100000 --reps 3 --out /tmp > $R/rec_$m.txt 2>&1
  $P report -i /tmp/$m.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $R/${m}_comm.txt
  $P report -i /tmp/$m.data --children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -250 > $R/${m}_children.txt
done
cd $R && gzip *.json; cd $OUT && tar czf r.tgz r && rm -rf r
