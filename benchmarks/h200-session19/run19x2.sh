#!/bin/bash
# Session 19, run X2 (nvidia-h200-x2): one GPU against two through a QueueSet, with pipeline
# depth 2 (the default) and 1 (VKASYNC_PIPELINE_DEPTH=1), one binary, ROUNDS rounds (default
# 2) alternating the order; then a smaller set group bound, a perf profile and traces.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=./.gpu/bench_tasks_pipe; S=./.gpu/tls_pipeline_pipe
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in $(seq 1 ${ROUNDS:-2}); do
  order="2 1"; [ $((round % 2)) = 0 ] && order="1 2"
  for d in $order; do
    D=$R/d$d-$round; mkdir -p $D
    VKASYNC_PIPELINE_DEPTH=$d $B --modes executor,tokio,tokio-w8,tokio-set --gpus 2 --tasks 1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
    for w in 16 32; do
      VKASYNC_PIPELINE_DEPTH=$d $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers $w --modes coalesced-tokio,coalesced-tokio-set --gpus 2 --csv $D/sealing-w$w.csv > $D/sealing-w$w.txt 2>&1
    done
  done
done
mkdir -p $R/g48
$B --modes tokio,tokio-set --gpus 2 --set-group-ops 48 --tasks 10000,100000 --reps 5 --out $R/g48 > $R/g48/log.txt 2>&1
$P record -F 4000 -g -o /tmp/set.data -- $B --modes tokio-set --gpus 2 --tasks 100000 --reps 3 --out /tmp > $R/rec_set.txt 2>&1
$P report -i /tmp/set.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $R/set_comm.txt
$P report -i /tmp/set.data --children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -250 > $R/set_children.txt
VKASYNC_TRACE=$R/set-10k.json $B --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_set.txt 2>&1
VKASYNC_TRACE=$R/seal-set.json $S --connections 10000 --records 1 --record-size 16384 --reps 1 --workers 16 --modes coalesced-tokio-set --gpus 2 > $R/tr_seal_set.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
