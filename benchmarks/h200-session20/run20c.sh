#!/bin/bash
# Session 20, run C (one H200): branch notify-asleep (*_n20) against main (*_s20), three
# rounds alternating the order: mix at T = 1,000 / 10,000 / 100,000 (executor, traced
# executor, tokio with 16 and 8 workers, a set of 3 lanes) and sealing under tokio.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2 3; do
  order="n20 s20"; [ $((round % 2)) = 0 ] && order="s20 n20"
  for b in $order; do
    D=$R/$b-$round; mkdir -p $D
    ./.gpu/bench_tasks_$b --modes executor,executor-traced,tokio,tokio-w8 --tasks 1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
    mkdir -p $D/set; ./.gpu/bench_tasks_$b --modes tokio-set --gpus 1 --lanes 3 --tasks 10000,100000 --reps 5 --out $D/set > $D/set/log.txt 2>&1
    ./.gpu/tls_pipeline_$b --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced-tokio --csv $D/seal.csv > $D/seal.txt 2>&1
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
