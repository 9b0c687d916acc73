#!/bin/bash
# 2026-12-01, one H200: main at 1460991 (new: .gpu/*_cc3) against main at 376c783 (.gpu/*_main),
# two rounds, order alternating; then the main example on its defaults (example-new.txt).
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for round in 1 2; do
  order="new main"; [ $round = 2 ] && order="main new"
  for b in $order; do
    case $b in new) B=./.gpu/bench_tasks_cc3; S=./.gpu/tls_pipeline_cc3;; main) B=./.gpu/bench_tasks_main; S=./.gpu/tls_pipeline_main;; esac
    D=$R/$b-$round; mkdir -p $D
    $B --modes sequential,raw-batch,executor,tokio,tokio-set --gpus 2 --tasks 1,1000,10000 --reps 5 --out $D > $D/log.txt 2>&1
    mkdir -p $D/t100k; $B --modes raw-batch,executor,tokio,tokio-set --gpus 2 --tasks 100000 --reps 3 --out $D/t100k > $D/t100k/log.txt 2>&1
    $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $D/sealing.csv > $D/sealing.txt 2>&1
  done
done
./.gpu/tls_pipeline_cc3 > $R/example-new.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
