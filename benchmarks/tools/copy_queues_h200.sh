#!/usr/bin/env bash
# Copy queues, the copy kernel and the tokio fronts on the H200, in one device call that fits
# its limit. Prepare here (see `../shared/GPU.md` for `.gl`):
#
#   cargo build --release --example tls_pipeline --example bench_tasks
#   cp target/release/examples/tls_pipeline .gpu/tls; cp target/release/examples/bench_tasks .gpu/bt
#   strip .gpu/tls .gpu/bt; git rev-parse --short HEAD > .gpu/commits.txt
#
# then call `run` with carry [".gl", ".gpu"] and, for a call limit of L seconds,
#
#   LIMIT=L OUT=$OUT benchmarks/tools/copy_queues_h200.sh
#
# It leaves `$OUT/ab.tgz` (`ab_h200.sh`) and, where time is left, `$OUT/r.tgz`. One binary runs
# every configuration, set by the environment (wrappers written into `.gpu/`):
# - `off`: the defaults (copies by the copy kernel on the compute queue);
# - `dma`: `VKASYNC_COMPUTE_COPIES=0`, `vkCmdCopyBuffer` on the compute queue (in the traces of
#   `2026-12-05-h200-fd091f0/overlap/`, `trace_timeline.py`, the copy kernel moved a flush's
#   records between host and device memory at 0.7–32 GB/s: 64 KB in 96 µs, 33.5 MB in 1.04 ms);
# - `on`: `VKASYNC_COPY_QUEUES=1`, uploads and read-backs on the transfer-only family's queues;
# - `t4`: `on` with `VKASYNC_COMPUTE_QUEUES=4`, consecutive flushes' kernels on 4 queues in turn;
# - `join`: `VKASYNC_BENCH_JOIN=shares`, each share's spawning task joins its own tasks.
# Modes `staged-tokio` (a task per connection), `staged-shares` (a task per worker, each
# connection a future of it) and `staged` (the native executor), at 16 KiB and 1 KiB.
# `r.tgz`: `bench_tasks` (a lone job and T = 1,000 beside the hand-written `raw-batch`) with copy
# queues off and on, then the `Offload::Auto` sweep (as `2026-12-04-h200-79e87fa/run13.sh`) off
# and on. The shorter the limit, the fewer configurations (below 360 s: off, on, t4, two rounds;
# below 250 s no traces and no `r.tgz`; below 200 s: off and on, the two tokio fronts).
set -u
OUT=${OUT:-/tmp/cq-out}
LIMIT=${LIMIT:-590}
cd "$(dirname "$0")/../.."
for v in "cq:VKASYNC_COPY_QUEUES=1" "cq-t4:VKASYNC_COPY_QUEUES=1 VKASYNC_COMPUTE_QUEUES=4" \
    "dma:VKASYNC_COMPUTE_COPIES=0" "join:VKASYNC_BENCH_JOIN=shares"; do
    printf '#!/bin/sh\n%s exec "$(dirname "$0")/tls" "$@"\n' "${v#*:}" > ".gpu/tls-${v%%:*}"
    chmod +x ".gpu/tls-${v%%:*}"
done
end=$(($(date +%s) + LIMIT - 15))

builds="off=.gpu/tls dma=.gpu/tls-dma on=.gpu/tls-cq t4=.gpu/tls-cq-t4 join=.gpu/tls-join" rounds=3
modes="staged-tokio staged-shares staged" trace=1
[ "$LIMIT" -lt 360 ] && builds="off=.gpu/tls on=.gpu/tls-cq t4=.gpu/tls-cq-t4" rounds=2
[ "$LIMIT" -lt 250 ] && trace=0
[ "$LIMIT" -lt 200 ] && builds="off=.gpu/tls on=.gpu/tls-cq" modes="staged-tokio staged-shares"
# shellcheck disable=SC2086 # the builds are separate arguments
ROUNDS=$rounds BUDGET=$((LIMIT < 450 ? LIMIT / 2 : 230)) MODES="$modes" TRACE=$trace OUT=$OUT \
    bash benchmarks/tools/ab_h200.sh $builds
[ $trace = 0 ] && exit 0

left=$((end - $(date +%s)))
tasks_s=$((left < 200 ? left / 3 : 80))
auto_s=$((left < 200 ? left / 2 : (left - 90 < 150 ? left - 90 : 150)))
export R=$OUT/r
mkdir -p "$R/tasks" "$R/auto/csv" "$R/auto/runs"
cp "$0" .gpu/commits.txt "$R/" 2> /dev/null
# shellcheck source=gpu_env.sh
. benchmarks/tools/gpu_env.sh
clocks_start "$R/clocks-50ms.csv"
timeout $tasks_s bash -c '
for r in 1 2 3; do
    for cq in 0 1; do
        VKASYNC_COPY_QUEUES=$cq .gpu/bt --modes raw-batch,executor,tokio --tasks 1,1000 --reps 15 \
            --out $R/tasks/cq$cq-$r > $R/tasks/cq$cq-$r.txt 2>&1
    done
done'
echo "tasks: exit $?" > "$R/exit.txt"
timeout $auto_s bash -c '
one() { n=$1; shift; .gpu/tls "$@" --csv $R/auto/csv/$n.csv --runs-csv $R/auto/runs/$n.csv > $R/auto/$n.txt 2>&1; }
M=auto,auto-tokio,host,coalesced,cpu-1
for c in 1 10 100 1000 10000; do
    for s in 1024 16384; do
        r=7; [ $c -le 100 ] && r=21
        one auto-$c-$s --connections $c --records 4 --record-size $s --reps $r --modes $M
        VKASYNC_COPY_QUEUES=1 one auto-cq-$c-$s --connections $c --records 4 --record-size $s --reps $r --modes $M
    done
done'
echo "auto: exit $?" >> "$R/exit.txt"
[ -n "$clocks" ] && kill "$clocks"
cd "$OUT" && tar czf r.tgz r && rm -rf r
