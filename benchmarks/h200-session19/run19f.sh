#!/bin/bash
# Session 19, run F (nvidia-h200): compute copies, with the executor loop's groups handed to
# its driver thread (branch compute-copies), copies on and off, against main at the session
# start (376c783); three rounds, order rotating; a trace of the executor.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
B=./.gpu/bench_tasks_cc3
VKASYNC_TRACE=$R/exec-c1.json $B --modes executor --tasks 10000 --reps 1 --out /tmp > $R/tr_exec_c1.txt 2>&1
run() { D=$R/$1-$round; mkdir -p $D; env $2 $3 --modes raw-batch,executor,tokio,tokio-set --gpus 2 --tasks 1,10,1000,10000,100000 --reps 5 --out $D > $D/log.txt 2>&1; }
for round in 1 2 3; do
  case $round in 1) order="c1 c0 main";; 2) order="c0 main c1";; 3) order="main c1 c0";; esac
  for v in $order; do
    case $v in c1) run c1 VKASYNC_COMPUTE_COPIES=1 $B;; c0) run c0 VKASYNC_COMPUTE_COPIES=0 $B;; main) run main X=1 ./.gpu/bench_tasks_main;; esac
  done
done
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
