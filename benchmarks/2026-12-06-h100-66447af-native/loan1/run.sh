#!/bin/bash
# CPU profiles of the native executor's timed region on the GPU host (frame-pointer builds).
set -u
R=$OUT/r; mkdir -p $R/profile
. benchmarks/tools/gpu_env.sh
clocks_start $R/clocks-50ms.csv
nproc > $R/host.txt; lscpu | grep -i -e "model name" -e "mhz" >> $R/host.txt
cat /proc/sys/kernel/perf_event_paranoid >> $R/host.txt 2>&1
P=./.gpu/perf/perf
PL=$PWD/.gpu/perf/lib
$P --version > $R/perf-version.txt 2>&1 || LD_LIBRARY_PATH=$PL $P --version >> $R/perf-version.txt 2>&1
# Plain numbers first (no profiler), one process.
timeout 60 .gpu/tls_fp --connections 10000 --records 1 --record-size 16384 --reps 9 --modes staged,staged-tokio,staged-shares,cpu-all --csv $R/plain.csv > $R/plain.txt 2>&1
prof() {
    name=$1; shift
    rm -f /tmp/ctl; mkfifo /tmp/ctl
    VKASYNC_PERF_CTL=/tmp/ctl LD_LIBRARY_PATH=$PL timeout 90 $P record -F 4999 -g -D -1 --control fifo:/tmp/ctl -o /tmp/p-$name.data "$@" > $R/profile/run-$name.txt 2>&1
    rep $name
}
rep() {
    name=$1
    export LD_LIBRARY_PATH=$PL
    $P report -i /tmp/p-$name.data --stdio --no-children --sort comm,sym -g none --percent-limit 0.25 > $R/profile/flat-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --no-children --sort pid -g none > $R/profile/threads-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --children --comm tls_fp,bt_fp,tokio-runtime-w --sort sym -g none --percent-limit 0.5 > $R/profile/incl-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --no-children --comm tls_fp,bt_fp,tokio-runtime-w --sort sym -g caller,0.5,callee,function,percent --percent-limit 1.5 > $R/profile/graph-$name.txt 2>/dev/null
    unset LD_LIBRARY_PATH
}
prof staged-16384 .gpu/tls_fp --connections 10000 --records 1 --record-size 16384 --reps 15 --modes staged
prof staged-1024 .gpu/tls_fp --connections 10000 --records 1 --record-size 1024 --reps 15 --modes staged
prof shares-16384 .gpu/tls_fp --connections 10000 --records 1 --record-size 16384 --reps 15 --modes staged-shares
# bench_tasks has no control FIFO: the whole process (its timed reps are most of it).
LD_LIBRARY_PATH=$PL timeout 90 $P record -F 4999 -g -o /tmp/p-mix.data .gpu/bt_fp --modes executor --tasks 1000 --reps 60 --out $R/bt > $R/profile/run-mix.txt 2>&1
rep mix
timeout 40 .gpu/bt_fp --modes raw-batch,executor,tokio --tasks 1,1000 --reps 15 --out $R/bt2 > $R/bt2.txt 2>&1
[ -n "$clocks" ] && kill $clocks
cd $OUT && tar czf r.tgz r && rm -rf r
