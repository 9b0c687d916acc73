#!/bin/bash
# Session 21, run B (one H200): the trace's cost after run A. m21 = main (2b5ebd3); n21 =
# branch trace-cheap (events as words stored in place); x21 = n21 plus the experiment switches
# of run A. Part 1: a microbenchmark of single trace steps (vkasync_micro*, the library's
# unit-test binary with a temporary test). Part 2: three rounds, order rotating, executor
# plain / timed / traced at T = 1,000 and 10,000. Part 3: flat perf profiles of x21 with
# host events only, executor against executor-traced, T = 1,000.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
for b in micro_m21 micro21 micro_m21 micro21; do ./.gpu/vkasync_$b microbench --nocapture >> $R/$b.txt 2>&1; done
run() { # name binary env...
  local name=$1 bin=$2; shift 2
  D=$R/$name-$round; mkdir -p $D
  env "$@" ./.gpu/bench_tasks_$bin --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 40 --out $D > $D/log.txt 2>&1
}
for round in 1 2 3; do
  case $round in 1) order="m n g";; 2) order="g n m";; 3) order="n m g";; esac
  for v in $order; do
    case $v in
      m) run main m21 X=1;;
      n) run new n21 X=1;;
      g) run nogpu x21 VKASYNC_EXP_NO_OWNERS=1 VKASYNC_EXP_NO_GPU=1;;
    esac
  done
done
P="env LD_LIBRARY_PATH=.gpu/perf/lib .gpu/perf/perf"
for m in executor executor-traced; do
  VKASYNC_EXP_NO_OWNERS=1 VKASYNC_EXP_NO_GPU=1 $P record -q -F 5000 -o /tmp/p-$m.data ./.gpu/bench_tasks_x21 --modes $m --tasks 1000 --reps 300 --out /tmp/o-$m > $R/perf-$m-log.txt 2>&1
  $P report -i /tmp/p-$m.data --sort comm,dso,sym --stdio 2>/dev/null | head -150 > $R/perf-$m-flat.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
