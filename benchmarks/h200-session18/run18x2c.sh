#!/bin/bash
# Session 18, run X2c (nvidia-h200-x2): base (8da0515) against new (the session's last build:
# woken waits without the lock, read's record and wait under one hold, the spinning lock, a
# lone job's spin), two rounds alternating; then
# branch encode-ahead-2 with and without encoding ahead; new's QueueSet with smaller group bounds
# (--set-group-ops 48, 32); sealing; perf of new.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in $(seq 1 ${ROUNDS:-2}); do
  for b in base new; do
    mkdir -p $R/$b-$round
    ./.gpu/bench_tasks_$b --modes executor,tokio,tokio-set --gpus 2 --tasks 1000,10000,100000 --reps 5 --out $R/$b-$round > $R/$b-$round/log.txt 2>&1
    ./.gpu/tls_pipeline_$b --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced-tokio,coalesced-tokio-set --gpus 2 --csv $R/$b-$round/sealing16k-w16.csv > $R/$b-$round/sealing.txt 2>&1
  done
  for v in on off; do
    F=""; [ $v = off ] && F=--no-encode-ahead
    mkdir -p $R/ahead2-$v-$round
    ./.gpu/bench_tasks_ahead2 $F --modes tokio,tokio-set --gpus 2 --tasks 10000,100000 --reps 5 --out $R/ahead2-$v-$round > $R/ahead2-$v-$round/log.txt 2>&1
  done
  for g in 48 32; do
    mkdir -p $R/g$g-$round
    ./.gpu/bench_tasks_new --modes tokio,tokio-set --gpus 2 --set-group-ops $g --tasks 10000,100000 --reps 5 --out $R/g$g-$round > $R/g$g-$round/log.txt 2>&1
  done
done
$P record -F 4000 -g -o /tmp/new.data -- ./.gpu/bench_tasks_new --modes tokio-set --gpus 2 --tasks 100000 --reps 3 --out /tmp > $R/rec_new.txt 2>&1
$P report -i /tmp/new.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $R/new_set_comm.txt
$P report -i /tmp/new.data --children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -250 > $R/new_set_children.txt
VKASYNC_TRACE=$R/set-10k.json ./.gpu/bench_tasks_new --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_set.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
