#!/bin/bash
# The executor's group bound at T = 1,000 (bench_tasks --max-group-ops), three rounds, then every
# target, on 0bd5ac7 (run from the repository root, carrying .gl and .gpu).
set -u
cd "$(dirname "$0")/../.."
cp .gpu/commits.txt $OUT/
nvidia-smi -L > $OUT/gpu.txt 2>&1
nvidia-smi -q -d CLOCK > $OUT/clocks-before.txt 2>&1
. benchmarks/tools/gpu_env.sh
host_describe > $OUT/host.txt 2>&1
S=$OUT/sweep; mkdir -p $S
clocks_start $S/clocks-50ms.csv
timeout 80 bash -c '
for r in 1 2 3; do for g in 32 64 96 160 256 512; do
    grep "^cpu" /proc/stat > '$S'/$r-$g.stat
    .gpu/bt --modes raw-batch,executor --tasks 1000 --reps 15 --max-group-ops $g --out '$S'/$r-$g > '$S'/$r-$g.txt 2>&1
    grep "^cpu" /proc/stat >> '$S'/$r-$g.stat
done; done'
echo "sweep exit $?" > $S/exit.txt
[ -n "$clocks" ] && kill "$clocks"
(cd $OUT && tar czf sweep.tgz sweep && rm -rf sweep)
OUT=$OUT timeout 490 bash benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
