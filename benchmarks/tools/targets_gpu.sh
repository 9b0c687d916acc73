#!/usr/bin/env bash
# Every figure the performance targets ask for, on one GPU host, in one device call (about 350 s):
#
# 1. `ab/` (`ab_h200.sh`, one build): 10,000 connections × one record of 16 KiB and of 1 KiB,
#    the tokio fronts (`staged-shares`, `staged-tokio`) and the native executor (`staged`: one
#    executor; `staged-cores`: one executor per core, each over its share of the connections;
#    `staged-cores-queue`: those executors recording through one shared queue),
#    RustCrypto on all cores (`cpu-all`) in every round, OpenSSL, the SM clock by run;
# 2. `defaults/` (`defaults_gpu.sh`): the main example with no arguments, with and without copy
#    queues;
# 3. `tasks/`: `bench_tasks`, a lone job and T = 1,000 jobs beside the hand-written submit-and-wait
#    (`raw-batch`), three processes, each with the steal time while it ran (`tasks/N.stat`,
#    `steal.py`);
# 4. `auto/`: the `Offload::Auto` sweep, C connections × 4 records for C = 1 … 10,000 at 1 KiB
#    and 16 KiB: `auto`, `auto-tokio`, the host alone (`host`), the GPU alone (`coalesced`), and a
#    plain RustCrypto loop (`cpu-1`).
#
# Run on the device machine from the repository root with the two binaries built here (see
# `../shared/GPU.md`; carry `.gl` and `.gpu`):
#
#   cargo build --release --example tls_pipeline --example bench_tasks
#   cp target/release/examples/tls_pipeline .gpu/tls; cp target/release/examples/bench_tasks .gpu/bt
#   strip .gpu/tls .gpu/bt; git rev-parse --short HEAD > .gpu/commits.txt
#   OUT=$OUT benchmarks/tools/targets_gpu.sh
#
# It leaves `$OUT/ab.tgz`, `$OUT/defaults.tgz` and `$OUT/r.tgz` (tasks and auto, with the SM
# clock sampled every 50 ms).
set -u
OUT=${OUT:-/tmp/targets-out}
tools=$(cd "$(dirname "$0")" && pwd)
cd "$tools/../.."
ROUNDS=3 REPS=9 BUDGET=250 MODES="staged-shares staged-tokio staged staged-cores staged-cores-queue" SIZES="16384 1024" TRACE=0 OUT=$OUT \
    bash "$tools/ab_h200.sh" base=.gpu/tls
ROUNDS=1 OUT=$OUT timeout 150 "$tools/defaults_gpu.sh" .gpu/tls

export R=$OUT/r
mkdir -p "$R/tasks" "$R/auto/csv" "$R/auto/runs"
cp .gpu/commits.txt "$R/" 2> /dev/null
# shellcheck source=gpu_env.sh
. "$tools/gpu_env.sh"
clocks_start "$R/clocks-50ms.csv"
timeout 45 bash -c '
for r in 1 2 3; do
    grep "^cpu" /proc/stat > $R/tasks/$r.stat
    .gpu/bt --modes raw-batch,executor,tokio --tasks 1,1000 --reps 15 --out $R/tasks/$r > $R/tasks/$r.txt 2>&1
    grep "^cpu" /proc/stat >> $R/tasks/$r.stat
done'
echo "tasks: exit $?" > "$R/exit.txt"
timeout 110 bash -c '
one() { n=$1; shift; .gpu/tls "$@" --csv $R/auto/csv/$n.csv --runs-csv $R/auto/runs/$n.csv > $R/auto/$n.txt 2>&1; }
for c in 1 10 100 1000 10000; do
    for s in 1024 16384; do
        r=7; [ $c -le 100 ] && r=21
        one auto-$c-$s --connections $c --records 4 --record-size $s --reps $r --modes auto,auto-tokio,host,coalesced,cpu-1
    done
done'
echo "auto: exit $?" >> "$R/exit.txt"
[ -n "$clocks" ] && kill "$clocks"
cd "$OUT" && tar czf r.tgz r && rm -rf r
