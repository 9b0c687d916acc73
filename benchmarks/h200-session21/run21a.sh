#!/bin/bash
# Session 21, run A (one H200): the trace's cost. m21 = main at the session's start (2b5ebd3);
# n21 = branch trace-cheap (a8a53b4: lock-free per-thread logs, plain-data GPU commands);
# x21 = n21 plus two experiment switches (not shipped): VKASYNC_EXP_NO_OWNERS (no per-task
# attribution) and VKASYNC_EXP_NO_GPU (no timestamps: host events only). Three rounds, order
# rotating; each process runs the executor plain, timed and traced, T = 1,000 and 10,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name'; cat /sys/devices/system/clocksource/clocksource0/current_clocksource) > $R/host.txt 2>&1
run() { # name binary env...
  local name=$1 bin=$2; shift 2
  D=$R/$name-$round; mkdir -p $D
  env "$@" ./.gpu/bench_tasks_$bin --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
}
for round in 1 2 3; do
  case $round in
    1) order="m n o g";; 2) order="g o n m";; 3) order="n m g o";;
  esac
  for v in $order; do
    case $v in
      m) run main m21 X=1;;
      n) run new n21 X=1;;
      o) run noowners x21 VKASYNC_EXP_NO_OWNERS=1;;
      g) run nogpu x21 VKASYNC_EXP_NO_OWNERS=1 VKASYNC_EXP_NO_GPU=1;;
    esac
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
