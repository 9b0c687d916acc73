#!/bin/bash
# 2026-12-01, one H200, main at b62c01b: queues per GPU ("lanes", logical devices with a queue each)
# against one queue, under tokio; mix at T = 10,000 and 100,000, sealing 10,000 x 16 KiB;
# then a perf profile of one queue under tokio at T = 100,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=./.gpu/bench_tasks_s20; S=./.gpu/tls_pipeline_s20
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2; do
  for L in 1 2 3 4; do
    D=$R/mix-r$round-l$L; mkdir -p $D
    m=tokio-set; [ $L = 1 ] && m=executor,tokio,tokio-set
    $B --modes $m --gpus 1 --lanes $L --set-workers 16 --tasks 10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
  done
  for L in 1 2 4; do
    m=coalesced-tokio-set; [ $L = 1 ] && m=coalesced-tokio,coalesced-tokio-set,cpu-all
    $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes $m --gpus 1 --lanes $L --csv $R/seal-r$round-l$L.csv > $R/seal-r$round-l$L.txt 2>&1
  done
done
$P record -F 4000 -g -o /tmp/q.data -- $B --modes tokio --tasks 100000 --reps 3 --out /tmp > $R/rec_q.txt 2>&1
$P report -i /tmp/q.data --no-children --sort sym --stdio -g none 2>/dev/null | grep -v "^$" | head -80 > $R/q_sym.txt
$P report -i /tmp/q.data --no-children --sort sym --stdio -g caller,0.5,callee --percent-limit 3 2>/dev/null | grep -v "^$" | head -300 > $R/q_callers.txt
cd $OUT && tar czf r.tgz r && rm -rf r
