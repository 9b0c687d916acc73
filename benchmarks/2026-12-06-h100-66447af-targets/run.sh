#!/bin/bash
# Every target in one call (targets_gpu.sh), then CPU profiles of the tokio shares front's timed
# intervals at both record sizes (frame-pointer build of the same commit).
set -u
OUT=$OUT bash benchmarks/tools/targets_gpu.sh
R=$OUT/p; mkdir -p $R
. benchmarks/tools/gpu_env.sh
P=./.gpu/perf/perf
PL=$PWD/.gpu/perf/lib
prof() {
    name=$1; shift
    rm -f /tmp/ctl /tmp/ack; mkfifo /tmp/ctl /tmp/ack
    VKASYNC_PERF_CTL=/tmp/ctl VKASYNC_PERF_ACK=/tmp/ack LD_LIBRARY_PATH=$PL timeout 60 $P record -F 4999 -g -D -1 --control fifo:/tmp/ctl,/tmp/ack -o /tmp/p-$name.data "$@" > $R/run-$name.txt 2>&1
    export LD_LIBRARY_PATH=$PL
    $P report -i /tmp/p-$name.data --stdio --no-children --sort sym -g none --percent-limit 0.25 > $R/flat-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --no-children --sort pid -g none > $R/threads-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --children --sort sym -g none --percent-limit 0.5 > $R/incl-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --no-children --sort sym -g caller,0.5,callee,function,percent --percent-limit 1.5 > $R/graph-$name.txt 2>/dev/null
    unset LD_LIBRARY_PATH
}
for s in 1024 16384; do
    prof shares-$s .gpu/tls_fp --connections 10000 --records 1 --record-size $s --reps 25 --modes staged-shares
done
cd $OUT && tar czf p.tgz p && rm -rf p
ls -la $OUT
