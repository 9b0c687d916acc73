#!/bin/bash
# The device call of 2026-12-07 (run from the repository root with .gpu/tls built at 0bd5ac7,
# carrying .gl and .gpu): where the best GPU front's time goes at 10,000 x 1 KiB. Untraced runs,
# then traces by phase and by command (`VKASYNC_TRACE_DETAIL=commands`), three runs each.
set -u
cd "$(dirname "$0")/../.."
tools=benchmarks/tools
R=$OUT/pipeline1k; mkdir -p $R
. $tools/gpu_env.sh
host_describe > $R/host.txt
nvidia-smi -L > $R/gpu.txt 2>&1
clocks_start $R/clocks-50ms.csv
A="--connections 10000 --records 1 --record-size 1024"
timeout 60 .gpu/tls $A --reps 9 --modes staged-shares,cpu-all --runs-csv $R/untraced-runs.csv > $R/untraced.txt 2>&1
VKASYNC_TRACE=$R/phases.json timeout 60 .gpu/tls $A --reps 3 --modes staged-shares --runs-csv $R/phases-runs.csv > $R/phases.txt 2>&1
VKASYNC_TRACE=$R/commands.json VKASYNC_TRACE_DETAIL=commands timeout 60 .gpu/tls $A --reps 3 --modes staged-shares --runs-csv $R/commands-runs.csv > $R/commands.txt 2>&1
[ -n "$clocks" ] && kill "$clocks"
for t in phases commands; do
    python3 $tools/trace_summary.py $R/$t.json > $R/$t-summary.txt 2>&1
    python3 $tools/trace_overlap.py $R/$t.json > $R/$t-overlap.txt 2>&1
done
gzip $R/*.json
cd $OUT && tar czf pipeline1k.tgz pipeline1k && rm -rf pipeline1k
