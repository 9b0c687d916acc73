#!/bin/bash
# Session 19, run X2 (nvidia-h200-x2; not run: the kind was not lent): one GPU against two
# through a QueueSet, with main at the end of session 19 (.gpu/bench_tasks_cc3 and
# .gpu/tls_pipeline_cc3, release builds) and at its start (376c783; *_main), ROUNDS rounds
# (default 2) alternating the order; then a perf profile and a trace of the set.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in $(seq 1 ${ROUNDS:-2}); do
  order="new main"; [ $((round % 2)) = 0 ] && order="main new"
  for b in $order; do
    case $b in new) B=./.gpu/bench_tasks_cc3; S=./.gpu/tls_pipeline_cc3;; main) B=./.gpu/bench_tasks_main; S=./.gpu/tls_pipeline_main;; esac
    D=$R/$b-$round; mkdir -p $D
    $B --modes executor,tokio,tokio-set --gpus 2 --set-workers 16 --tasks 1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
    for w in 16 32; do
      $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers $w --modes coalesced-tokio,coalesced-tokio-set --gpus 2 --csv $D/sealing-w$w.csv > $D/sealing-w$w.txt 2>&1
    done
  done
done
mkdir -p $R/w32
./.gpu/bench_tasks_cc3 --modes tokio,tokio-w32,tokio-set --gpus 2 --set-workers 32 --tasks 10000,100000 --reps 5 --out $R/w32 > $R/w32/log.txt 2>&1
$P record -F 4000 -g -o /tmp/set.data -- ./.gpu/bench_tasks_cc3 --modes tokio-set --gpus 2 --tasks 100000 --reps 3 --out /tmp > $R/rec_set.txt 2>&1
$P report -i /tmp/set.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -v "^$" | head -150 > $R/set_comm.txt
VKASYNC_TRACE=$R/set-10k.json ./.gpu/bench_tasks_cc3 --modes tokio-set --gpus 2 --tasks 10000 --reps 2 --out /tmp > $R/tr_set.txt 2>&1
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
