#!/bin/bash
# Session 19, run E (nvidia-h200): compute copies with the executor loop's minimum inline group
# (branch compute-copies), copies on (default) and off (VKASYNC_COMPUTE_COPIES=0), against
# main's build of the session start (376c783), three rounds, order rotating; traces.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
B=./.gpu/bench_tasks_cc2; S=./.gpu/tls_pipeline_cc2
VKASYNC_TRACE=$R/exec-c1.json $B --modes executor --tasks 10000 --reps 1 --out /tmp > $R/tr_exec_c1.txt 2>&1
VKASYNC_TRACE=$R/tokio-c1.json $B --modes tokio --tasks 10000 --reps 1 --out /tmp > $R/tr_tokio_c1.txt 2>&1
run() { # name env binary
  D=$R/$1-$round; mkdir -p $D
  env $2 $3 --modes raw-batch,executor,tokio,tokio-w8,tokio-set --gpus 2 --tasks 1,10,1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1
}
for round in 1 2 3; do
  case $round in 1) order="c1 c0 main";; 2) order="c0 main c1";; 3) order="main c1 c0";; esac
  for v in $order; do
    case $v in c1) run c1 VKASYNC_COMPUTE_COPIES=1 $B;; c0) run c0 VKASYNC_COMPUTE_COPIES=0 $B;; main) run main X=1 ./.gpu/bench_tasks_main;; esac
  done
done
for c in 1 0; do VKASYNC_COMPUTE_COPIES=$c $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio > $R/sealing-c$c.txt 2>&1; done
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
