#!/bin/bash
# Split granularity and compute queues (env variants of one build); the native executor's
# one-hold recording (branch native-cost) against main; the mix at T = 1,000; profiles.
set -u
R=$OUT/r; mkdir -p $R/tasks $R/profile
cp .gpu/commits.txt $R/
ROUNDS=3 REPS=9 BUDGET=200 MODES="staged-shares" SIZES="16384 1024" TRACE=0 OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh base=.gpu/tls s8=.gpu/s8 s4=.gpu/s4 s2=.gpu/s2 q8s4=.gpu/q8s4
mv $OUT/ab.tgz $OUT/split.tgz
ROUNDS=4 REPS=9 BUDGET=90 MODES="staged" SIZES="16384" TRACE=0 OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh base=.gpu/tls new=.gpu/tls-new
mv $OUT/ab.tgz $OUT/native.tgz
. benchmarks/tools/gpu_env.sh
clocks_start $R/clocks-50ms.csv
timeout 80 bash -c '
for i in 1 2 3 4; do for b in bt bt-new; do
  .gpu/$b --modes raw-batch,executor,tokio --tasks 1,1000 --reps 15 --out $R/tasks/$b-$i > $R/tasks/$b-$i.txt 2>&1
done; done'
P=./.gpu/perf/perf
PL=$PWD/.gpu/perf/lib
prof() {
    name=$1; shift
    rm -f /tmp/ctl /tmp/ack; mkfifo /tmp/ctl /tmp/ack
    VKASYNC_PERF_CTL=/tmp/ctl VKASYNC_PERF_ACK=/tmp/ack LD_LIBRARY_PATH=$PL timeout 60 $P record -F 4999 -g -D -1 --control fifo:/tmp/ctl,/tmp/ack -o /tmp/p-$name.data "$@" > $R/profile/run-$name.txt 2>&1
    export LD_LIBRARY_PATH=$PL
    $P report -i /tmp/p-$name.data --stdio --no-children --sort comm,sym -g none --percent-limit 0.25 > $R/profile/flat-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --no-children --sort pid -g none > $R/profile/threads-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --children --comm tls_fp,bt_fp --sort sym -g none --percent-limit 0.5 > $R/profile/incl-$name.txt 2>/dev/null
    $P report -i /tmp/p-$name.data --stdio --no-children --comm tls_fp,bt_fp --sort sym -g caller,0.5,callee,function,percent --percent-limit 1.5 > $R/profile/graph-$name.txt 2>/dev/null
    unset LD_LIBRARY_PATH
}
prof mix .gpu/bt_fp --modes executor --tasks 1000 --reps 100 --out $R/bt-prof
prof staged-16384 .gpu/tls_fp --connections 10000 --records 1 --record-size 16384 --reps 25 --modes staged
[ -n "$clocks" ] && kill $clocks
cd $OUT && tar czf r.tgz r && rm -rf r
ls -la $OUT
