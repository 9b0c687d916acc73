#!/bin/bash
# The executor's group bound at T = 100 ... 100,000 (bench_tasks --max-group-ops), alternating
# processes, then where the time goes at 10,000 x 1 KiB (../2026-12-07-h100-0bd5ac7-pipeline-1k/run.sh), on 0bd5ac7.
set -u
cd "$(dirname "$0")/../.."
cp .gpu/commits.txt $OUT/
nvidia-smi -L > $OUT/gpu.txt 2>&1
. benchmarks/tools/gpu_env.sh
host_describe > $OUT/host.txt 2>&1
S=$OUT/sweep2; mkdir -p $S
clocks_start $S/clocks-50ms.csv
timeout 170 bash -c '
for r in 1 2 3; do for g in 96 256 512 1024 18446744073709551615; do
    grep "^cpu" /proc/stat > '$S'/$r-$g.stat
    .gpu/bt --modes raw-batch,executor --tasks 100,1000,10000,100000 --reps 7 --max-group-ops $g --out '$S'/$r-$g > '$S'/$r-$g.txt 2>&1
    grep "^cpu" /proc/stat >> '$S'/$r-$g.stat
done; done'
echo "sweep exit $?" > $S/exit.txt
[ -n "$clocks" ] && kill "$clocks"
(cd $OUT && tar czf sweep2.tgz sweep2 && rm -rf sweep2)
timeout 200 bash benchmarks/2026-12-07-h100-0bd5ac7-pipeline-1k/run.sh > $OUT/run33.log 2>&1
echo "run33 exit $?" >> $OUT/run33.log
